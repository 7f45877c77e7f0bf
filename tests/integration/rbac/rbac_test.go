// Package rbac_test runs the whole controller with exactly the rights of
// the Helm chart's rendered RBAC, by impersonating the chart's service
// account against a real kube-apiserver, and checks it still does its
// whole job; and that the rendered rules hold no wildcard.
package rbac_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/agentenv"
	agentenvcontroller "leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/electionstatus"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
)

var (
	cp   *framework.ControlPlane
	root string
)

func TestMain(m *testing.M) {
	os.Exit(framework.MainAtRoot(m, &cp, &root, framework.Options{
		RepoCRDs:   []string{framework.SettingCRD, framework.ManagementCRD, framework.StatusCRD},
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
		if errors.Is(err, io.EOF) {
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

// applyRBAC creates the chart's RBAC objects and returns their rules; the
// cluster-scoped ones are deleted when t ends (the names are fixed).
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
			t.Cleanup(func() { _ = cp.Client.RbacV1().ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{}) })
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			mustDecode(t, d, &o)
			_, err = cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = cp.Client.RbacV1().ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{}) })
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

// TestControllerWorksWithTheChartsRBAC is the whole job, impersonating
// system:serviceaccount:<ns>:leasetune with nothing but the chart's rules,
// on Fleet v0.14 (the global agent triple goes to fleet-agentmanagement; no
// cluster env is written: an override is reported on its cluster, entries
// an earlier leasetune wrote are removed) and on Fleet v0.9.9 (the agents
// read each cluster's spec.agentEnvVars: leasetune writes the source object
// of every kind of cluster, the fleet Cluster of a standalone one, the
// management Cluster of a legacy one, the provisioning Cluster of a
// provisioned one).
func TestControllerWorksWithTheChartsRBAC(t *testing.T) {
	t.Run("v0.14.10", func(t *testing.T) { controllerWithChartsRBAC(t, "v0.14.10") })
	t.Run("v0.9.9", func(t *testing.T) { controllerWithChartsRBAC(t, "v0.9.9") })
}

func controllerWithChartsRBAC(t *testing.T, fleetVersion string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dyn := dynamic.NewForConfigOrDie(cp.Config)
	// The Setting objects are cluster-scoped: start from none, as a new
	// installation does.
	cp.ResetSettings(t)
	// And no ElectionStatus: the leader makes it with the chart's rights.
	if err := dyn.Resource(statusGVR).Delete(ctx, electionstatus.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
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

	// A Fleet installation, rancher-config, and clusters.
	cp.InstallFleet(t, fleetNS, framework.FleetDeployments(t, fleetVersion))
	cp.SeedRancherConfig(t, rancherNS)
	create := func(gvr schema.GroupVersionResource, ns, name string, spec map[string]interface{}, labels, ann map[string]string) *unstructured.Unstructured {
		t.Helper()
		return cp.Create(t, gvr, framework.Cluster(gvr, ns, name, spec, labels, ann))
	}
	get := func(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
		var res dynamic.ResourceInterface = dyn.Resource(gvr)
		if ns != "" {
			res = dyn.Resource(gvr).Namespace(ns)
		}
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		return u
	}
	envOf := func(u *unstructured.Unstructured) []interface{} {
		l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
		return l
	}
	override := map[string]string{agentenv.RetryPeriodAnnotation: "5s"}
	create(fleet.ClusterGVR, clusterNS, "edge-1", map[string]interface{}{}, nil, override)
	type obj struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}
	var sources []obj // v0.9.9: the objects leasetune writes
	switch fleetVersion {
	case "v0.14.10":
		// A cluster an earlier leasetune wrote.
		rec, _ := json.Marshal(map[string]string{"CATTLE_ELECTION_LEASE_DURATION": "50s", "CATTLE_ELECTION_RENEW_DEADLINE": "40s", "CATTLE_ELECTION_RETRY_PERIOD": "15s"})
		create(fleet.ClusterGVR, clusterNS, "edge-0", map[string]interface{}{"agentEnvVars": []interface{}{
			map[string]interface{}{"name": "CATTLE_ELECTION_LEASE_DURATION", "value": "50s"},
			map[string]interface{}{"name": "CATTLE_ELECTION_RENEW_DEADLINE", "value": "40s"},
			map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": "15s"}}},
			nil, map[string]string{agentenv.RecordAnnotation: string(rec)})
	case "v0.9.9":
		suffix := strings.TrimPrefix(clusterNS, "test-") // 5 lowercase alphanumerics
		legacy := "c-" + suffix
		create(rancher.ManagementClusterGVR, "", legacy, map[string]interface{}{}, nil, override)
		create(fleet.ClusterGVR, clusterNS, "legacy", map[string]interface{}{}, map[string]string{rancher.ClusterNameLabel: legacy}, nil)
		prov := "c-m-" + suffix
		create(rancher.ManagementClusterGVR, "", prov, map[string]interface{}{}, nil, nil)
		p := create(rancher.ProvisioningClusterGVR, clusterNS, "rke2", map[string]interface{}{"kubernetesVersion": "v1.30.4+rke2r1", "rkeConfig": map[string]interface{}{}}, nil, override)
		_ = unstructured.SetNestedField(p.Object, prov, "status", "clusterName")
		if _, err := dyn.Resource(rancher.ProvisioningClusterGVR).Namespace(clusterNS).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		create(fleet.ClusterGVR, clusterNS, "rke2", map[string]interface{}{}, map[string]string{rancher.ClusterNameLabel: prov}, nil)
		sources = []obj{{fleet.ClusterGVR, clusterNS, "edge-1"}, {rancher.ManagementClusterGVR, "", legacy}, {rancher.ProvisioningClusterGVR, clusterNS, "rke2"}}
	}

	// The Rancher Deployment (its rancher container, settled: envtest runs
	// no Deployment controller, so the status is set here), whose
	// CATTLE_ELECTION_* the chart lets leasetune patch by name.
	one := int32(1)
	rd, err := cp.Client.AppsV1().Deployments(rancherNS).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "rancher"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "rancher"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rancher"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "rancher", Image: "rancher/rancher:v2.11.3",
					Env: []corev1.EnvVar{{Name: "CATTLE_NAMESPACE", Value: rancherNS}}}}}}},
	}, metav1.CreateOptions{FieldManager: "helm"})
	if err != nil {
		t.Fatal(err)
	}
	rd.Status = appsv1.DeploymentStatus{ObservedGeneration: rd.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
	if _, err := cp.Client.AppsV1().Deployments(rancherNS).UpdateStatus(ctx, rd, metav1.UpdateOptions{}); err != nil {
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
			RancherDeployment: "rancher", RancherEnv: true,
			QPS: 100, Burst: 200, Workers: 2, LeaderElection: true, LeaseName: "leasetune", Identity: "rbac-test",
			Timings:   election.Timings{LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second},
			LookupEnv: func(string) (string, bool) { return "", false },
			// The webhook too: its Secret and the caBundle need their rights.
			WebhookAddr: "127.0.0.1:0", WebhookService: "leasetune-webhook", WebhookConfigName: "leasetune",
			ServiceAccount: "system:serviceaccount:" + ns + ":leasetune",
		}, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}()

	// Settings created, a change reaches Deployments, rancher-config and the clusters.
	framework.Eventually(t, "settings created", func() bool {
		l, err := dyn.Resource(framework.SettingsGVR).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == len(settings.Registry)
	})
	for name, value := range map[string]string{"fleet-leader-election-retry-period": "4s", "fleet-agent-leader-election-lease-duration": "40s",
		"rancher-leader-election-retry-period": "5s"} {
		body, _ := json.Marshal(map[string]string{"value": value})
		if _, err := dyn.Resource(framework.SettingsGVR).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := election.Timings{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 4 * time.Second}
	deployments := map[string][]string{"v0.14.10": {"fleet-controller", "gitjob", "helmops"}, "v0.9.9": {"fleet-controller", "gitjob"}}[fleetVersion]
	for _, name := range deployments {
		framework.Eventually(t, name, func() bool {
			d, err := cp.Client.AppsV1().Deployments(fleetNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			got, _, _ := election.CattlePrefix.FromEnv(d.Spec.Template.Spec.Containers[0].Env)
			return got == want
		})
	}
	framework.Eventually(t, "the Rancher Deployment's CATTLE_ELECTION_*", func() bool {
		d, err := cp.Client.AppsV1().Deployments(rancherNS).Get(ctx, "rancher", metav1.GetOptions{})
		if err != nil {
			return false
		}
		got, found, err := election.CattlePrefix.FromEnv(d.Spec.Template.Spec.Containers[0].Env)
		return found && err == nil && got == election.Timings{LeaseDuration: 45 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 5 * time.Second}
	})
	framework.Eventually(t, "rancher-config", func() bool {
		c, err := cp.Client.CoreV1().ConfigMaps(rancherNS).Get(ctx, "rancher-config", metav1.GetOptions{})
		return err == nil && strings.Contains(c.Data["fleet"], "retryPeriod: 4s") && strings.Contains(c.Data["fleet"], "leaseDuration: 40s")
	})
	// Its ElectionStatus, made and kept with the chart's rights: the Fleet
	// controllers' retry period in effect.
	framework.Eventually(t, "the ElectionStatus", func() bool {
		return framework.InEffect(ctx, dyn, "fleet-controller", "retryPeriod") == "4s"
	})
	// A Setting left on source env (an env override since removed from
	// leasetune's Deployment) is made the user's again with these rights,
	// past the double of Rancher v2.15.0's webhook, which refuses that as
	// an update: leasetune deletes it and creates it again.
	wh := cp.StartRancherWebhook(t)
	if _, err := dyn.Resource(framework.SettingsGVR).Patch(ctx, "fleet-leader-election-retry-period", types.MergePatchType,
		[]byte(`{"source":"env","value":"9s"}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the Setting off source env, with the user's value", func() bool {
		u, err := dyn.Resource(framework.SettingsGVR).Get(ctx, "fleet-leader-election-retry-period", metav1.GetOptions{})
		if err != nil {
			return false
		}
		src, _ := u.Object["source"].(string)
		return src == "" && u.Object["value"] == "4s"
	})
	for _, a := range wh.Refused() {
		t.Errorf("rancher-webhook refused the %s of %s by %s: %s", a.Operation, a.Name, a.User, a.Message)
	}
	// A field someone else added to its status is removed with those
	// rights too (a JSON patch of the status subresource, after the apply).
	if _, err := dyn.Resource(statusGVR).Patch(ctx, electionstatus.Name, types.MergePatchType,
		[]byte(`{"status":{"clustersNotListed":7}}`), metav1.PatchOptions{FieldManager: "someone"}, "status"); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the added status field removed", func() bool {
		u, err := dyn.Resource(statusGVR).Get(ctx, electionstatus.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		_, found, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "clustersNotListed")
		return !found
	})
	switch fleetVersion {
	case "v0.14.10":
		framework.Eventually(t, "fleet-agentmanagement", func() bool {
			d, err := cp.Client.AppsV1().Deployments(fleetNS).Get(ctx, "fleet-controller", metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if c.Name == "fleet-agentmanagement" {
					got, _, _ := election.FleetAgentPrefix.FromEnv(c.Env)
					return got == election.Timings{LeaseDuration: 40 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 10 * time.Second}
				}
			}
			return false
		})
		// The override is reported (status annotation, Warning Event); its
		// cluster's env is not written; the earlier entries are removed.
		framework.Eventually(t, "override reported", func() bool {
			u := get(fleet.ClusterGVR, clusterNS, "edge-1")
			return u != nil && strings.Contains(u.GetAnnotations()[agentenv.StatusAnnotation], "cannot be applied") &&
				len(cp.Events(t, clusterNS, "edge-1", "ElectionOverrideUnsupported")) > 0
		})
		framework.Eventually(t, "earlier entries removed", func() bool {
			u := get(fleet.ClusterGVR, clusterNS, "edge-0")
			if u == nil {
				return false
			}
			_, rec := u.GetAnnotations()[agentenv.RecordAnnotation]
			return len(envOf(u)) == 0 && !rec
		})
		if l := envOf(get(fleet.ClusterGVR, clusterNS, "edge-1")); len(l) != 0 {
			t.Errorf("cluster env written on Fleet v0.14: %v", l)
		}
	case "v0.9.9":
		for _, o := range sources {
			framework.Eventually(t, "cluster agent env on "+o.gvr.Resource+"."+o.gvr.Group+" "+o.name, func() bool {
				u := get(o.gvr, o.ns, o.name)
				if u == nil {
					return false
				}
				l := envOf(u)
				if len(l) != 3 {
					return false
				}
				last, _ := l[2].(map[string]interface{})
				_, rec := u.GetAnnotations()[agentenv.RecordAnnotation]
				return rec && last["name"] == "CATTLE_ELECTION_RETRY_PERIOD" && last["value"] == "5s"
			})
		}
		// The writes are summed up in an Event on the fleet-agent Settings
		// (the chart's RBAC lets it create Events).
		framework.Eventually(t, "AgentTimingsPropagated Event", func() bool {
			return len(cp.Events(t, "", "fleet-agent-leader-election-retry-period", agentenvcontroller.ReasonPropagated)) > 0
		})
	}
	if _, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, own.WebhookSecret, metav1.GetOptions{}); err != nil {
		t.Errorf("webhook Secret: %v", err)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("manager.Run: %v", err)
	}
}
