package e2e_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

var (
	provGVR = rancher.ProvisioningClusterGVR
	mgmtGVR = rancher.ManagementClusterGVR
)

// provisioning creates a provisioning Cluster (RKE2 when rke, else
// imported) whose management Cluster is mgmtName.
func provisioning(t *testing.T, ns, name, mgmtName string, rke bool, ann map[string]string) {
	t.Helper()
	spec := map[string]interface{}{"kubernetesVersion": "v1.30.4+rke2r1"}
	if rke {
		spec["rkeConfig"] = map[string]interface{}{}
	}
	p := cp.Create(t, provGVR, kit.ProvisioningCluster(ns, name, kit.WithSpec(spec), kit.WithAnnotations(ann)))
	_ = unstructured.SetNestedField(p.Object, mgmtName, "status", "clusterName")
	if _, err := dyn(provGVR, ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getObj(t *testing.T, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn(gvr, ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func envLen(u *unstructured.Unstructured) int {
	l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
	return len(l)
}

// rancherCopies copies the env and the annotations of a source object onto
// an object Rancher generates from it, as Rancher does: all annotations
// from a provisioning Cluster to its management Cluster
// (createNewCluster), and from a management Cluster to its fleet Cluster
// all but keys containing "cattle.io/" (v2.9.3+, CleanAnnotationsForExport)
// — leasetune's record, leasetune.io/agent-env, among them.
func rancherCopies(t *testing.T, from *unstructured.Unstructured, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	env, _, _ := unstructured.NestedSlice(from.Object, "spec", "agentEnvVars")
	ann := map[string]interface{}{}
	for k, v := range from.GetAnnotations() {
		if gvr == fleetGVR && strings.Contains(k, "cattle.io/") {
			continue
		}
		ann[k] = v
	}
	body, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": ann},
		"spec": map[string]interface{}{"agentEnvVars": env}})
	if _, err := dyn(gvr, ns).Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "rancher"}); err != nil {
		t.Fatal(err)
	}
}

// TestCleanupFindsWhatItWroteWhereverItIs: each kind of cluster has its
// own source of agent env (docs/agents.md, "What reaches each
// downstream cluster"), and cleanup removes what leasetune wrote from the source,
// wherever that is: the fleet Cluster of a standalone cluster, the
// management Cluster of a legacy one (c-xxxxx), the provisioning Cluster of
// every other Rancher cluster (provisioned, and imported beside a Rancher
// whose version cannot be told). The copies Rancher makes of the entries
// and of leasetune's record on the objects it generates (a non-legacy
// cluster's management Cluster, any Rancher cluster's fleet Cluster) are
// Rancher's: cleanup lists them as such and never writes them; they lose
// the entries when Rancher regenerates them from the source.
//
// Fleet v0.9.9, where leasetune writes cluster env (on v0.13+ it writes
// none).
func TestCleanupFindsWhatItWroteWhereverItIs(t *testing.T) {
	e := newEnv(t)
	installFleet(t, e, fleetV09)
	ns := cp.Namespace(t)
	retry := func(v string) map[string]string { return map[string]string{agentenv.RetryPeriodAnnotation: v} }
	managed := func(mgmtName string) kit.ClusterOption {
		return kit.WithLabels(map[string]string{rancher.ClusterNameLabel: mgmtName})
	}
	suffix := strings.TrimPrefix(ns, "test-") // 5 lowercase alphanumerics

	// Standalone: the fleet Cluster is the source.
	addCluster(t, ns, "s", retry("5s"))
	// Legacy (a v3-API import, hosted cluster): the management Cluster is
	// the source.
	legacy := "c-" + suffix
	cp.Create(t, mgmtGVR, kit.ManagementCluster(legacy, kit.WithAnnotations(retry("6s"))))
	cp.Create(t, fleetGVR, kit.FleetCluster(ns, "l", managed(legacy)))
	// Provisioned (RKE2): the provisioning Cluster is the source.
	pm := "c-m-" + suffix + "p"
	cp.Create(t, mgmtGVR, kit.ManagementCluster(pm))
	provisioning(t, ns, "p", pm, true, retry("7s"))
	cp.Create(t, fleetGVR, kit.FleetCluster(ns, "p", managed(pm)))
	// Imported, Rancher version unknown (no Rancher Deployment): routed as
	// before v2.11, the provisioning Cluster is the source.
	im := "c-m-" + suffix + "i"
	cp.Create(t, mgmtGVR, kit.ManagementCluster(im))
	provisioning(t, ns, "i", im, false, retry("8s"))
	cp.Create(t, fleetGVR, kit.FleetCluster(ns, "i", managed(im)))

	pr := start(t, e, "one")
	type obj struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}
	sources := map[obj]string{
		{fleetGVR, ns, "s"}:   "RETRY_PERIOD=5s",
		{mgmtGVR, "", legacy}: "RETRY_PERIOD=6s",
		{provGVR, ns, "p"}:    "RETRY_PERIOD=7s",
		{provGVR, ns, "i"}:    "RETRY_PERIOD=8s",
	}
	for o, want := range sources {
		framework.Eventually(t, o.name+" written", func() bool {
			u := getObj(t, o.gvr, o.ns, o.name)
			_, rec := u.GetAnnotations()[agentenv.RecordAnnotation]
			return rec && strings.HasSuffix(objEnv(u), want)
		})
	}
	// Rancher copies the source's env and annotations onto what it
	// generates from it; the controller writes none of the copies.
	rancherCopies(t, getObj(t, mgmtGVR, "", legacy), fleetGVR, ns, "l")
	for _, c := range []struct{ prov, mgmt string }{{"p", pm}, {"i", im}} {
		rancherCopies(t, getObj(t, provGVR, ns, c.prov), mgmtGVR, "", c.mgmt)
		rancherCopies(t, getObj(t, mgmtGVR, "", c.mgmt), fleetGVR, ns, c.prov)
	}
	copies := map[obj]string{}
	for _, o := range []obj{{fleetGVR, ns, "l"}, {mgmtGVR, "", pm}, {fleetGVR, ns, "p"}, {mgmtGVR, "", im}, {fleetGVR, ns, "i"}} {
		u := getObj(t, o.gvr, o.ns, o.name)
		if _, rec := u.GetAnnotations()[agentenv.RecordAnnotation]; !rec || envLen(u) != 3 {
			t.Fatalf("%s: Rancher's copy not made: %v %v", o.name, u.GetAnnotations(), u.Object["spec"])
		}
		copies[o] = u.GetResourceVersion()
	}
	// A write of a copy would follow its change.
	framework.Consistently(t, "Rancher's copies are not written", framework.ConsistentlyMin, func() bool {
		for o, rv := range copies {
			if getObj(t, o.gvr, o.ns, o.name).GetResourceVersion() != rv {
				return false
			}
		}
		return true
	})
	if c := pr.term(t); c != 0 {
		t.Fatalf("exit %d", c)
	}
	for o, rv := range copies {
		if got := getObj(t, o.gvr, o.ns, o.name).GetResourceVersion(); got != rv {
			t.Errorf("the controller wrote Rancher's copy on %s %s/%s", o.gvr.Group, o.ns, o.name)
		}
	}

	listing := runCLI(t, e, "cleanup")
	t.Logf("cleanup listing:\n%s", listing)
	for o := range sources {
		ref := agentenv.Ref{GVR: o.gvr, Namespace: o.ns, Name: o.name}.String() + "\n  spec.agentEnvVars: "
		if !strings.Contains(listing, ref) {
			t.Errorf("cleanup does not list %q", ref)
		}
	}
	for o := range copies {
		ref := agentenv.Ref{GVR: o.gvr, Namespace: o.ns, Name: o.name}.String()
		if !strings.Contains(listing, "left alone: "+ref+": leasetune's annotations there are Rancher's copies") {
			t.Errorf("cleanup does not list %s as Rancher's copy", ref)
		}
		if strings.Contains(listing, ref+"\n") {
			t.Errorf("cleanup would write Rancher's copy on %s", ref)
		}
	}

	out := runCLI(t, e, "cleanup", "--yes")
	t.Logf("cleanup output:\n%s", out)
	for o := range sources {
		u := getObj(t, o.gvr, o.ns, o.name)
		if _, rec := u.GetAnnotations()[agentenv.RecordAnnotation]; rec || strings.Contains(objEnv(u), "CATTLE_ELECTION") {
			t.Errorf("%s %s/%s keeps leasetune's entries/record after cleanup: %s %v", o.gvr.Group, o.ns, o.name, objEnv(u), u.GetAnnotations())
		}
		if _, ok := u.GetAnnotations()[agentenv.RetryPeriodAnnotation]; !ok {
			t.Errorf("%s %s/%s: cleanup removed the user's override", o.gvr.Group, o.ns, o.name)
		}
	}
	if got := clusterEnv(t, ns, "s"); got != "HTTPS_PROXY=http://proxy:3128" {
		t.Errorf("s after cleanup: %s", got)
	}
	for o, rv := range copies {
		if got := getObj(t, o.gvr, o.ns, o.name).GetResourceVersion(); got != rv {
			t.Errorf("cleanup wrote Rancher's copy on %s %s/%s", o.gvr.Group, o.ns, o.name)
		}
	}
}
