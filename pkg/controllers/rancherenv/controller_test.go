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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
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
	events *record.FakeRecorder
}

// newHarness is the controller with a fake clientset holding objs, a
// mocked Deployment controller (any EnqueueAfter not expected by the test
// fails it) and a recorder of its Events.
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
		events: record.NewFakeRecorder(10)}
	h.c = &Controller{opts: Options{Namespace: "cattle-system", Name: "rancher", Deployments: h.deps, Client: cs, Triples: tr,
		Recorder: h.events}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return h
}

func (h *harness) sync(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	if err := h.c.sync(context.Background(), d); err != nil {
		t.Fatalf("sync: %v", err)
	}
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
	h.deps.EXPECT().EnqueueAfter("cattle-system", "rancher", providerWait).Times(1)
	h.sync(t, d)
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
	h.deps.EXPECT().EnqueueAfter("cattle-system", "rancher", gomock.Any()).Do(func(_, _ string, wait time.Duration) {
		if wait < 59*time.Second || wait > time.Minute+pendingRecheck {
			t.Errorf("looked at again after %s, want just after the settle time (1m)", wait)
		}
	}).Times(1)
	h.sync(t, d)
	if a := h.cs.Actions(); len(a) != 0 {
		t.Errorf("%d API calls: %v", len(a), a)
	}
	if e := h.said(); len(e) != 1 || !strings.HasPrefix(e[0], corev1.EventTypeNormal+" "+ReasonDeferred+" ") {
		t.Errorf("Events: %q", e)
	}
}
