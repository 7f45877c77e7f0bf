package rancherenv

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/rancher/wrangler/v2/pkg/generic/fake"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/kit/fakes"
)

// triples is the settings provider as the controller reads it: the
// Rancher triple in effect, the one pending, and whether it has read the
// Settings yet.
type triples struct {
	status   settings.ComponentStatus
	unsynced bool
}

func (p *triples) Effective(settings.Component) (election.Timings, bool) {
	return p.status.Effective, p.status.HasEffective
}
func (p *triples) OnChange(func())                                    {}
func (p *triples) Status(settings.Component) settings.ComponentStatus { return p.status }
func (p *triples) HasSynced() bool                                    { return !p.unsynced }

func inEffect(t election.Timings) *triples {
	return &triples{status: settings.ComponentStatus{Effective: t, HasEffective: true}}
}

type harness struct {
	c      *Controller
	cs     *kfake.Clientset
	deps   *fake.MockControllerInterface[*appsv1.Deployment, *appsv1.DeploymentList]
	queue  *fakes.Queue[string]
	events *record.FakeRecorder
}

// newHarness is the controller with a fake clientset holding objs, a
// mocked Deployment controller, a recording work queue (every test
// checks what was enqueued: h.sync expects nothing) and a recorder of
// its Events.
func newHarness(t *testing.T, tr *triples, objs ...*appsv1.Deployment) *harness {
	t.Helper()
	cs := kfake.NewSimpleClientset()
	for _, o := range objs {
		if err := cs.Tracker().Add(o.DeepCopy()); err != nil {
			t.Fatal(err)
		}
	}
	cs.ClearActions()
	h := &harness{cs: cs, deps: fake.NewMockControllerInterface[*appsv1.Deployment, *appsv1.DeploymentList](gomock.NewController(t)),
		queue: &fakes.Queue[string]{}, events: record.NewFakeRecorder(10)}
	h.c = New(Options{Namespace: "cattle-system", Name: "rancher", Deployments: h.deps, Client: cs, Triples: tr,
		Recorder: h.events, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(h.c.loop.ShutDown)
	h.c.queue = h.queue
	return h
}

// sync syncs d and fails the test when it enqueued anything.
func (h *harness) sync(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	h.syncQueued(t, d)
	if q := h.queue.Added(); len(q) != 0 {
		t.Errorf("enqueued %q", q)
	}
}

// syncQueued syncs d and returns what it enqueued.
func (h *harness) syncQueued(t *testing.T, d *appsv1.Deployment) []fakes.Enqueued[string] {
	t.Helper()
	if err := h.c.sync(context.Background(), d); err != nil {
		t.Fatalf("sync: %v", err)
	}
	return h.queue.Entries()
}

// said are the Events recorded so far ("<type> <reason> <message>").
func (h *harness) said() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// TestDoNothing: at Rancher's built-in triple a Deployment without entries
// makes no API call and says nothing.
func TestDoNothing(t *testing.T) {
	d := deployment("v2.11.3")
	h := newHarness(t, inEffect(election.WranglerDefaults), d)
	h.sync(t, d)
	if a := h.cs.Actions(); len(a) != 0 {
		t.Errorf("%d API calls: %v", len(a), a)
	}
	if e := h.said(); len(e) != 0 {
		t.Errorf("Events: %q", e)
	}
}

// TestOnePatch: a triple to write is one JSON patch of the Deployment and
// nothing else, reported once after it; a sync of what it wrote is
// nothing.
func TestOnePatch(t *testing.T) {
	d := deployment("v2.11.3")
	h := newHarness(t, inEffect(opted), d)
	h.sync(t, d)
	a := h.cs.Actions()
	if len(a) != 1 {
		t.Fatalf("%d API calls, want 1 patch: %v", len(a), a)
	}
	p, ok := a[0].(k8stesting.PatchAction)
	if !ok || p.GetVerb() != "patch" || p.GetResource().Resource != "deployments" || p.GetName() != "rancher" || p.GetPatchType() != types.JSONPatchType {
		t.Fatalf("the call: %#v", a[0])
	}
	e := h.said()
	if len(e) != 1 || !strings.HasPrefix(e[0], corev1.EventTypeNormal+" "+ReasonUpdated+" CATTLE_ELECTION_* set to "+opted.String()) {
		t.Errorf("Events: %q", e)
	}
	got, err := h.cs.AppsV1().Deployments("cattle-system").Get(context.Background(), "rancher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h.cs.ClearActions()
	h.sync(t, got)
	if a := h.cs.Actions(); len(a) != 0 {
		t.Errorf("a sync of the written Deployment: %d API calls: %v", len(a), a)
	}
	if e := h.said(); len(e) != 0 {
		t.Errorf("a sync of the written Deployment: Events %q", e)
	}
}

// TestLeftAloneSaysItOnce: a Rancher whose cattle-controllers lock reads
// no env (2.8.2) is not written; the Warning is said once, not on every
// sync.
func TestLeftAloneSaysItOnce(t *testing.T) {
	d := deployment("v2.8.2")
	h := newHarness(t, inEffect(opted), d)
	h.sync(t, d)
	h.sync(t, d)
	if a := h.cs.Actions(); len(a) != 0 {
		t.Errorf("%d API calls: %v", len(a), a)
	}
	if e := h.said(); len(e) != 1 || !strings.HasPrefix(e[0], corev1.EventTypeWarning+" "+ReasonLeftAlone+" ") {
		t.Errorf("Events: %q", e)
	}
}

// TestDeferredWhileRollingOut: mid-rollout nothing is written and the wait
// is said once; once rolled out, the one patch.
func TestDeferredWhileRollingOut(t *testing.T) {
	d := deployment("v2.11.3")
	d.Status.UpdatedReplicas = 1
	h := newHarness(t, inEffect(opted), d)
	h.sync(t, d)
	h.sync(t, d)
	if a := h.cs.Actions(); len(a) != 0 {
		t.Errorf("mid-rollout: %d API calls: %v", len(a), a)
	}
	if e := h.said(); len(e) != 1 || !strings.HasPrefix(e[0], corev1.EventTypeNormal+" "+ReasonDeferred+" ") {
		t.Errorf("mid-rollout: Events %q", e)
	}
	h.sync(t, deployment("v2.11.3"))
	if a := h.cs.Actions(); len(a) != 1 || a[0].GetVerb() != "patch" {
		t.Errorf("rolled out: %v, want one patch", a)
	}
}

// TestGoneIsNoError: a Deployment deleted between the cache and the write
// ends the work: no error, nothing said as written.
func TestGoneIsNoError(t *testing.T) {
	h := newHarness(t, inEffect(opted))
	h.sync(t, deployment("v2.11.3"))
	if a := h.cs.Actions(); len(a) != 1 || a[0].GetVerb() != "patch" {
		t.Errorf("%v, want the one patch", a)
	}
	if e := h.said(); len(e) != 0 {
		t.Errorf("Events: %q", e)
	}
}

// TestWaitsForTheProvider: before the settings provider has read the
// Settings nothing is decided; the Deployment is looked at again.
func TestWaitsForTheProvider(t *testing.T) {
	d := deployment("v2.11.3")
	h := newHarness(t, &triples{unsynced: true}, d)
	if q := h.syncQueued(t, d); len(q) != 1 || q[0] != (fakes.Enqueued[string]{Key: "cattle-system/rancher", After: providerWait}) {
		t.Errorf("enqueued %v, want the Deployment after %s", q, providerWait)
	}
	if a := h.cs.Actions(); len(a) != 0 {
		t.Errorf("%d API calls: %v", len(a), a)
	}
}

// TestPendingLooksAgainAfterTheSettleTime: with a triple pending, the
// triple in effect is not written yet (the wait said once) and the
// Deployment is looked at again just after the settle time.
func TestPendingLooksAgainAfterTheSettleTime(t *testing.T) {
	d := deployment("v2.11.3")
	next := opted.With(election.RetryPeriod, 4*time.Second)
	tr := inEffect(opted)
	tr.status.Pending, tr.status.PendingAt = &next, time.Now().Add(time.Minute)
	h := newHarness(t, tr, d)
	q := h.syncQueued(t, d)
	if len(q) != 1 || q[0].Key != "cattle-system/rancher" || q[0].After < 59*time.Second || q[0].After > time.Minute+pendingRecheck {
		t.Errorf("enqueued %v, want the Deployment just after the settle time (1m)", q)
	}
	if a := h.cs.Actions(); len(a) != 0 {
		t.Errorf("%d API calls: %v", len(a), a)
	}
	if e := h.said(); len(e) != 1 || !strings.HasPrefix(e[0], corev1.EventTypeNormal+" "+ReasonDeferred+" ") {
		t.Errorf("Events: %q", e)
	}
}

// TestSyncsFromTheCache: the work item is the Deployment as the cache
// holds it; one the cache no longer holds is no error and no API call.
func TestSyncsFromTheCache(t *testing.T) {
	d := deployment("v2.11.3")
	h := newHarness(t, inEffect(opted), d)
	cache := fake.NewMockCacheInterface[*appsv1.Deployment](gomock.NewController(t))
	h.deps.EXPECT().Cache().Return(cache).AnyTimes()
	cache.EXPECT().Get("cattle-system", "rancher").Return(d, nil)
	if err := h.c.syncKey(context.Background(), "cattle-system/rancher"); err != nil {
		t.Fatal(err)
	}
	if a := h.cs.Actions(); len(a) != 1 || a[0].GetVerb() != "patch" {
		t.Errorf("API calls %v, want one patch", a)
	}
	h.cs.ClearActions()
	cache.EXPECT().Get("cattle-system", "rancher").Return(nil, apierrors.NewNotFound(appsv1.Resource("deployments"), "rancher"))
	if err := h.c.syncKey(context.Background(), "cattle-system/rancher"); err != nil {
		t.Errorf("sync of a deleted Deployment: %v", err)
	}
	if a := h.cs.Actions(); len(a) != 0 {
		t.Errorf("%d API calls for a deleted Deployment: %v", len(a), a)
	}
}

// TestWaitsForItsWrite: a sync right after a write, from a cache that
// still holds the Deployment as it was before it (a triple change
// enqueued it meanwhile), makes no call; the next version is synced.
func TestWaitsForItsWrite(t *testing.T) {
	d := deployment("v2.11.3")
	d.ResourceVersion = "5"
	h := newHarness(t, inEffect(opted), d)
	if a := h.syncCalls(t, d); len(a) != 1 || a[0].GetVerb() != "patch" {
		t.Fatalf("first sync: %v, want one patch", a)
	}
	if a := h.syncCalls(t, d); len(a) != 0 {
		t.Errorf("sync from the cache before the write: %v, want no call", a)
	}
	after, err := h.cs.AppsV1().Deployments("cattle-system").Get(context.Background(), "rancher", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after.ResourceVersion = "6"
	if a := h.syncCalls(t, after); len(a) != 0 {
		t.Errorf("sync of the written version: %v, want no call", a)
	}
}

// syncCalls syncs d and returns the API calls it made.
func (h *harness) syncCalls(t *testing.T, d *appsv1.Deployment) []k8stesting.Action {
	t.Helper()
	h.cs.ClearActions()
	h.sync(t, d)
	return h.cs.Actions()
}
