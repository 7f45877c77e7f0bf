package rancher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/restart"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/rancher"
)

// useManagementCRD gives clusters.management.cattle.io a status
// subresource, as Rancher v2.15.0 does (pkg/crds/dashboard/crds.go:71-72),
// or none, as before, and waits until the API serves it so.
func useManagementCRD(t *testing.T, status bool) {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, framework.ManagementCRD))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(&crd); err != nil {
		t.Fatal(err)
	}
	if status {
		crd.Spec.Versions[0].Subresources = &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}}
	}
	cp.UpdateCRD(t, &crd)
	// A create with a status tells which is served: with the subresource
	// the API drops it.
	probe := "day2-crd-probe"
	res := dynamic.NewForConfigOrDie(cp.Config).Resource(mgmtGVR)
	framework.Eventually(t, "the management Cluster CRD served as wanted", func() bool {
		_ = res.Delete(context.Background(), probe, metav1.DeleteOptions{})
		obj := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster",
			"metadata": map[string]interface{}{"name": probe}, "status": map[string]interface{}{"driver": "x"}}}
		got, err := res.Create(context.Background(), obj, metav1.CreateOptions{})
		if err != nil {
			return false
		}
		_ = res.Delete(context.Background(), probe, metav1.DeleteOptions{})
		_, kept := got.Object["status"]
		return kept != status
	})
	t.Cleanup(func() {
		if status {
			useManagementCRD(t, false)
		}
	})
}

// mustRoute routes c as the controller does, from the objects now.
func mustRoute(t *testing.T, h *harness, c *cluster) agentenv.Routing {
	t.Helper()
	rt, err := agentenv.Route(h.get(c.fleet), h.get(*c.prov), h.get(*c.mgmt), h.rv)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestV215ImportedDay2OpsReplans: beside Rancher v2.15.0 (the double's
// imported-system-agent handler; the management Cluster CRD with its status
// subresource), an imported RKE2 cluster with day-2 operations whose
// management Cluster holds CATTLE_ELECTION_* entries an earlier leasetune
// wrote, on Fleet's agentmanagement channel: leasetune removes them with
// one write, which re-runs system-agent's Plan on every node once — the
// double counts one plan run, leasetune's node-plan restart metric counts
// one, and what it says a write restarts names every node. Then nothing else: no write fight with
// Rancher's own Update of the management Cluster (the applied hash), and
// a change of the global agent triple (Fleet renders it on this channel)
// writes no cluster and runs no Plan.
func TestV215ImportedDay2OpsReplans(t *testing.T) {
	useManagementCRD(t, true)
	h := newHarness(t, "v2.15.0", fleet.ChannelAgentManagement, election.FleetDefaults)
	cs := h.createClusters("imported")
	c := cs[0]
	if c.source != *c.mgmt {
		t.Fatalf("test: source %s, want the management Cluster", c.source)
	}
	// The state an earlier leasetune left, written while it does not run.
	h.stopCtl()
	old := []string{"CATTLE_ELECTION_LEASE_DURATION=40s", "CATTLE_ELECTION_RENEW_DEADLINE=30s", "CATTLE_ELECTION_RETRY_PERIOD=5s"}
	record, _ := json.Marshal(map[string]string{"CATTLE_ELECTION_LEASE_DURATION": "40s", "CATTLE_ELECTION_RENEW_DEADLINE": "30s", "CATTLE_ELECTION_RETRY_PERIOD": "5s"})
	env := []interface{}{}
	for _, e := range append(kit.AgentEnv(h.get(*c.mgmt)), old...) {
		n, v, _ := strings.Cut(e, "=")
		env = append(env, map[string]interface{}{"name": n, "value": v})
	}
	h.patch(*c.mgmt, map[string]interface{}{"metadata": map[string]interface{}{"annotations": map[string]interface{}{agentenv.RecordAnnotation: string(record)}},
		"spec": map[string]interface{}{"agentEnvVars": env}})
	statusPatch, _ := json.Marshal(map[string]interface{}{"status": map[string]interface{}{"driver": "rke2"}})
	if _, err := h.res(*c.mgmt).Patch(context.Background(), c.mgmt.Name, types.MergePatchType, statusPatch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the double's first Plan apply (the import)", func() bool { return h.d.PlanRuns(c.mgmt.Name) == 1 })
	h.calm("the import's Plans applied")

	nodePlans := testutil.ToFloat64(metrics.Restarts.WithLabelValues("node-plan"))
	// The injected state repeats Fleet's names on the fleet Cluster (what
	// the removal repairs): the watch's record of it is the setup's, not
	// leasetune's.
	h.rec.mu.Lock()
	h.rec.dupes = nil
	h.rec.mu.Unlock()
	h.startController()
	framework.Eventually(t, "the old entries removed", func() bool {
		u := h.get(*c.mgmt)
		if u == nil {
			return false
		}
		for _, e := range kit.AgentEnv(u) {
			if strings.HasPrefix(e, "CATTLE_ELECTION_") {
				return false
			}
		}
		return true
	})
	h.calm("after the removal")
	if n := h.writes.AcceptedByPath()[path(*c.mgmt)]; n != 1 {
		t.Errorf("%s: %d writes by leasetune, want 1", *c.mgmt, n)
	}
	if n := h.d.PlanRuns(c.mgmt.Name); n != 2 {
		t.Errorf("plan runs %d, want 2: the import's and the one of leasetune's write", n)
	}
	if got := testutil.ToFloat64(metrics.Restarts.WithLabelValues("node-plan")) - nodePlans; got != 1 {
		t.Errorf("leasetune counted %v node-plan restarts, want 1", got)
	}
	if got := agentenv.Restarts(mustRoute(t, h, c)); !got.Has(restart.NodePlan) || !strings.Contains(got.String(), "the system agent on every node") {
		t.Errorf("leasetune says the write redeploys %q, want every node's system agent", got)
	}

	// A global agent triple change reaches the agents through Fleet on
	// this channel: no cluster write, no Plan run.
	mark, runs := h.rec.seq(), h.d.PlanRuns(c.mgmt.Name)
	h.tr.Set(settings.FleetAgent, kit.Timings("60s", "50s", "20s"))
	framework.Consistently(t, "no cluster write and no Plan run after a global agent change", 3*calmWindow, func() bool {
		return len(h.rec.since(mark, h.owns)) == 0 && h.d.PlanRuns(c.mgmt.Name) == runs
	})
	if a := h.get(*c.mgmt).GetAnnotations()[rancher.AppliedPlanHashAnnotation]; a == "" {
		t.Error("the double stored no applied hash")
	}
}
