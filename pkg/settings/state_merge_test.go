package settings

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/ownstate/ownstatetest"
)

func triple(t *testing.T, ld, rd, rp time.Duration) election.Timings {
	t.Helper()
	tm := election.Timings{LeaseDuration: ld, RenewDeadline: rd, RetryPeriod: rp}
	if err := tm.Validate(); err != nil {
		t.Fatalf("test triple %s: %v", tm, err)
	}
	return tm
}

func TestMergeState(t *testing.T) {
	t1 := election.FleetDefaults
	t2 := triple(t, 60*time.Second, 40*time.Second, 15*time.Second)
	t3 := triple(t, 90*time.Second, 60*time.Second, 20*time.Second)
	s0, s1, s2 := Registry[0].Name, Registry[1].Name, Registry[2].Name
	base := State{
		Values:    map[string]string{s0: "", s1: ""},
		Effective: map[Component]election.Timings{FleetController: t1, FleetAgent: t1},
	}
	// This writer sets s0 and s2 and the fleet-agent triple; another one
	// set s0, s1 and the fleet-controller triple meanwhile.
	next := base.clone()
	next.Values[s0], next.Values[s2] = "60s", "10s"
	next.Effective[FleetAgent] = t2
	other := base.clone()
	other.Values[s0], other.Values[s1] = "90s", "40s"
	other.Effective[FleetController] = t3
	data, err := other.encode()
	if err != nil {
		t.Fatal(err)
	}

	got := mergeState(base, next, data)
	want := State{
		Values:    map[string]string{s0: "90s", s1: "40s", s2: "10s"}, // s0: both changed it, the stored value stays
		Effective: map[Component]election.Timings{FleetController: t3, FleetAgent: t2},
	}
	if !got.equal(want) {
		t.Errorf("merge over another writer's state:\n got %+v\nwant %+v", got, want)
	}

	// Nothing stored meanwhile: this writer's state.
	bdata, _ := base.encode()
	if got := mergeState(base, next, bdata); !got.equal(next) {
		t.Errorf("merge over base = %+v, want next %+v", got, next)
	}
	// No ConfigMap: nothing to preserve.
	if got := mergeState(base, next, nil); !got.equal(next) {
		t.Errorf("merge over none = %+v, want next %+v", got, next)
	}
	// An unreadable key has nothing to preserve; the readable one is merged.
	broken := map[string]string{stateKeyValues: "{not json", stateKeyEffective: data[stateKeyEffective]}
	got = mergeState(base, next, broken)
	want = State{Values: next.Values, Effective: map[Component]election.Timings{FleetController: t3, FleetAgent: t2}}
	if !got.equal(want) {
		t.Errorf("merge over an unreadable values key:\n got %+v\nwant %+v", got, want)
	}
}

func newStateProvider(t *testing.T, cs *fake.Clientset) *Provider {
	t.Helper()
	p := NewProvider(ProviderOptions{
		ConfigMaps: cs.CoreV1(), Namespace: "leasetune-system",
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err := p.loadState(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

// An outgoing leader (A) and the new one (B) both loaded the state; B
// persists while A is between its read and its write. A's write must not
// revert what B stored: B's entries survive, A's own changes are added
// except where B changed the same entry.
func TestPersistInterleavedWriters(t *testing.T) {
	ctx := context.Background()
	t1 := election.FleetDefaults
	t2 := triple(t, 60*time.Second, 40*time.Second, 15*time.Second)
	t3 := triple(t, 90*time.Second, 60*time.Second, 20*time.Second)
	t4 := triple(t, 120*time.Second, 90*time.Second, 30*time.Second)
	s0, s1, s3 := Registry[0].Name, Registry[1].Name, Registry[3].Name
	seedState := State{
		Values:    map[string]string{s0: "", s1: "", s3: ""},
		Effective: map[Component]election.Timings{FleetController: t1, FleetAgent: t1},
	}
	data, err := seedState.encode()
	if err != nil {
		t.Fatal(err)
	}
	tracker := ownstatetest.NewTracker()
	if err := tracker.Add(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "leasetune-system", Name: DefaultStateName, ResourceVersion: "1"}, Data: data,
	}); err != nil {
		t.Fatal(err)
	}
	csA, csB := ownstatetest.NewWriter(tracker), ownstatetest.NewWriter(tracker)
	a, b := newStateProvider(t, csA), newStateProvider(t, csB)

	nextB := b.state.clone()
	nextB.Values[s0] = "60s"
	nextB.Effective[FleetAgent] = t2
	nextB.Effective[FleetController] = t4
	nextA := a.state.clone()
	nextA.Values[s1] = "40s"
	nextA.Effective[FleetController] = t3

	var storedB State
	var errB error
	ownstatetest.Before(csA, "update", func() { storedB, errB = b.persist(ctx, nextB) })
	storedA, err := a.persist(ctx, nextA)
	if err != nil || errB != nil {
		t.Fatalf("persist: A %v, B %v", err, errB)
	}
	if !storedB.equal(nextB) {
		t.Errorf("B stored %+v, want its own state %+v", storedB, nextB)
	}
	want := State{
		Values:    map[string]string{s0: "60s", s1: "40s", s3: ""},
		Effective: map[Component]election.Timings{FleetController: t4, FleetAgent: t2},
	}
	if !storedA.equal(want) {
		t.Errorf("A stored %+v\nwant %+v", storedA, want)
	}
	obj, err := tracker.Get(ownstatetest.GVR, "leasetune-system", DefaultStateName)
	if err != nil {
		t.Fatal(err)
	}
	onServer, derr := decodeState(obj.(*corev1.ConfigMap).Data)
	if derr != nil || !onServer.equal(want) {
		t.Errorf("on the server %+v (%v)\nwant %+v", onServer, derr, want)
	}
	if a.stateCM.ResourceVersion != obj.(*corev1.ConfigMap).ResourceVersion {
		t.Errorf("A remembers resourceVersion %s, the server has %s", a.stateCM.ResourceVersion, obj.(*corev1.ConfigMap).ResourceVersion)
	}
	if n := ownstatetest.Count(csA, "update"); n != 2 {
		t.Errorf("A updated %d times, want 2 (a conflict, then the merge)", n)
	}
}

// Once the other writer has stored the very entries this one would, the
// merge changes nothing and nothing more is written.
func TestPersistNothingLeftToWrite(t *testing.T) {
	ctx := context.Background()
	tracker := ownstatetest.NewTracker()
	csA, csB := ownstatetest.NewWriter(tracker), ownstatetest.NewWriter(tracker)
	a, b := newStateProvider(t, csA), newStateProvider(t, csB) // no ConfigMap yet
	next := State{Values: map[string]string{Registry[0].Name: "60s"}, Effective: map[Component]election.Timings{FleetAgent: election.FleetDefaults}}
	ownstatetest.Before(csA, "create", func() {
		if _, err := b.persist(ctx, next); err != nil {
			t.Error(err)
		}
	})
	stored, err := a.persist(ctx, next)
	if err != nil || !stored.equal(next) {
		t.Fatalf("persist = %+v, %v", stored, err)
	}
	if n := ownstatetest.Count(csA, "update"); n != 0 {
		t.Errorf("A updated %d times, want none", n)
	}
}
