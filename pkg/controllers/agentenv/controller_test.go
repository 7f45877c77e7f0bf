package agentenv

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/tests/kit/fakes"
)

// The tests of sync seed the controller's caches and a fake dynamic
// client with the same objects, call sync directly and check the exact
// list of the client's actions (kubernetes/sample-controller's
// controller_test.go: TestDoNothing and friends).

// fixture is a controller whose caches and fake client hold objs.
type fixture struct {
	t      *testing.T
	c      *Controller
	client *dynamicfake.FakeDynamicClient
	events *record.FakeRecorder
	clock  *clocktesting.FakeClock
}

func newFixture(t *testing.T, triple election.Timings, ch fleet.AgentChannel, objs ...*unstructured.Unstructured) *fixture {
	t.Helper()
	scheme := runtime.NewScheme()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		fleet.ClusterGVR: "ClusterList", rancher.ProvisioningClusterGVR: "ClusterList", rancher.ManagementClusterGVR: "ClusterList"})
	f := &fixture{t: t, client: client, events: record.NewFakeRecorder(100), clock: clocktesting.NewFakeClock(time.Unix(1e9, 0))}
	f.c = New(Options{Client: client, Triples: fakes.AgentTriples(triple), Channels: fakes.Channel(ch),
		Recorder: f.events, Clock: f.clock, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, o := range objs {
		f.seed(o)
	}
	client.ClearActions()
	return f
}

// seed puts o in the fake client and its slim copy in the cache, as the
// informer would.
func (f *fixture) seed(o *unstructured.Unstructured) {
	f.t.Helper()
	res := f.client.Resource(fleet.ClusterGVR).Namespace(o.GetNamespace())
	if _, err := res.Get(context.Background(), o.GetName(), metav1.GetOptions{}); err == nil {
		if _, err := res.Update(context.Background(), o, metav1.UpdateOptions{}); err != nil {
			f.t.Fatal(err)
		}
	} else if _, err := res.Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.recache(o.GetNamespace(), o.GetName())
}

// recache puts the client's current copy of a fleet Cluster in the cache
// (what the informer does after a write).
func (f *fixture) recache(ns, name string) {
	f.t.Helper()
	u, err := f.client.Resource(fleet.ClusterGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	if ts := u.GetCreationTimestamp(); ts.IsZero() {
		u.SetCreationTimestamp(metav1.NewTime(time.Unix(1e9, 0))) // served objects have one
	}
	s, err := slim.Transform(u)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.c.fleet.GetIndexer().Update(s); err != nil {
		f.t.Fatal(err)
	}
}

// sync syncs key and returns the actions it made.
func (f *fixture) sync(key string) []clienttesting.Action {
	f.t.Helper()
	f.client.ClearActions()
	if err := f.c.sync(context.Background(), key); err != nil {
		f.t.Fatalf("sync %s: %v", key, err)
	}
	return f.client.Actions()
}

// want is an expected action: its verb and, for a patch, its body.
type want struct {
	verb string
	body string
}

func (f *fixture) check(got []clienttesting.Action, wants ...want) {
	f.t.Helper()
	if len(got) != len(wants) {
		var verbs []string
		for _, a := range got {
			verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
		}
		f.t.Fatalf("%d actions %v, want %d %v", len(got), verbs, len(wants), wants)
	}
	for i, a := range got {
		if a.GetVerb() != wants[i].verb {
			f.t.Errorf("action %d is %s, want %s", i, a.GetVerb(), wants[i].verb)
			continue
		}
		if p, ok := a.(clienttesting.PatchAction); ok && wants[i].body != "" {
			if !jsonEqual(p.GetPatch(), wants[i].body) {
				f.t.Errorf("action %d patch body\n  %s\nwant\n  %s", i, p.GetPatch(), wants[i].body)
			}
		}
	}
}

func jsonEqual(a []byte, b string) bool {
	var x, y interface{}
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// fleetCluster is a standalone fleet Cluster (its own source) with env
// and annotations.
func fleetCluster(name string, env []map[string]interface{}, ann map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": name, "namespace": "fleet-default"},
		"spec":     map[string]interface{}{},
	}}
	if env != nil {
		items := make([]interface{}, len(env))
		for i, x := range env {
			items[i] = x
		}
		_ = unstructured.SetNestedSlice(u.Object, items, "spec", "agentEnvVars")
	}
	if ann != nil {
		u.SetAnnotations(ann)
	}
	return u
}

func recordOf(r map[string]string) string {
	b, _ := json.Marshal(r)
	return string(b)
}

// The channel on which the controller writes the global triple to each
// cluster: Fleet v0.9.1+ agents read their cluster's env.
const writes = fleet.ChannelClusterEnvV09

func TestSyncDoesNothingWhenConverged(t *testing.T) {
	f := newFixture(t, global, writes, fleetCluster("c1", []map[string]interface{}{user, e(L, "1m0s"), e(D, "50s"), e(P, "20s")},
		map[string]string{agentenv.RecordAnnotation: recordOf(rec6050)}))
	f.check(f.sync("fleet-default/c1"))
	if n := len(f.events.Events); n != 0 {
		t.Errorf("%d Events, want none", n)
	}
}

func TestSyncDoesNothingWithoutTripleOrChannel(t *testing.T) {
	c := fleetCluster("c1", []map[string]interface{}{user}, nil)
	f := newFixture(t, global, "", c)
	f.check(f.sync("fleet-default/c1"))
	f = newFixture(t, global, writes, c)
	f.c.opts.Triples = fakes.NewTriples(nil)
	f.check(f.sync("fleet-default/c1"))
}

func TestSyncGoneClusterDoesNothingAndForgets(t *testing.T) {
	f := newFixture(t, global, writes)
	f.c.ledger.setProblem("fleet-default/gone", agentenv.ProblemForeign)
	f.check(f.sync("fleet-default/gone"))
	if p := f.c.Problems(); len(p) != 0 {
		t.Errorf("problems %v after the cluster is gone, want none", p)
	}
}

func TestSyncOneChangeIsOnePatch(t *testing.T) {
	f := newFixture(t, global, writes, fleetCluster("c1", []map[string]interface{}{user}, nil))
	rv := f.c.fleet.GetStore().List()[0].(*unstructured.Unstructured).GetResourceVersion()
	f.check(f.sync("fleet-default/c1"), want{"patch", `{"metadata":{"resourceVersion":"` + rv + `","annotations":{
		"leasetune.io/agent-env":"{\"CATTLE_ELECTION_LEASE_DURATION\":\"1m0s\",\"CATTLE_ELECTION_RENEW_DEADLINE\":\"50s\",\"CATTLE_ELECTION_RETRY_PERIOD\":\"20s\"}",
		"leasetune.io/agent-env-status":null}},
		"spec":{"agentEnvVars":[{"name":"HTTPS_PROXY","value":"http://proxy:3128"},
		{"name":"CATTLE_ELECTION_LEASE_DURATION","value":"1m0s"},{"name":"CATTLE_ELECTION_RENEW_DEADLINE","value":"50s"},
		{"name":"CATTLE_ELECTION_RETRY_PERIOD","value":"20s"}]}}`})
	// The informer brings the written object: nothing more to do.
	f.recache("fleet-default", "c1")
	f.check(f.sync("fleet-default/c1"))
	if got := <-f.events.Events; !strings.Contains(got, ReasonUpdated) {
		t.Errorf("Event %q, want %s", got, ReasonUpdated)
	}
}

func TestSyncConflictReadsOnceAndPatchesOnce(t *testing.T) {
	f := newFixture(t, global, writes, fleetCluster("c1", []map[string]interface{}{user}, nil))
	// Someone adds an entry of theirs after the cache saw the object; the
	// first patch meets the conflict the resourceVersion precondition
	// gives.
	other := fleetCluster("c1", []map[string]interface{}{user, e("NO_PROXY", "10.0.0.0/8")}, nil)
	if _, err := f.client.Resource(fleet.ClusterGVR).Namespace("fleet-default").Update(context.Background(), other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	conflicts := 1
	f.client.PrependReactor("patch", "clusters", func(clienttesting.Action) (bool, runtime.Object, error) {
		if conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(fleet.ClusterGVR.GroupResource(), "c1", nil)
		}
		return false, nil, nil
	})
	got := f.sync("fleet-default/c1")
	f.check(got, want{verb: "patch"}, want{verb: "get"}, want{verb: "patch"})
	// The second patch keeps the other writer's entry.
	if p := string(got[2].(clienttesting.PatchAction).GetPatch()); !strings.Contains(p, "NO_PROXY") {
		t.Errorf("the patch after the conflict lost the other writer's entry: %s", p)
	}
}

func TestSyncInvalidOverrideWritesStatusOnceThenNothing(t *testing.T) {
	f := newFixture(t, global, writes, fleetCluster("c1", []map[string]interface{}{user},
		map[string]string{agentenv.RetryPeriodAnnotation: "45s"})) // renewDeadline 50s must exceed 1.2 × 45s
	got := f.sync("fleet-default/c1")
	f.check(got, want{verb: "patch"})
	p := string(got[0].(clienttesting.PatchAction).GetPatch())
	if !strings.Contains(p, agentenv.StatusAnnotation) || strings.Contains(p, `"spec"`) {
		t.Errorf("want a patch of the status annotation alone, got %s", p)
	}
	f.recache("fleet-default", "c1")
	f.check(f.sync("fleet-default/c1"))
	if n := len(f.events.Events); n != 1 {
		t.Errorf("%d Events, want one Warning", n)
	}
	if p := f.c.Problems()["fleet-default/c1"]; p != agentenv.ProblemInvalid {
		t.Errorf("problem %q, want %q", p, agentenv.ProblemInvalid)
	}
}

func TestSyncRevertGuardFencesWithOneStatusWriteThenNothing(t *testing.T) {
	// leasetune's record shows its entries, yet someone removed them: each
	// sync would restore them (a revert).
	removed := fleetCluster("c1", []map[string]interface{}{user}, map[string]string{agentenv.RecordAnnotation: recordOf(rec6050)})
	f := newFixture(t, global, writes, removed)
	for i := 1; i < RevertLimit; i++ {
		f.check(f.sync("fleet-default/c1"), want{verb: "patch"})
		f.seed(removed) // the other writer removes them again
		f.clock.Step(time.Second)
	}
	// The RevertLimit-th revert: who writes the env is read live, then one
	// status write, and no env write.
	got := f.sync("fleet-default/c1")
	f.check(got, want{verb: "get"}, want{verb: "patch"})
	p := string(got[1].(clienttesting.PatchAction).GetPatch())
	if strings.Contains(p, `"spec"`) || !strings.Contains(p, "stops writing this object") {
		t.Errorf("want the fence's status alone, got %s", p)
	}
	f.recache("fleet-default", "c1")
	f.check(f.sync("fleet-default/c1"))
	f.check(f.sync("fleet-default/c1"))
	if p := f.c.Problems()["fleet-default/c1"]; p != agentenv.ProblemReverted {
		t.Errorf("problem %q, want %q", p, agentenv.ProblemReverted)
	}
	// A change otherwise (a label) lifts the fence: written again.
	changed := removed.DeepCopy()
	changed.SetLabels(map[string]string{"env": "prod"})
	f.seed(changed)
	f.check(f.sync("fleet-default/c1"), want{verb: "patch"})
}

func TestSyncRevertsOutsideTheWindowDoNotFence(t *testing.T) {
	removed := fleetCluster("c1", []map[string]interface{}{user}, map[string]string{agentenv.RecordAnnotation: recordOf(rec6050)})
	f := newFixture(t, global, writes, removed)
	for i := 0; i < 2*RevertLimit; i++ {
		f.check(f.sync("fleet-default/c1"), want{verb: "patch"})
		f.seed(removed)
		f.clock.Step(RevertWindow / (RevertLimit - 1))
	}
}

func TestUpdateHandlerSkipsResourceVersionOnlyChanges(t *testing.T) {
	a := fleetCluster("c1", []map[string]interface{}{user}, nil)
	a.SetResourceVersion("1")
	a.SetCreationTimestamp(metav1.NewTime(time.Unix(1e9, 0)))
	b := a.DeepCopy()
	b.SetResourceVersion("2")
	_ = unstructured.SetNestedField(b.Object, map[string]interface{}{"ready": true}, "status") // not kept by slim
	sa, _ := slim.Transform(a)
	sb, _ := slim.Transform(b)
	if !sameApartFromResourceVersion(sa, sb) {
		t.Error("a status-only update of the slim copies counts as a change")
	}
	c := b.DeepCopy()
	c.SetLabels(map[string]string{"env": "prod"})
	sc, _ := slim.Transform(c)
	if sameApartFromResourceVersion(sa, sc) {
		t.Error("a label change is not seen (the fingerprint changes)")
	}
	d := b.DeepCopy()
	d.SetAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: "5s"})
	sd, _ := slim.Transform(d)
	if sameApartFromResourceVersion(sa, sd) {
		t.Error("an override annotation change is not seen")
	}
}

// TestLoopSumsUpTheChange: the work queue's syncs settle the clusters of
// a triple change (syncAndSettle) and its emptying ends the change
// (Idle): after the one cluster it owes is written, the change is summed
// up once (ReasonPropagated on each agent Setting) and no change is
// propagating any more.
func TestLoopSumsUpTheChange(t *testing.T) {
	f := newFixture(t, global, writes, fleetCluster("c1", []map[string]interface{}{user}, nil))
	f.c.prop.beginFirstPass(global, true, f.clock.Now(), []string{"fleet-default/c1"})
	f.c.prop.mu.Lock()
	f.c.prop.changeAt = f.clock.Now() // as a change of the triple sets it
	f.c.prop.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.c.loop.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	f.c.loop.Add("fleet-default/c1")
	deadline := time.Now().Add(10 * time.Second)
	for !f.c.prop.since().IsZero() || f.c.prop.syncSeq() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the change still propagating after the loop synced its one cluster (since %v, seq %d)", f.c.prop.since(), f.c.prop.syncSeq())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var propagated int
	for len(f.events.Events) > 0 {
		if strings.Contains(<-f.events.Events, ReasonPropagated) {
			propagated++
		}
	}
	if propagated != 3 {
		t.Errorf("%d %s Events, want one on each of the 3 agent Settings", propagated, ReasonPropagated)
	}
	if n := len(f.client.Actions()); n != 1 {
		t.Errorf("%d API calls, want the one patch", n)
	}
}
