package agentenv_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"leasetune.io/leasetune/pkg/agentenv"
	agentenvcontroller "leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/kit/fakes"
)

var (
	user    = corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}
	fromRef = corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "agent-token"}, Key: "token"}}}
)

// TestOverridesAddedChangedRemoved follows one standalone cluster through
// the life of an override, on Fleet v0.9.1+ (the agent reads the cluster's
// entries; the manifest renders none), with the global triple equal to
// wrangler's, which the agent runs without entries.
func TestOverridesAddedChangedRemoved(t *testing.T) {
	ns := cp.Namespace(t)
	before := cp.Create(t, fleetGVR, fleetCluster(ns, "edge-1", kit.WithEnv(user, fromRef)))
	r := start(t, fakes.AgentTriples(election.WranglerDefaults), fleet.ChannelClusterEnvV09)
	if !r.writes.NoWrites(t, "no override and the agent's own triple", framework.ConsistentlyMin, r.idle) || r.writes.Writes() != 0 {
		t.Fatalf("%d writes with no override and the agent's own triple", r.writes.Writes())
	}

	annotate(t, fleetGVR, ns, "edge-1", map[string]interface{}{agentenv.RetryPeriodAnnotation: "5s"})
	want := []string{"HTTPS_PROXY=http://proxy:3128", "TOKEN=<valueFrom>",
		"CATTLE_ELECTION_LEASE_DURATION=45s", "CATTLE_ELECTION_RENEW_DEADLINE=30s", "CATTLE_ELECTION_RETRY_PERIOD=5s"}
	framework.Eventually(t, "override applied", func() bool { return reflect.DeepEqual(kit.AgentEnv(getObj(t, fleetGVR, ns, "edge-1")), want) })
	if n := r.settle(); n != 1 {
		t.Errorf("%d writes for one override, want 1", n)
	}
	after := getObj(t, fleetGVR, ns, "edge-1")
	if was, now := kit.Stripped(t, before, notEnv...), kit.Stripped(t, after, notEnv...); was != now {
		t.Errorf("spec changed besides agentEnvVars:\n%s\n%s", was, now)
	}
	if got := after.GetAnnotations()[agentenv.RecordAnnotation]; !strings.Contains(got, `"CATTLE_ELECTION_RETRY_PERIOD":"5s"`) {
		t.Errorf("record %q", got)
	}

	annotate(t, fleetGVR, ns, "edge-1", map[string]interface{}{agentenv.RetryPeriodAnnotation: "8s", agentenv.LeaseDurationAnnotation: "40s"})
	want[2], want[4] = "CATTLE_ELECTION_LEASE_DURATION=40s", "CATTLE_ELECTION_RETRY_PERIOD=8s"
	framework.Eventually(t, "override changed in place", func() bool { return reflect.DeepEqual(kit.AgentEnv(getObj(t, fleetGVR, ns, "edge-1")), want) })

	annotate(t, fleetGVR, ns, "edge-1", map[string]interface{}{agentenv.RetryPeriodAnnotation: nil, agentenv.LeaseDurationAnnotation: nil})
	framework.Eventually(t, "override removed", func() bool {
		u := getObj(t, fleetGVR, ns, "edge-1")
		_, rec := u.GetAnnotations()[agentenv.RecordAnnotation]
		return reflect.DeepEqual(kit.AgentEnv(u), want[:2]) && !rec
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
			cp.Create(t, fleetGVR, fleetCluster(ns, "edge-1", kit.WithAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "5s"}), kit.WithEnv(user)))
			r := start(t, fakes.AgentTriples(election.FleetDefaults), ch)
			framework.Eventually(t, "reported", func() bool {
				return strings.Contains(getObj(t, fleetGVR, ns, "edge-1").GetAnnotations()[agentenv.StatusAnnotation], "renders CATTLE_ELECTION_* itself")
			})
			if n := r.settle(); n != 1 {
				t.Errorf("%d writes, want 1 (the status annotation)", n)
			}
			if got := kit.AgentEnv(getObj(t, fleetGVR, ns, "edge-1")); !reflect.DeepEqual(got, []string{"HTTPS_PROXY=http://proxy:3128"}) {
				t.Errorf("env written where Fleet renders the names: %v", got)
			}
			if ev := cp.Events(t, ns, "edge-1", "ElectionOverrideUnsupported"); len(ev) != 1 {
				t.Errorf("events %v", ev)
			}
			if r.Problems()[ns+"/edge-1"] != agentenv.ProblemUnsupported {
				t.Errorf("problems %v", r.Problems())
			}
			r.EnqueueAll()
			r.writes.NoWrites(t, "resync", framework.ConsistentlyMin, r.idle)
			if n := r.writes.Writes(); n != 1 {
				t.Errorf("resync wrote %d times", n-1)
			}
			annotate(t, fleetGVR, ns, "edge-1", map[string]interface{}{agentenv.RetryPeriodAnnotation: nil})
			framework.Eventually(t, "report removed with the override", func() bool {
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
	ours := kit.Env("CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RENEW_DEADLINE=25s", "CATTLE_ELECTION_RETRY_PERIOD=5s")
	u := fleetCluster(ns, "broken",
		kit.WithAnnotations(map[string]string{agentenv.RecordAnnotation: `{"CATTLE_ELECTION_LEASE_DURATION":"30s","CATTLE_ELECTION_RENEW_DEADLINE":"25s","CATTLE_ELECTION_RETRY_PERIOD":"5s"}`}),
		kit.WithEnv(user, ours[0], fromRef, ours[1], ours[2]))
	cp.Create(t, fleetGVR, u)
	r := start(t, fakes.AgentTriples(election.FleetDefaults), fleet.ChannelAgentManagement)
	framework.Eventually(t, "repaired", func() bool {
		o := getObj(t, fleetGVR, ns, "broken")
		_, rec := o.GetAnnotations()[agentenv.RecordAnnotation]
		return reflect.DeepEqual(kit.AgentEnv(o), []string{"HTTPS_PROXY=http://proxy:3128", "TOKEN=<valueFrom>"}) && !rec
	})
	if n := r.settle(); n != 1 {
		t.Errorf("%d writes for the repair, want 1", n)
	}
}

// TestInvalidOverrideLeavesClusterAloneAndOthersProceed.
func TestInvalidOverrideLeavesClusterAloneAndOthersProceed(t *testing.T) {
	ns := cp.Namespace(t)
	cp.Create(t, fleetGVR, fleetCluster(ns, "bad", kit.WithAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "30s"}), kit.WithEnv(user)))
	cp.Create(t, fleetGVR, fleetCluster(ns, "good", kit.WithAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "5s"})))
	r := start(t, fakes.AgentTriples(election.FleetDefaults), fleet.ChannelClusterEnvV09)

	framework.Eventually(t, "good cluster written", func() bool { return len(kit.AgentEnv(getObj(t, fleetGVR, ns, "good"))) == 3 })
	framework.Eventually(t, "bad cluster marked", func() bool {
		return strings.Contains(getObj(t, fleetGVR, ns, "bad").GetAnnotations()[agentenv.StatusAnnotation],
			"renewDeadline 25s must exceed 1.2 × retryPeriod 30s = 36s")
	})
	if got := kit.AgentEnv(getObj(t, fleetGVR, ns, "bad")); !reflect.DeepEqual(got, []string{"HTTPS_PROXY=http://proxy:3128"}) {
		t.Errorf("invalid cluster changed: %v", got)
	}
	framework.Eventually(t, "event", func() bool {
		ev := cp.Events(t, ns, "bad", "InvalidElectionOverride")
		return len(ev) == 1 && strings.Contains(ev[0], "retryPeriod 30s")
	})
	if r.Problems()[ns+"/bad"] != agentenv.ProblemInvalid {
		t.Errorf("problems %v", r.Problems())
	}
	// A resync does not report or write again.
	n := r.settle()
	r.EnqueueAll()
	r.writes.NoWrites(t, "resync", framework.ConsistentlyMin, r.idle)
	if m := r.writes.Writes(); m != n {
		t.Errorf("resync made %d writes", m-n)
	}
	if ev := cp.Events(t, ns, "bad", "InvalidElectionOverride"); len(ev) != 1 || strings.Contains(ev[0], "\n") {
		t.Errorf("events after resync: %v", ev)
	}

	// Fixed: applied, mark removed.
	annotate(t, fleetGVR, ns, "bad", map[string]interface{}{agentenv.RetryPeriodAnnotation: "12s"})
	framework.Eventually(t, "fixed", func() bool {
		u := getObj(t, fleetGVR, ns, "bad")
		_, marked := u.GetAnnotations()[agentenv.StatusAnnotation]
		return len(kit.AgentEnv(u)) == 4 && !marked
	})
	framework.Eventually(t, "the problem cleared (the report step follows the write)", func() bool {
		_, bad := r.Problems()[ns+"/bad"]
		return !bad
	})
}

// TestHandWrittenEntriesAreTheirs: a CATTLE_ELECTION_* entry the project
// did not write belongs to someone else.
func TestHandWrittenEntriesAreTheirs(t *testing.T) {
	ns := cp.Namespace(t)
	hand := corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "3s"}
	cp.Create(t, fleetGVR, fleetCluster(ns, "hand", kit.WithAnnotations(map[string]string{agentenv.LeaseDurationAnnotation: "40s"}), kit.WithEnv(user, hand)))
	r := start(t, fakes.AgentTriples(election.FleetDefaults), fleet.ChannelClusterEnvV09)
	framework.Eventually(t, "reported", func() bool { return r.Problems()[ns+"/hand"] == agentenv.ProblemForeign })
	framework.Eventually(t, "marked", func() bool {
		return strings.Contains(getObj(t, fleetGVR, ns, "hand").GetAnnotations()[agentenv.StatusAnnotation], `CATTLE_ELECTION_RETRY_PERIOD="3s"`)
	})
	if got := kit.AgentEnv(getObj(t, fleetGVR, ns, "hand")); len(got) != 2 {
		t.Errorf("a cluster with someone else's entry was written: %v", got)
	}
	if len(cp.Events(t, ns, "hand", "ForeignElectionEnv")) == 0 {
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
		cp.Create(t, mgmtGVR, kit.ManagementCluster(mgmtName, kit.WithSpec(map[string]interface{}{"displayName": name}),
			kit.WithEnv(user), kit.WithAnnotations(mgmtAnn)))
		if withProv {
			spec := map[string]interface{}{"kubernetesVersion": "v1.30.4+rke2r1"}
			if rke {
				spec["rkeConfig"] = map[string]interface{}{}
			}
			p := cp.Create(t, provGVR, kit.ProvisioningCluster(ns, name, kit.WithSpec(spec), kit.WithAnnotations(provAnn)))
			_ = unstructured.SetNestedField(p.Object, mgmtName, "status", "clusterName")
			if _, err := cp.Resource(provGVR, ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// The fleet Cluster Rancher generates, with the env it copied.
		cp.Create(t, fleetGVR, fleetCluster(ns, name, kit.WithLabels(map[string]string{rancher.ClusterNameLabel: mgmtName}), kit.WithEnv(user)))
	}
	over := map[string]string{agentenv.RetryPeriodAnnotation: "5s"}
	mk("provisioned", ns+"-provisioned", true, over, true, nil)
	mk("imported", ns+"-imported", false, over, true, nil)
	mk("legacy", legacyName, false, nil, false, over)
	start(t, fakes.AgentTriples(election.FleetDefaults), fleet.ChannelClusterEnvV09)

	want := []string{"HTTPS_PROXY=http://proxy:3128", "CATTLE_ELECTION_LEASE_DURATION=30s",
		"CATTLE_ELECTION_RENEW_DEADLINE=25s", "CATTLE_ELECTION_RETRY_PERIOD=5s"}
	framework.Eventually(t, "provisioned: written on the provisioning Cluster", func() bool {
		return reflect.DeepEqual(kit.AgentEnv(getObj(t, provGVR, ns, "provisioned")), want[1:])
	})
	framework.Eventually(t, "imported: written on the provisioning Cluster", func() bool {
		return reflect.DeepEqual(kit.AgentEnv(getObj(t, provGVR, ns, "imported")), want[1:])
	})
	framework.Eventually(t, "legacy: written on the management Cluster", func() bool {
		return reflect.DeepEqual(kit.AgentEnv(getObj(t, mgmtGVR, "", legacyName)), want)
	})
	var written string
	framework.Consistently(t, "the generated objects are not written", framework.ConsistentlyMin, func() bool {
		for _, name := range []string{"provisioned", "imported", "legacy"} {
			if got := kit.AgentEnv(getObj(t, fleetGVR, ns, name)); len(got) != 1 {
				written = fmt.Sprintf("%s: the generated fleet Cluster was written: %v", name, got)
				return false
			}
		}
		for _, name := range []string{"provisioned", "imported"} {
			if got := kit.AgentEnv(getObj(t, mgmtGVR, "", ns+"-"+name)); len(got) != 1 {
				written = fmt.Sprintf("%s: the generated management Cluster was written: %v", name, got)
				return false
			}
		}
		return true
	})
	if written != "" {
		t.Error(written)
	}
	// The first pass's writes are summed up on the fleet-agent Settings,
	// with what they restart: all three run cattle-cluster-agent, the
	// provisioned one also re-plans its nodes.
	cp.EventuallyEvent(t, "", settings.Of(settings.FleetAgent)[0].Name, agentenvcontroller.ReasonPropagated, "at leasetune's start", "(3 also cattle-cluster-agent, 1 re-planning every node)")
	if ev := cp.Events(t, ns, "provisioned", "AgentEnvUpdated"); len(ev) != 0 {
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
		cp.Create(t, fleetGVR, fleetCluster(ns, fmt.Sprintf("c%02d", i), kit.WithEnv(user)))
	}
	tr := fakes.AgentTriples(election.WranglerDefaults)
	r := start(t, tr, fleet.ChannelClusterEnvV09, func(o *agentenvcontroller.Options) { o.ClustersPerMinute = 120 })
	r.settle() // 45/30/2 is what v0.9 agents run without entries: nothing to write yet
	began := time.Now()

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("c%02d", i)
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				u, err := cp.Resource(fleetGVR, ns).Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				l, _, _ := unstructured.NestedSlice(u.Object, "spec", "agentEnvVars")
				l = append(l, map[string]interface{}{"name": "NO_PROXY", "value": "10.0.0.0/8"})
				_ = unstructured.SetNestedSlice(u.Object, l, "spec", "agentEnvVars")
				_, err = cp.Resource(fleetGVR, ns).Update(context.Background(), u, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Errorf("user edit of %s: %v", name, err)
			}
		}
	}()
	tr.Set(settings.FleetAgent, kit.Timings("60s", "50s", "20s"))
	wg.Wait()
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("c%02d", i)
		framework.Eventually(t, name, func() bool {
			got := strings.Join(kit.AgentEnv(getObj(t, fleetGVR, ns, name)), ",")
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
		cp.Create(t, fleetGVR, fleetCluster(ns, fmt.Sprintf("z%d", i), kit.WithAnnotations(ann), kit.WithEnv(user)))
	}
	tr := fakes.AgentTriples(kit.Timings("60s", "50s", "20s"))
	r := start(t, tr, fleet.ChannelClusterEnvV09)
	if n := r.settle(); n != 10 {
		t.Errorf("%d writes for 10 clusters, want 10", n)
	}
	r.EnqueueAll()
	r.writes.NoWrites(t, "resync", framework.ConsistentlyMin, r.idle)
	if n := r.writes.Writes(); n != 10 {
		t.Errorf("resync made %d writes", n-10)
	}
	r.cancel()
	r2 := start(t, tr, fleet.ChannelClusterEnvV09)
	r2.writes.NoWrites(t, "restart", framework.ConsistentlyMin, r2.idle)
	if n := r2.writes.Writes(); n != 0 {
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
		cp.Create(t, fleetGVR, fleetCluster(ns, name, kit.WithEnv(user)))
	}
	tr := fakes.AgentTriples(election.FleetDefaults)
	r := start(t, tr, fleet.ChannelClusterEnvV09)
	r.settle()
	before := map[string]int{}
	for _, name := range []string{"g1", "g2", "g3"} {
		before[name] = len(cp.Events(t, ns, name, "AgentEnvUpdated"))
	}
	next := kit.Timings("50s", "40s", "15s")
	tr.Set(settings.FleetAgent, next)
	for _, name := range []string{"g1", "g2", "g3"} {
		framework.Eventually(t, name+" written", func() bool {
			return strings.Contains(strings.Join(kit.AgentEnv(getObj(t, fleetGVR, ns, name)), ","), "CATTLE_ELECTION_RETRY_PERIOD=15s")
		})
	}
	for _, d := range settings.Of(settings.FleetAgent) {
		cp.EventuallyEvent(t, "", d.Name, agentenvcontroller.ReasonPropagated, "the agent triple "+next.String()+" is propagated", "had CATTLE_ELECTION_* written")
	}
	r.settle()
	for _, name := range []string{"g1", "g2", "g3"} {
		if got := len(cp.Events(t, ns, name, "AgentEnvUpdated")); got != before[name] {
			t.Errorf("%s: %d AgentEnvUpdated Events after the global change, %d before: want none for it", name, got, before[name])
		}
	}
	// An override on one cluster is its own change: it gets its Event.
	annotate(t, fleetGVR, ns, "g1", map[string]interface{}{agentenv.RetryPeriodAnnotation: "12s"})
	framework.Eventually(t, "override Event", func() bool { return len(cp.Events(t, ns, "g1", "AgentEnvUpdated")) > before["g1"] })
}
