package agentenv_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/settings"
)

var (
	user    = map[string]interface{}{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}
	fromRef = map[string]interface{}{"name": "TOKEN", "valueFrom": map[string]interface{}{
		"secretKeyRef": map[string]interface{}{"name": "agent-token", "key": "token"}}}
)

// TestOverridesAddedChangedRemoved follows one standalone cluster through
// the life of an override, on Fleet v0.9.1+ (the agent reads the cluster's
// entries; the manifest renders none), with the global triple equal to
// wrangler's, which the agent runs without entries.
func TestOverridesAddedChangedRemoved(t *testing.T) {
	ns := cp.Namespace(t)
	before := create(t, fleetGVR, fleetCluster(ns, "edge-1", nil, nil, user, fromRef))
	r := start(t, newTriples(election.WranglerDefaults), fleet.ChannelClusterEnvV09)
	if n := r.settle(); n != 0 {
		t.Fatalf("%d writes with no override and the agent's own triple", n)
	}

	annotate(t, fleetGVR, ns, "edge-1", map[string]interface{}{agentenv.RetryPeriodAnnotation: "5s"})
	want := []string{"HTTPS_PROXY=http://proxy:3128", "TOKEN=<valueFrom>",
		"CATTLE_ELECTION_LEASE_DURATION=45s", "CATTLE_ELECTION_RENEW_DEADLINE=30s", "CATTLE_ELECTION_RETRY_PERIOD=5s"}
	eventually(t, "override applied", func() bool { return reflect.DeepEqual(envOf(getObj(t, fleetGVR, ns, "edge-1")), want) })
	if n := r.settle(); n != 1 {
		t.Errorf("%d writes for one override, want 1", n)
	}
	after := getObj(t, fleetGVR, ns, "edge-1")
	if specWithoutEnv(t, before) != specWithoutEnv(t, after) {
		t.Errorf("spec changed besides agentEnvVars:\n%s\n%s", specWithoutEnv(t, before), specWithoutEnv(t, after))
	}
	if got := after.GetAnnotations()[agentenv.RecordAnnotation]; !strings.Contains(got, `"CATTLE_ELECTION_RETRY_PERIOD":"5s"`) {
		t.Errorf("record %q", got)
	}

	annotate(t, fleetGVR, ns, "edge-1", map[string]interface{}{agentenv.RetryPeriodAnnotation: "8s", agentenv.LeaseDurationAnnotation: "40s"})
	want[2], want[4] = "CATTLE_ELECTION_LEASE_DURATION=40s", "CATTLE_ELECTION_RETRY_PERIOD=8s"
	eventually(t, "override changed in place", func() bool { return reflect.DeepEqual(envOf(getObj(t, fleetGVR, ns, "edge-1")), want) })

	annotate(t, fleetGVR, ns, "edge-1", map[string]interface{}{agentenv.RetryPeriodAnnotation: nil, agentenv.LeaseDurationAnnotation: nil})
	eventually(t, "override removed", func() bool {
		u := getObj(t, fleetGVR, ns, "edge-1")
		_, rec := u.GetAnnotations()[agentenv.RecordAnnotation]
		return reflect.DeepEqual(envOf(u), want[:2]) && !rec
	})
	if n := r.settle(); n != 3 {
		t.Errorf("%d writes for add, change, remove; want 3", n)
	}
}

// TestOverridesWhereFleetRendersTheNames: on Fleet v0.13+ (and v0.12) the
// agent manifest renders CATTLE_ELECTION_* itself, so an override cannot
// be applied without a duplicate name: nothing is written but the report
// (status annotation, Event), in one write, and a resync adds none.
func TestOverridesWhereFleetRendersTheNames(t *testing.T) {
	for _, ch := range []fleet.AgentChannel{fleet.ChannelAgentManagement, fleet.ChannelFixedV012} {
		t.Run(string(ch), func(t *testing.T) {
			ns := cp.Namespace(t)
			create(t, fleetGVR, fleetCluster(ns, "edge-1", nil, map[string]string{agentenv.RetryPeriodAnnotation: "5s"}, user))
			r := start(t, newTriples(election.FleetDefaults), ch)
			eventually(t, "reported", func() bool {
				return strings.Contains(getObj(t, fleetGVR, ns, "edge-1").GetAnnotations()[agentenv.StatusAnnotation], "renders CATTLE_ELECTION_* itself")
			})
			if n := r.settle(); n != 1 {
				t.Errorf("%d writes, want 1 (the status annotation)", n)
			}
			if got := envOf(getObj(t, fleetGVR, ns, "edge-1")); !reflect.DeepEqual(got, []string{"HTTPS_PROXY=http://proxy:3128"}) {
				t.Errorf("env written where Fleet renders the names: %v", got)
			}
			if ev := events(t, ns, "edge-1", "ElectionOverrideUnsupported"); len(ev) != 1 {
				t.Errorf("events %v", ev)
			}
			if r.Problems()[ns+"/edge-1"] != agentenv.ProblemUnsupported {
				t.Errorf("problems %v", r.Problems())
			}
			r.EnqueueAll()
			if n := r.settle(); n != 1 {
				t.Errorf("resync wrote %d times", n-1)
			}
			annotate(t, fleetGVR, ns, "edge-1", map[string]interface{}{agentenv.RetryPeriodAnnotation: nil})
			eventually(t, "report removed with the override", func() bool {
				_, ok := getObj(t, fleetGVR, ns, "edge-1").GetAnnotations()[agentenv.StatusAnnotation]
				return !ok
			})
		})
	}
}

// TestRepairOfEarlierDuplicates: entries an earlier leasetune wrote on a
// cluster whose Fleet renders the names are removed, keeping every entry
// it does not own in place, in one write.
func TestRepairOfEarlierDuplicates(t *testing.T) {
	ns := cp.Namespace(t)
	ours := []map[string]interface{}{
		{"name": "CATTLE_ELECTION_LEASE_DURATION", "value": "30s"}, {"name": "CATTLE_ELECTION_RENEW_DEADLINE", "value": "25s"},
		{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": "5s"}}
	u := fleetCluster(ns, "broken", nil, map[string]string{agentenv.RecordAnnotation: `{"CATTLE_ELECTION_LEASE_DURATION":"30s","CATTLE_ELECTION_RENEW_DEADLINE":"25s","CATTLE_ELECTION_RETRY_PERIOD":"5s"}`},
		user, ours[0], fromRef, ours[1], ours[2])
	create(t, fleetGVR, u)
	r := start(t, newTriples(election.FleetDefaults), fleet.ChannelAgentManagement)
	eventually(t, "repaired", func() bool {
		o := getObj(t, fleetGVR, ns, "broken")
		_, rec := o.GetAnnotations()[agentenv.RecordAnnotation]
		return reflect.DeepEqual(envOf(o), []string{"HTTPS_PROXY=http://proxy:3128", "TOKEN=<valueFrom>"}) && !rec
	})
	if n := r.settle(); n != 1 {
		t.Errorf("%d writes for the repair, want 1", n)
	}
}

// TestInvalidOverrideLeavesClusterAloneAndOthersProceed.
func TestInvalidOverrideLeavesClusterAloneAndOthersProceed(t *testing.T) {
	ns := cp.Namespace(t)
	create(t, fleetGVR, fleetCluster(ns, "bad", nil, map[string]string{agentenv.RetryPeriodAnnotation: "30s"}, user))
	create(t, fleetGVR, fleetCluster(ns, "good", nil, map[string]string{agentenv.RetryPeriodAnnotation: "5s"}))
	r := start(t, newTriples(election.FleetDefaults), fleet.ChannelClusterEnvV09)

	eventually(t, "good cluster written", func() bool { return len(envOf(getObj(t, fleetGVR, ns, "good"))) == 3 })
	eventually(t, "bad cluster marked", func() bool {
		return strings.Contains(getObj(t, fleetGVR, ns, "bad").GetAnnotations()[agentenv.StatusAnnotation],
			"renewDeadline 25s must exceed 1.2 × retryPeriod 30s = 36s")
	})
	if got := envOf(getObj(t, fleetGVR, ns, "bad")); !reflect.DeepEqual(got, []string{"HTTPS_PROXY=http://proxy:3128"}) {
		t.Errorf("invalid cluster changed: %v", got)
	}
	eventually(t, "event", func() bool {
		ev := events(t, ns, "bad", "InvalidElectionOverride")
		return len(ev) == 1 && strings.Contains(ev[0], "retryPeriod 30s")
	})
	if r.Problems()[ns+"/bad"] != agentenv.ProblemInvalid {
		t.Errorf("problems %v", r.Problems())
	}
	// A resync does not report or write again.
	n := r.settle()
	r.EnqueueAll()
	if m := r.settle(); m != n {
		t.Errorf("resync made %d writes", m-n)
	}
	if ev := events(t, ns, "bad", "InvalidElectionOverride"); len(ev) != 1 || strings.Contains(ev[0], "\n") {
		t.Errorf("events after resync: %v", ev)
	}

	// Fixed: applied, mark removed.
	annotate(t, fleetGVR, ns, "bad", map[string]interface{}{agentenv.RetryPeriodAnnotation: "12s"})
	eventually(t, "fixed", func() bool {
		u := getObj(t, fleetGVR, ns, "bad")
		_, marked := u.GetAnnotations()[agentenv.StatusAnnotation]
		return len(envOf(u)) == 4 && !marked
	})
	eventually(t, "the problem cleared (the report step follows the write)", func() bool {
		_, bad := r.Problems()[ns+"/bad"]
		return !bad
	})
}

// TestHandWrittenEntriesAreTheirs: a CATTLE_ELECTION_* entry the project
// did not write belongs to someone else.
func TestHandWrittenEntriesAreTheirs(t *testing.T) {
	ns := cp.Namespace(t)
	hand := map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": "3s"}
	create(t, fleetGVR, fleetCluster(ns, "hand", nil, map[string]string{agentenv.LeaseDurationAnnotation: "40s"}, user, hand))
	r := start(t, newTriples(election.FleetDefaults), fleet.ChannelClusterEnvV09)
	eventually(t, "reported", func() bool { return r.Problems()[ns+"/hand"] == agentenv.ProblemForeign })
	eventually(t, "marked", func() bool {
		return strings.Contains(getObj(t, fleetGVR, ns, "hand").GetAnnotations()[agentenv.StatusAnnotation], `CATTLE_ELECTION_RETRY_PERIOD="3s"`)
	})
	if got := envOf(getObj(t, fleetGVR, ns, "hand")); len(got) != 2 {
		t.Errorf("a cluster with someone else's entry was written: %v", got)
	}
	if len(events(t, ns, "hand", "ForeignElectionEnv")) == 0 {
		t.Error("no event")
	}
}

// TestRancherManagedClustersAreWrittenWhereRancherReads covers the kinds
// of Rancher-managed cluster, with no Rancher Deployment (an unknown
// Rancher version routes imported clusters as before v2.11): each is
// written on the object that is the source of its agent env, never on the
// objects Rancher generates from it.
func TestRancherManagedClustersAreWrittenWhereRancherReads(t *testing.T) {
	ns := cp.Namespace(t)
	ctx := context.Background()
	legacyName := "c-" + strings.ReplaceAll(ns[len(ns)-5:], "-", "x")
	mk := func(name, mgmtName string, rke bool, provAnn map[string]string, withProv bool, mgmtAnn map[string]string) {
		m := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "management.cattle.io/v3", "kind": "Cluster",
			"spec": map[string]interface{}{"displayName": name, "agentEnvVars": []interface{}{user}}}}
		m.SetName(mgmtName)
		m.SetAnnotations(mgmtAnn)
		create(t, mgmtGVR, m)
		if withProv {
			p := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
				"spec": map[string]interface{}{"kubernetesVersion": "v1.30.4+rke2r1"}}}
			if rke {
				p.Object["spec"].(map[string]interface{})["rkeConfig"] = map[string]interface{}{}
			}
			p.SetNamespace(ns)
			p.SetName(name)
			p.SetAnnotations(provAnn)
			p = create(t, provGVR, p)
			_ = unstructured.SetNestedField(p.Object, mgmtName, "status", "clusterName")
			if _, err := res(provGVR, ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// The fleet Cluster Rancher generates, with the env it copied.
		create(t, fleetGVR, fleetCluster(ns, name, map[string]string{agentenv.MgmtNameLabel: mgmtName}, nil, user))
	}
	over := map[string]string{agentenv.RetryPeriodAnnotation: "5s"}
	mk("provisioned", ns+"-provisioned", true, over, true, nil)
	mk("imported", ns+"-imported", false, over, true, nil)
	mk("legacy", legacyName, false, nil, false, over)
	start(t, newTriples(election.FleetDefaults), fleet.ChannelClusterEnvV09)

	want := []string{"HTTPS_PROXY=http://proxy:3128", "CATTLE_ELECTION_LEASE_DURATION=30s",
		"CATTLE_ELECTION_RENEW_DEADLINE=25s", "CATTLE_ELECTION_RETRY_PERIOD=5s"}
	eventually(t, "provisioned: written on the provisioning Cluster", func() bool {
		return reflect.DeepEqual(envOf(getObj(t, provGVR, ns, "provisioned")), want[1:])
	})
	eventually(t, "imported: written on the provisioning Cluster", func() bool {
		return reflect.DeepEqual(envOf(getObj(t, provGVR, ns, "imported")), want[1:])
	})
	eventually(t, "legacy: written on the management Cluster", func() bool {
		return reflect.DeepEqual(envOf(getObj(t, mgmtGVR, "", legacyName)), want)
	})
	time.Sleep(300 * time.Millisecond)
	for _, name := range []string{"provisioned", "imported", "legacy"} {
		if got := envOf(getObj(t, fleetGVR, ns, name)); len(got) != 1 {
			t.Errorf("%s: the generated fleet Cluster was written: %v", name, got)
		}
	}
	for _, name := range []string{"provisioned", "imported"} {
		if got := envOf(getObj(t, mgmtGVR, "", ns+"-"+name)); len(got) != 1 {
			t.Errorf("%s: the generated management Cluster was written: %v", name, got)
		}
	}
	// The first pass's writes are summed up on the fleet-agent Settings,
	// with what they restart: all three run cattle-cluster-agent, the
	// provisioned one also re-plans its nodes.
	eventually(t, "summary Event names the restarts", func() bool {
		for _, m := range events(t, "", settings.Of(settings.FleetAgent)[0].Name, agentenv.ReasonPropagated) {
			if strings.Contains(m, "at leasetune's start") && strings.Contains(m, "(3 also cattle-cluster-agent, 1 re-planning every node)") {
				return true
			}
		}
		return false
	})
	if ev := events(t, ns, "provisioned", "AgentEnvUpdated"); len(ev) != 0 {
		t.Errorf("an Event per cluster for the first pass: %v", ev)
	}
}

// TestConcurrentEditIsNeverLost: users append entries while a global change
// propagates; every cluster ends with theirs and ours. The writes are paced
// (2 a second), so most clusters are decided from the cache before the
// user's edit and written after it: only the resourceVersion precondition
// and the retry from the fresh object keep the user's entry. The pace also
// shows: the propagation takes at least (n-1)/2 seconds.
func TestConcurrentEditIsNeverLost(t *testing.T) {
	ns := cp.Namespace(t)
	const n = 8
	for i := 0; i < n; i++ {
		create(t, fleetGVR, fleetCluster(ns, fmt.Sprintf("c%02d", i), nil, nil, user))
	}
	tr := newTriples(election.WranglerDefaults)
	r := start(t, tr, fleet.ChannelClusterEnvV09, func(o *agentenv.Options) { o.ClustersPerMinute = 120 })
	r.settle() // 45/30/2 is what v0.9 agents run without entries: nothing to write yet
	began := time.Now()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("c%02d", i)
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				u, err := res(fleetGVR, ns).Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
				l = append(l, map[string]interface{}{"name": "NO_PROXY", "value": "10.0.0.0/8"})
				_ = unstructured.SetNestedSlice(u.Object, l, "spec", "agentEnvVars")
				_, err = res(fleetGVR, ns).Update(context.Background(), u, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Errorf("user edit of %s: %v", name, err)
			}
		}
	}()
	tr.Set(mustTimings("60s", "50s", "20s"))
	wg.Wait()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("c%02d", i)
		eventually(t, name, func() bool {
			got := strings.Join(envOf(getObj(t, fleetGVR, ns, name)), ",")
			return strings.Contains(got, "NO_PROXY=10.0.0.0/8") && strings.Contains(got, "HTTPS_PROXY=") &&
				strings.Contains(got, "CATTLE_ELECTION_LEASE_DURATION=1m0s,CATTLE_ELECTION_RENEW_DEADLINE=50s,CATTLE_ELECTION_RETRY_PERIOD=20s")
		})
	}
	if took := time.Since(began); took < time.Duration(n-1)*500*time.Millisecond {
		t.Errorf("%d paced writes at 2/s took only %s", n, took)
	}
}

// TestZeroWritesOnResyncAndRestart.
func TestZeroWritesOnResyncAndRestart(t *testing.T) {
	ns := cp.Namespace(t)
	for i := 0; i < 10; i++ {
		ann := map[string]string{}
		if i%2 == 0 {
			ann[agentenv.RetryPeriodAnnotation] = "5s"
		}
		create(t, fleetGVR, fleetCluster(ns, fmt.Sprintf("z%d", i), nil, ann, user))
	}
	tr := newTriples(mustTimings("60s", "50s", "20s"))
	r := start(t, tr, fleet.ChannelClusterEnvV09)
	if n := r.settle(); n != 10 {
		t.Errorf("%d writes for 10 clusters, want 10", n)
	}
	r.EnqueueAll()
	if n := r.settle(); n != 10 {
		t.Errorf("resync made %d writes", n-10)
	}
	r.cancel()
	r2 := start(t, tr, fleet.ChannelClusterEnvV09)
	if n := r2.settle(); n != 0 {
		t.Errorf("restart made %d writes", n)
	}
}

// TestGlobalChangeIsSummedUp: the writes of a global agent triple change
// raise no Event per cluster (10,000 clusters would be 10,000 Event
// writes); once every cluster is synced, one AgentTimingsPropagated Event
// on each fleet-agent Setting says what was written and restarted. A
// cluster's own change (an override) still gets its AgentEnvUpdated Event.
func TestGlobalChangeIsSummedUp(t *testing.T) {
	ns := cp.Namespace(t)
	for _, name := range []string{"g1", "g2", "g3"} {
		create(t, fleetGVR, fleetCluster(ns, name, nil, nil, user))
	}
	tr := newTriples(election.FleetDefaults)
	r := start(t, tr, fleet.ChannelClusterEnvV09)
	r.settle()
	before := map[string]int{}
	for _, name := range []string{"g1", "g2", "g3"} {
		before[name] = len(events(t, ns, name, "AgentEnvUpdated"))
	}
	next := mustTimings("50s", "40s", "15s")
	tr.Set(next)
	for _, name := range []string{"g1", "g2", "g3"} {
		eventually(t, name+" written", func() bool {
			return strings.Contains(strings.Join(envOf(getObj(t, fleetGVR, ns, name)), ","), "CATTLE_ELECTION_RETRY_PERIOD=15s")
		})
	}
	for _, d := range settings.Of(settings.FleetAgent) {
		eventually(t, "summary Event on "+d.Name, func() bool {
			for _, m := range events(t, "", d.Name, agentenv.ReasonPropagated) {
				if strings.Contains(m, "the agent triple "+next.String()+" is propagated") && strings.Contains(m, "had CATTLE_ELECTION_* written") {
					return true
				}
			}
			return false
		})
	}
	r.settle()
	for _, name := range []string{"g1", "g2", "g3"} {
		if got := len(events(t, ns, name, "AgentEnvUpdated")); got != before[name] {
			t.Errorf("%s: %d AgentEnvUpdated Events after the global change, %d before: want none for it", name, got, before[name])
		}
	}
	// An override on one cluster is its own change: it gets its Event.
	annotate(t, fleetGVR, ns, "g1", map[string]interface{}{agentenv.RetryPeriodAnnotation: "12s"})
	eventually(t, "override Event", func() bool { return len(events(t, ns, "g1", "AgentEnvUpdated")) > before["g1"] })
}
