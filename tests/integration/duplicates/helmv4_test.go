package duplicates_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/tests/fleetagent"
	"leasetune.io/leasetune/tests/helmchart"
)

// ssaDuplicateErr is what kube-apiserver's server-side apply answers to an
// applied configuration that repeats a key of a map-list (env is keyed by
// name).
const ssaDuplicateErr = `duplicate entries for key [name="CATTLE_ELECTION_RETRY_PERIOD"]`

// agentChart writes a chart whose one template is the agent Deployment as
// the double renders it, as Fleet hands its agent bundle to helm.
func agentChart(t *testing.T, obj runtime.Object) string {
	t.Helper()
	dir := t.TempDir()
	body, err := fleetagent.Manifest(obj)
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.JSONToYAML(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, b := range map[string][]byte{
		"Chart.yaml":           []byte("apiVersion: v2\nname: fleet-agent\nversion: 0.0.1\n"),
		"templates/agent.yaml": y,
	} {
		if err := os.WriteFile(filepath.Join(dir, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestHelmV4Duplicates measures what a duplicate env name does under helm
// v4 (Fleet v0.15+ deploys bundles with it: rancher/fleet v0.16.1 go.mod
// helm.sh/helm/v4 v4.2.2), with the real helm v4.3.2 CLI and the apply
// methods Fleet's helmdeployer chooses (internal/helmdeployer/install.go,
// v0.16.1: configureInstallAction :225-234, server-side unless
// TakeOwnership or ForceReplace; configureUpgradeAction :303-307,
// "auto": the release's method), on the agent Deployment as the double
// renders Fleet v0.16.1's with a cluster's CATTLE_ELECTION_RETRY_PERIOD=3s
// beside Fleet's 10s:
//   - a release applied server-side fails every install and upgrade whose
//     manifest repeats the name, and the live Deployment stays as it was;
//   - a release applied client-side (helm v3's, and every Fleet agent
//     Bundle: Fleet gives it TakeOwnership, manageagent.go:413-417, so
//     helm v4 installs it client-side) drops the duplicate silently, as
//     helm v3 does (TestDuplicatePoison).
//
// What the real Fleet v0.16.1 agent does: tests/upstream/fleet016
// TestAgentDuplicateName.
func TestHelmV4Duplicates(t *testing.T) {
	const tag = "v0.16.1"
	h4, err := helmchart.PathOf(4)
	if err != nil {
		t.Fatal(err)
	}
	h3, err := helmchart.PathOf(3)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := cp.Kubeconfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := election.FleetDefaults
	helm := func(t *testing.T, bin, ns string, args ...string) error {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--kubeconfig", kc, "--namespace", ns}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return &helmError{out.String()}
		}
		return nil
	}
	generation := func(t *testing.T, ns string) int64 {
		t.Helper()
		d, err := cp.Client.AppsV1().Deployments(ns).Get(context.Background(), fleetagent.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.Generation
	}
	// ServerSideApply true on install, as configureInstallAction sets it.
	install := []string{"install", "fleet-agent-c-1", "--server-side=true"}
	upgrade := []string{"upgrade", "fleet-agent-c-1", "--server-side=auto"}

	t.Run("server-side install with a duplicate fails", func(t *testing.T) {
		ns := cp.Namespace(t)
		dup := agentChart(t, render(tag, ns, g, ev(P, "3s")))
		err := helm(t, h4, ns, append(install, dup)...)
		if err == nil || !strings.Contains(err.Error(), ssaDuplicateErr) {
			t.Fatalf("helm v4 install: %v, want %q", err, ssaDuplicateErr)
		}
		if _, err := cp.Client.AppsV1().Deployments(ns).Get(context.Background(), fleetagent.Name, metav1.GetOptions{}); err == nil {
			t.Fatal("the Deployment exists after the failed install")
		}
	})

	t.Run("server-side release: every upgrade with the duplicate fails, nothing changes, its removal applies", func(t *testing.T) {
		ns := cp.Namespace(t)
		if err := helm(t, h4, ns, append(install, agentChart(t, render(tag, ns, g, nil)))...); err != nil {
			t.Fatalf("helm v4 install: %v", err)
		}
		dup := agentChart(t, render(tag, ns, g, ev(P, "3s")))
		for i := 0; i < 2; i++ {
			err := helm(t, h4, ns, append(upgrade, dup)...)
			if err == nil || !strings.Contains(err.Error(), ssaDuplicateErr) {
				t.Fatalf("upgrade %d: %v, want %q", i+1, err, ssaDuplicateErr)
			}
			if got := values(live(t, ns, render(tag, ns, g, nil)), P); !same(got, []string{"10s"}) || generation(t, ns) != 1 {
				t.Fatalf("upgrade %d: live %s = %v, generation %d; want Fleet's [10s] untouched", i+1, P, got, generation(t, ns))
			}
		}
		// Another change (the agent triple) with the duplicate still
		// there: refused too, so the agent takes nothing.
		g2 := election.Timings{LeaseDuration: g.LeaseDuration, RenewDeadline: g.RenewDeadline, RetryPeriod: g.RetryPeriod + 5*time.Second}
		if err := helm(t, h4, ns, append(upgrade, agentChart(t, render(tag, ns, g2, ev(P, "3s"))))...); err == nil || !strings.Contains(err.Error(), ssaDuplicateErr) {
			t.Fatalf("a triple change beside the duplicate: %v, want %q", err, ssaDuplicateErr)
		}
		if generation(t, ns) != 1 {
			t.Fatal("the Deployment changed")
		}
		// Without the duplicate, the change applies: one rollout.
		if err := helm(t, h4, ns, append(upgrade, agentChart(t, render(tag, ns, g2, nil)))...); err != nil {
			t.Fatalf("upgrade without the duplicate: %v", err)
		}
		if got := values(live(t, ns, render(tag, ns, g2, nil)), P); !same(got, []string{"15s"}) || generation(t, ns) != 2 {
			t.Fatalf("live %s = %v, generation %d; want [15s], 2", P, got, generation(t, ns))
		}
	})

	t.Run("client-side release (installed by helm v3): upgrades drop the duplicate as helm v3 does", func(t *testing.T) {
		ns := cp.Namespace(t)
		if err := helm(t, h3, ns, "install", "fleet-agent-c-1", agentChart(t, render(tag, ns, g, nil))); err != nil {
			t.Fatalf("helm v3 install: %v", err)
		}
		dup := agentChart(t, render(tag, ns, g, ev(P, "3s")))
		for i := 0; i < 2; i++ {
			if err := helm(t, h4, ns, append(upgrade, dup)...); err != nil {
				t.Fatalf("helm v4 upgrade %d: %v", i+1, err)
			}
			if got := values(live(t, ns, render(tag, ns, g, nil)), P); !same(got, []string{"10s"}) {
				t.Fatalf("upgrade %d: live %s = %v, want [10s] (the cluster's 3s dropped)", i+1, P, got)
			}
		}
	})
}

type helmError struct{ out string }

func (e *helmError) Error() string { return e.out }
