// Package rbac_test runs the whole controller with exactly the rights of
// the Helm chart's rendered RBAC, by impersonating the chart's service
// account against a real kube-apiserver, and checks it still does its
// whole job; and that the rendered rules hold no wildcard.
package rbac_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/tests/integration/framework"
)

var (
	cp   *framework.ControlPlane
	root string
)

func TestMain(m *testing.M) {
	var err error
	if root, err = framework.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(framework.Main(m, &cp, framework.Options{
		RepoCRDs:   []string{framework.SettingCRD, framework.ManagementCRD},
		SharedCRDs: []string{framework.FleetClusterCRD, framework.ProvisioningCRD},
	}))
}

// render runs helm template on the chart and returns its documents.
func render(t *testing.T, set ...string) [][]byte {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(root, "scripts/helm.sh")).Output()
	if err != nil {
		t.Fatalf("scripts/helm.sh: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	args := []string{"template", "leasetune", filepath.Join(root, "charts/leasetune"), "--kube-version", "1.30.0"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(lines[len(lines)-1], args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, &stderr)
	}
	var docs [][]byte
	r := utilyaml.NewYAMLReader(bufioReader(b))
	for {
		d, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// applyRBAC creates the chart's RBAC objects and returns them.
func applyRBAC(t *testing.T, docs [][]byte) (rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	for _, d := range docs {
		var meta metav1.TypeMeta
		if err := utilyaml.Unmarshal(d, &meta); err != nil {
			t.Fatal(err)
		}
		var err error
		switch meta.Kind {
		case "ClusterRole":
			var o rbacv1.ClusterRole
			mustDecode(t, d, &o)
			rules = append(rules, o.Rules...)
			_, err = cp.Client.RbacV1().ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			mustDecode(t, d, &o)
			_, err = cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
		case "Role":
			var o rbacv1.Role
			mustDecode(t, d, &o)
			rules = append(rules, o.Rules...)
			_, err = cp.Client.RbacV1().Roles(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		case "RoleBinding":
			var o rbacv1.RoleBinding
			mustDecode(t, d, &o)
			_, err = cp.Client.RbacV1().RoleBindings(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("create %s: %v", meta.Kind, err)
		}
	}
	return rules
}

func mustDecode(t *testing.T, b []byte, into interface{}) {
	t.Helper()
	if err := utilyaml.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	framework.Eventually(t, what, cond)
}

// TestControllerWorksWithTheChartsRBAC is the whole job, impersonating
// system:serviceaccount:<ns>:leasetune with nothing but the chart's rules.
func TestControllerWorksWithTheChartsRBAC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, fleetNS, rancherNS, clusterNS := cp.Namespace(t), cp.Namespace(t), cp.Namespace(t), cp.Namespace(t)
	docs := render(t, "namespaceOverride="+ns, "fleetNamespace="+fleetNS, "rancherNamespace="+rancherNS)
	rules := applyRBAC(t, docs)
	for _, r := range rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
			for _, v := range list {
				if v == "*" {
					t.Errorf("wildcard in rule %+v", r)
				}
			}
		}
	}

	// A Fleet v0.14 installation, rancher-config, and a cluster with an override.
	installFleet(t, fleetNS)
	if _, err := cp.Client.CoreV1().ConfigMaps(rancherNS).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "rancher-config"}, Data: map[string]string{"fleet": "apiServerURL: https://x\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fc := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster", "spec": map[string]interface{}{}}}
	fc.SetNamespace(clusterNS)
	fc.SetName("edge-1")
	fc.SetAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "5s"})
	if _, err := dynamic.NewForConfigOrDie(cp.Config).Resource(agentenv.FleetClusterGVR).Namespace(clusterNS).Create(ctx, fc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	sa := rest.CopyConfig(cp.Config)
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":leasetune",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	errc := make(chan error, 1)
	go func() {
		errc <- manager.Run(ctx, sa, manager.Config{
			Namespace: ns, FleetNamespace: fleetNS, RancherNamespace: rancherNS, InstallCRDs: true,
			QPS: 100, Burst: 200, Workers: 2, LeaderElection: true, LeaseName: "leasetune", Identity: "rbac-test",
			Timings:   election.Timings{LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second},
			LookupEnv: func(string) (string, bool) { return "", false },
			// The webhook too: its Secret and the caBundle need their rights.
			WebhookAddr: "127.0.0.1:0", WebhookService: "leasetune-webhook", WebhookConfigName: "leasetune",
			ServiceAccount: "system:serviceaccount:" + ns + ":leasetune",
		}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()

	// Settings created, a change reaches Deployments, rancher-config and the cluster.
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	settingsGVR := agentenv.ManagementClusterGVR.GroupVersion().WithResource("settings")
	eventually(t, "settings created", func() bool {
		l, err := dyn.Resource(settingsGVR).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 6
	})
	body, _ := json.Marshal(map[string]string{"value": "4s"})
	if _, err := dyn.Resource(settingsGVR).Patch(ctx, "fleet-leader-election-retry-period", types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want := election.Timings{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 4 * time.Second}
	for _, name := range []string{"fleet-controller", "gitjob", "helmops"} {
		eventually(t, name, func() bool {
			d, err := cp.Client.AppsV1().Deployments(fleetNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			got, _, _ := election.CattlePrefix.FromEnv(d.Spec.Template.Spec.Containers[0].Env)
			return got == want
		})
	}
	eventually(t, "rancher-config", func() bool {
		c, err := cp.Client.CoreV1().ConfigMaps(rancherNS).Get(ctx, "rancher-config", metav1.GetOptions{})
		return err == nil && strings.Contains(c.Data["fleet"], "retryPeriod: 4s")
	})
	eventually(t, "cluster agent env", func() bool {
		u, err := dyn.Resource(agentenv.FleetClusterGVR).Namespace(clusterNS).Get(ctx, "edge-1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
		return len(l) == 3
	})
	eventually(t, "events recorded", func() bool {
		l, err := cp.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) > 0
	})
	if _, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, manager.WebhookSecretName, metav1.GetOptions{}); err != nil {
		t.Errorf("webhook Secret: %v", err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("manager.Run: %v", err)
	}
}

func installFleet(t *testing.T, ns string) {
	t.Helper()
	cp.InstallFleet(t, ns, framework.FleetDeployments(t, "v0.14.10"))
}
