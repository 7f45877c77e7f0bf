package e2e_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/controllers/agentenv"
)

var (
	provGVR = agentenv.ProvisioningClusterGVR
	mgmtGVR = agentenv.ManagementClusterGVR
)

// TestCleanupFindsWhatItWroteWhereverItIs: cleanup removes what leasetune
// wrote from every object carrying its record, not only from where the
// controller routes today (a review found a cluster Rancher imported later,
// and a provisioned cluster whose fleet Cluster was deleted, kept the
// entries).
func TestCleanupFindsWhatItWroteWhereverItIs(t *testing.T) {
	e := newEnv(t)
	installFleet(t, e)
	ns := cp.Namespace(t)
	ctx := context.Background()
	addCluster(t, ns, "s", map[string]string{"election.cattle.io/retry-period": "5s"})
	// A provisioned cluster with an override.
	mn := ns + "-p"
	m := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster", "spec": map[string]interface{}{}}}
	m.SetName(mn)
	if _, err := dyn(mgmtGVR, "").Create(ctx, m, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dyn(mgmtGVR, "").Delete(ctx, mn, metav1.DeleteOptions{}) })
	p := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
		"spec": map[string]interface{}{"kubernetesVersion": "v1.30.4+rke2r1", "rkeConfig": map[string]interface{}{}}}}
	p.SetNamespace(ns)
	p.SetName("p")
	p.SetAnnotations(map[string]string{"election.cattle.io/retry-period": "5s"})
	p, err := dyn(provGVR, ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(p.Object, mn, "status", "clusterName")
	if _, err := dyn(provGVR, ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	fc := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster", "spec": map[string]interface{}{}}}
	fc.SetNamespace(ns)
	fc.SetName("p")
	fc.SetLabels(map[string]string{"management.cattle.io/cluster-name": mn})
	if _, err := dyn(fleetGVR, ns).Create(ctx, fc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pr := start(t, e, "one")
	eventually(t, "s written", func() bool { return strings.Contains(clusterEnv(t, ns, "s"), "RETRY_PERIOD=5s") })
	eventually(t, "p written", func() bool {
		u, _ := dyn(provGVR, ns).Get(ctx, "p", metav1.GetOptions{})
		l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
		return len(l) == 3
	})
	if c := pr.term(t); c != 0 {
		t.Fatalf("exit %d", c)
	}
	// Rancher imports "s"; the fleet Cluster of "p" is deleted (e.g. being re-generated).
	sm := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster", "spec": map[string]interface{}{}}}
	sm.SetName(ns + "-s")
	if _, err := dyn(mgmtGVR, "").Create(ctx, sm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dyn(mgmtGVR, "").Delete(ctx, ns+"-s", metav1.DeleteOptions{}) })
	u, _ := dyn(fleetGVR, ns).Get(ctx, "s", metav1.GetOptions{})
	u.SetLabels(map[string]string{"management.cattle.io/cluster-name": ns + "-s"})
	if _, err := dyn(fleetGVR, ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dyn(fleetGVR, ns).Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out := runCLI(t, e, "cleanup", "--yes")
	t.Logf("cleanup output:\n%s", out)
	s, _ := dyn(fleetGVR, ns).Get(ctx, "s", metav1.GetOptions{})
	pp, _ := dyn(provGVR, ns).Get(ctx, "p", metav1.GetOptions{})
	if _, rec := s.GetAnnotations()["leasetune.io/agent-env"]; rec || strings.Contains(clusterEnv(t, ns, "s"), "CATTLE_ELECTION") {
		t.Errorf("fleet Cluster s keeps leasetune's entries/record after cleanup: %s %v", clusterEnv(t, ns, "s"), s.GetAnnotations())
	}
	if _, rec := pp.GetAnnotations()["leasetune.io/agent-env"]; rec {
		l, _, _ := unstructured.NestedSlice(pp.Object, "spec", "agentEnvVars")
		t.Errorf("provisioning Cluster p keeps leasetune's entries/record after cleanup: %v", l)
	}
}
