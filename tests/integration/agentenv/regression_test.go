package agentenv_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/agentenv"
	agentenvcontroller "leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
)

// TestEditAfterStatusClearIsKept: a user's edit that lands just before the
// write that removes the status annotation and writes the env (one patch)
// must survive it (a review found the controller wrote a stale list after
// clearing the status in a patch of its own).
func TestEditAfterStatusClearIsKept(t *testing.T) {
	ns := cp.Namespace(t)
	cp.Create(t, fleetGVR, fleetCluster(ns, "x", kit.WithAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "30s"}), kit.WithEnv(user)))
	// (v0.9: the global 30s/25s/10s needs entries, so the fix below writes
	// env and status together; the edit lands before that write.)
	var once sync.Once
	edited := make(chan struct{})
	tweak := func(o *agentenvcontroller.Options) {
		cfg := rest.CopyConfig(cp.Config)
		framework.Record(cfg, framework.Before(func(q framework.Request) {
			if q.Method != http.MethodPatch || !strings.HasSuffix(q.Path, "/clusters/x") ||
				!strings.Contains(q.Body, `"leasetune.io/agent-env-status":null`) {
				return
			}
			once.Do(func() {
				u := getObj(t, fleetGVR, ns, "x")
				l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
				l = append(l, map[string]interface{}{"name": "NO_PROXY", "value": "10.0.0.0/8"})
				_ = unstructured.SetNestedSlice(u.Object, l, "spec", "agentEnvVars")
				if _, err := cp.Resource(fleetGVR, ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
					t.Errorf("concurrent edit: %v", err)
				}
				close(edited)
			})
		}))
		o.Client = dynamic.NewForConfigOrDie(cfg)
	}
	r := start(t, fakes.AgentTriples(election.FleetDefaults), fleet.ChannelClusterEnvV09, tweak)
	framework.Eventually(t, "marked invalid", func() bool {
		_, ok := getObj(t, fleetGVR, ns, "x").GetAnnotations()[agentenv.StatusAnnotation]
		return ok
	})
	r.settle()
	annotate(t, fleetGVR, ns, "x", map[string]interface{}{agentenv.RetryPeriodAnnotation: "5s"})
	select {
	case <-edited:
	case <-time.After(20 * time.Second):
		t.Fatal("the status annotation was never removed")
	}
	framework.Eventually(t, "override applied with the user's edit kept", func() bool {
		got := strings.Join(kit.AgentEnv(getObj(t, fleetGVR, ns, "x")), ",")
		return strings.Contains(got, "CATTLE_ELECTION_RETRY_PERIOD=5s") && strings.Contains(got, "NO_PROXY=10.0.0.0/8")
	})
}

// TestOverridesOnTheWrongObjectAreReported: on a Rancher-managed cluster
// the annotations are read from the source object only. Where Rancher
// never copies them (the fleet Cluster) they are a user's, reported as not
// applying; on the management Cluster of a non-legacy cluster they are
// Rancher's copies of the provisioning Cluster's, and never reported.
func TestOverridesOnTheWrongObjectAreReported(t *testing.T) {
	ns := cp.Namespace(t)
	ctx := context.Background()
	mgmtName := ns + "-imported"
	over := kit.WithAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "7s"})
	cp.Create(t, mgmtGVR, kit.ManagementCluster(mgmtName, over))
	p := cp.Create(t, provGVR, kit.ProvisioningCluster(ns, "imported", over))
	_ = unstructured.SetNestedField(p.Object, mgmtName, "status", "clusterName")
	if _, err := cp.Resource(provGVR, ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.Create(t, fleetGVR, fleetCluster(ns, "imported", kit.WithLabels(map[string]string{rancher.ClusterNameLabel: mgmtName}), kit.WithAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "3s"})))
	r := start(t, fakes.AgentTriples(election.FleetDefaults), fleet.ChannelClusterEnvV09)
	framework.Eventually(t, "reported on the fleet Cluster", func() bool {
		ev := cp.Events(t, ns, "imported", "ElectionOverrideIgnored")
		return len(ev) == 1 && strings.Contains(ev[0], "clusters.provisioning.cattle.io "+ns+"/imported")
	})
	framework.Eventually(t, "the source's override applied", func() bool {
		return strings.Contains(strings.Join(kit.AgentEnv(getObj(t, provGVR, ns, "imported")), ","), "CATTLE_ELECTION_RETRY_PERIOD=7s")
	})
	r.settle()
	if ev := cp.Events(t, "", mgmtName, "ElectionOverrideIgnored"); len(ev) != 0 {
		t.Errorf("Rancher's copy on the management Cluster reported: %v", ev)
	}
	if got := kit.AgentEnv(getObj(t, mgmtGVR, "", mgmtName)); len(got) != 0 {
		t.Errorf("the generated management Cluster was written: %v", got)
	}
}

// TestAnotherWriterThatKeepsRemovingTheEntries: a writer (field manager
// "gitops-bot") that merge-patches the cluster's env back to its own list
// every half second would make every sync a write and an agent redeploy.
// After RevertLimit reverts leasetune stops writing the object, names the
// writer (Event, status annotation, problem), and writes again once the
// object changes otherwise.
func TestAnotherWriterThatKeepsRemovingTheEntries(t *testing.T) {
	ns := cp.Namespace(t)
	cp.Create(t, fleetGVR, fleetCluster(ns, "fought", kit.WithEnv(user)))
	r := start(t, fakes.AgentTriples(election.FleetDefaults), fleet.ChannelClusterEnvV09)
	framework.Eventually(t, "written", func() bool { return len(kit.AgentEnv(getObj(t, fleetGVR, ns, "fought"))) == 4 })

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // bounded: at most 120 patches, one every 500ms
		defer wg.Done()
		body := []byte(`{"spec":{"agentEnvVars":[{"name":"HTTPS_PROXY","value":"http://proxy:3128"}]}}`)
		for i := 0; i < 120; i++ {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			_, _ = cp.Resource(fleetGVR, ns).Patch(context.Background(), "fought", "application/merge-patch+json", body, metav1.PatchOptions{FieldManager: "gitops-bot"})
		}
	}()
	framework.Eventually(t, "fenced and reported", func() bool {
		return strings.Contains(getObj(t, fleetGVR, ns, "fought").GetAnnotations()[agentenv.StatusAnnotation], "gitops-bot")
	})
	// The report step follows the write: the problem and the Event come
	// right after the annotation.
	framework.Eventually(t, "the problem recorded", func() bool { return r.Problems()[ns+"/fought"] == agentenv.ProblemReverted })
	framework.Eventually(t, "one AgentEnvReverted Event naming the writer", func() bool {
		ev := cp.Events(t, ns, "fought", "AgentEnvReverted")
		return len(ev) == 1 && strings.Contains(ev[0], "gitops-bot")
	})
	n := r.settle()
	// The writer goes on: leasetune must not.
	r.writes.NoWrites(t, "fenced", framework.ConsistentlyMin, r.idle)
	if m := r.writes.Writes(); m != n {
		t.Errorf("%d more writes while fenced", m-n)
	}
	// 1 first write + (RevertLimit-1) restores + 1 status annotation.
	if n > agentenvcontroller.RevertLimit+1 {
		t.Errorf("%d writes before stopping, want at most %d", n, agentenvcontroller.RevertLimit+1)
	}
	close(stop)
	wg.Wait()

	// A change otherwise (a label): leasetune writes again.
	body := []byte(`{"metadata":{"labels":{"env":"edge"}}}`)
	if _, err := cp.Resource(fleetGVR, ns).Patch(context.Background(), "fought", "application/merge-patch+json", body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "written again, status cleared", func() bool {
		u := getObj(t, fleetGVR, ns, "fought")
		_, marked := u.GetAnnotations()[agentenv.StatusAnnotation]
		return len(kit.AgentEnv(u)) == 4 && !marked
	})
}
