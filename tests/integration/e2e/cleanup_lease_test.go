package e2e_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

// runCLIStatus runs a leasetune command for env e and returns its combined
// output and exit status.
func runCLIStatus(t *testing.T, e env, args ...string) (string, int) {
	t.Helper()
	args = append(args, "--kubeconfig", kubeconfig, "--namespace", e.ns, "--fleet-namespace", e.fleetNS, "--rancher-namespace", e.rancherNS)
	out, err := exec.Command(binary, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("leasetune %v: %v", args, err)
	return "", -1
}

// TestCleanupRefusedWhileAControllerRuns: `cleanup --yes` while a
// controller holds leasetune's Lease is refused, naming the holder, with a
// non-zero exit status, and removes nothing (state ConfigMaps, Lease, the
// clusters' entries and record all stay, nothing is written); with
// --force it proceeds (seen from watches: the running controller may
// write everything again at once, as the refusal says).
func TestCleanupRefusedWhileAControllerRuns(t *testing.T) {
	e := newEnv(t)
	installFleet(t, e, fleetV09)
	ns := cp.Namespace(t)
	addCluster(t, ns, "edge-1", nil)
	p := start(t, e, "replica-a")
	framework.Eventually(t, "leader", func() bool { return holder(t, e) == "replica-a" })
	framework.Eventually(t, "edge-1 written", func() bool {
		_, rec := annotations(t, fleetGVR, ns, "edge-1")[agentenv.RecordAnnotation]
		return rec && strings.HasSuffix(clusterEnv(t, ns, "edge-1"), "CATTLE_ELECTION_RETRY_PERIOD=10s")
	})
	time.Sleep(2 * time.Second)
	own := func() map[string]bool {
		out := map[string]bool{}
		for _, n := range []string{settings.DefaultStateName, fleetenv.ChannelConfigMapName} {
			_, err := cp.Client.CoreV1().ConfigMaps(e.ns).Get(context.Background(), n, metav1.GetOptions{})
			out["ConfigMap "+n] = err == nil
		}
		_, err := cp.Client.CoordinationV1().Leases(e.ns).Get(context.Background(), "leasetune", metav1.GetOptions{})
		out["Lease leasetune"] = err == nil
		return out
	}
	for k, ok := range own() {
		if !ok {
			t.Fatalf("%s missing before cleanup", k)
		}
	}
	env := clusterEnv(t, ns, "edge-1")
	before := versions(t, e)

	out, code := runCLIStatus(t, e, "cleanup", "--yes")
	t.Logf("cleanup --yes (exit %d):\n%s", code, out)
	if code == 0 {
		t.Errorf("cleanup --yes while replica-a leads: exit status 0")
	}
	if !strings.Contains(out, "replica-a holds leasetune's Lease "+e.ns+"/leasetune") || !strings.Contains(out, "--force") {
		t.Errorf("the refusal does not name the holder and the way out: %s", out)
	}
	for k, ok := range own() {
		if !ok {
			t.Errorf("refused cleanup deleted %s", k)
		}
	}
	if got := clusterEnv(t, ns, "edge-1"); got != env {
		t.Errorf("refused cleanup changed edge-1's env: %s → %s", env, got)
	}
	if _, rec := annotations(t, fleetGVR, ns, "edge-1")[agentenv.RecordAnnotation]; !rec {
		t.Error("refused cleanup removed edge-1's record")
	}
	if after := versions(t, e); after != before {
		t.Errorf("refused cleanup wrote something:\nbefore %s\nafter  %s", before, after)
	}

	// --force: it proceeds. Watches see the removals even if the running
	// controller puts things back at once.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	seen := map[string]bool{}
	cmw, err := cp.Client.CoreV1().ConfigMaps(e.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: cmRV(t, e)})
	if err != nil {
		t.Fatal(err)
	}
	cw, err := dyn(fleetGVR, ns).Watch(ctx, metav1.ListOptions{ResourceVersion: getObj(t, fleetGVR, ns, "edge-1").GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range cmw.ResultChan() {
			if m, ok := ev.Object.(metav1.Object); ok && ev.Type == watch.Deleted {
				mu.Lock()
				seen["deleted ConfigMap "+m.GetName()] = true
				mu.Unlock()
			}
		}
	}()
	go func() {
		for ev := range cw.ResultChan() {
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type == watch.Modified && u.GetName() == "edge-1" {
				if !strings.Contains(objEnv(u), "CATTLE_ELECTION") {
					mu.Lock()
					seen["edge-1 entries removed"] = true
					mu.Unlock()
				}
			}
		}
	}()
	out, code = runCLIStatus(t, e, "cleanup", "--yes", "--force")
	t.Logf("cleanup --yes --force (exit %d):\n%s", code, out)
	if code != 0 {
		t.Fatalf("cleanup --yes --force: exit %d", code)
	}
	for _, w := range []string{"deleted ConfigMap " + settings.DefaultStateName, "deleted ConfigMap " + fleetenv.ChannelConfigMapName, "edge-1 entries removed"} {
		framework.Eventually(t, w, func() bool { mu.Lock(); defer mu.Unlock(); return seen[w] })
	}
	// What the running controller does next is logged, not judged here.
	time.Sleep(2 * time.Second)
	select {
	case <-p.exited:
		t.Logf("the controller exited with %d after the forced cleanup", p.exitCode)
	default:
		t.Logf("after the forced cleanup: Lease holder %q, edge-1 env %s", holder(t, e), clusterEnv(t, ns, "edge-1"))
	}
}

func cmRV(t *testing.T, e env) string {
	t.Helper()
	l, err := cp.Client.CoreV1().ConfigMaps(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.ResourceVersion
}
