package election_test

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/tests/integration/framework"
)

// short is a validated triple short enough for a test: 4s/2s/1s.
var short = election.Timings{LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}

// candidate is one client-go leader elector on a Lease lock, with its own
// client, whose requests counter records.
type candidate struct {
	id      string
	counter *framework.Recorder
	elector *leaderelection.LeaderElector
	leading chan struct{}
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

func newCandidate(t *testing.T, ns, id string, tm election.Timings) *candidate {
	t.Helper()
	if err := tm.Validate(); err != nil {
		t.Fatalf("test timings: %v", err)
	}
	c := &candidate{id: id, leading: make(chan struct{})}
	cfg := rest.CopyConfig(cp.Config)
	c.counter = framework.Record(cfg, framework.WithReads())
	cs := kubernetes.NewForConfigOrDie(cfg)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: "test-lock"},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: tm.LeaseDuration,
		RenewDeadline: tm.RenewDeadline,
		RetryPeriod:   tm.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(c.leading) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatalf("NewLeaderElector refused a triple Validate accepted: %v", err)
	}
	c.elector = le
	return c
}

func (c *candidate) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done.Add(1)
	go func() { defer c.done.Done(); c.elector.Run(ctx) }()
}

// kill stops the candidate without releasing the lock, as a crash would.
func (c *candidate) kill() { c.cancel(); c.done.Wait() }

func waitClosed(t *testing.T, ch <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("%s: not within %s", what, within)
	}
}

// TestLeaseRecord checks that the Lease client-go writes holds the whole
// seconds of the validated leaseDuration and the leader's identity, and
// that the leader renews about once per retry period.
func TestLeaseRecord(t *testing.T) {
	ns := cp.Namespace(t)
	a := newCandidate(t, ns, "a", short)
	a.start()
	defer a.kill()
	waitClosed(t, a.leading, 10*time.Second, "candidate a leads")

	lease, err := cp.Client.CoordinationV1().Leases(ns).Get(context.Background(), "test-lock", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *lease.Spec.LeaseDurationSeconds; got != int32(short.LeaseDuration/time.Second) {
		t.Errorf("leaseDurationSeconds = %d, want %d", got, short.LeaseDuration/time.Second)
	}
	if got := *lease.Spec.HolderIdentity; got != "a" {
		t.Errorf("holderIdentity = %q, want a", got)
	}

	// Count renewals (changes of renewTime) seen by a watch over a window.
	const window = 10 * time.Second
	w, err := cp.Client.CoordinationV1().Leases(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", "test-lock").String(), ResourceVersion: lease.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	renewals := 0
	deadline := time.After(window)
loop:
	for {
		select {
		case ev := <-w.ResultChan():
			if l, ok := ev.Object.(*coordinationv1.Lease); ok && ev.Type == watch.Modified && *l.Spec.HolderIdentity == "a" {
				renewals++
			}
		case <-deadline:
			break loop
		}
	}
	// One renewal per retry period plus request latency: at most one per
	// period in the window (plus one for a renewal on its edge), and well
	// above half of that on a loaded 2-core machine.
	if max, min := int(window/short.RetryPeriod)+1, int(window/short.RetryPeriod)/2; renewals < min || renewals > max {
		t.Errorf("%d renewals in %s with retryPeriod %s, want %d..%d", renewals, window, short.RetryPeriod, min, max)
	}
}

// TestRequestRatesMatchCostModel runs a leader and a follower and compares
// the requests each sends with election.CostOf for client-go v0.28
// (LeaderGetsAndUpdates), with generous bounds.
func TestRequestRatesMatchCostModel(t *testing.T) {
	ns := cp.Namespace(t)
	a := newCandidate(t, ns, "a", short)
	a.start()
	defer a.kill()
	waitClosed(t, a.leading, 10*time.Second, "candidate a leads")
	b := newCandidate(t, ns, "b", short)
	b.start()
	defer b.kill()
	time.Sleep(2 * time.Second) // let b settle into following

	const window = 15 * time.Second
	aGets, aWrites := a.counter.Reads(), a.counter.Writes()
	bGets, bWrites := b.counter.Reads(), b.counter.Writes()
	time.Sleep(window)
	aGets, aWrites = a.counter.Reads()-aGets, a.counter.Writes()-aWrites
	bGets, bWrites = b.counter.Reads()-bGets, b.counter.Writes()-bWrites

	cost := election.CostOf(short, 1, election.LeaderGetsAndUpdates)
	perWindow := float64(window) / float64(time.Hour)
	wantLeader := cost.LeaderRequestsPerHour * perWindow     // 30
	wantFollower := cost.FollowerRequestsPerHour * perWindow // 9.4
	t.Logf("leader: %d gets + %d writes (model %.1f); follower: %d gets + %d writes (model %.1f)",
		aGets, aWrites, wantLeader, bGets, bWrites, wantFollower)

	if got := float64(aGets + aWrites); got < 0.6*wantLeader || got > 1.1*wantLeader+2 {
		t.Errorf("leader sent %.0f requests in %s, model %.1f", got, window, wantLeader)
	}
	if aGets == 0 || aWrites == 0 || aGets-aWrites > 2 || aWrites-aGets > 2 {
		t.Errorf("leader: %d gets and %d writes, want one get per update (client-go v0.28)", aGets, aWrites)
	}
	// A follower waits 1×..2.2× the retry period: between 15/2.2 and 15
	// polls in the window; the model's mean is 15/1.6.
	if got := float64(bGets); got < float64(window)/float64(short.RetryPeriod)/election.MaxFollowerWaitFactor-2 || got > float64(window/short.RetryPeriod)+1 {
		t.Errorf("follower sent %.0f gets in %s, model %.1f", got, window, wantFollower)
	}
	if bWrites != 0 {
		t.Errorf("follower sent %d writes while the leader held the lease", bWrites)
	}
	select {
	case <-b.leading:
		t.Error("follower became leader while the leader was alive")
	default:
	}
}

// TestFailoverWithinWorstCase kills the leader without releasing the lock
// and checks that the follower takes over no sooner than the lease allows
// and no later than election.CostOf's worst case (plus slack for latency).
func TestFailoverWithinWorstCase(t *testing.T) {
	ns := cp.Namespace(t)
	a := newCandidate(t, ns, "a", short)
	a.start()
	waitClosed(t, a.leading, 10*time.Second, "candidate a leads")
	b := newCandidate(t, ns, "b", short)
	b.start()
	defer b.kill()
	time.Sleep(3 * time.Second)

	a.kill()
	killed := time.Now()
	worst := election.CostOf(short, 1, election.LeaderGetsAndUpdates).WorstCaseFailover
	waitClosed(t, b.leading, worst+3*time.Second, "follower takes over")
	took := time.Since(killed)
	t.Logf("failover took %s (worst case %s)", took.Round(time.Millisecond), worst)
	if min := short.LeaseDuration - short.RetryPeriod - 500*time.Millisecond; took < min {
		t.Errorf("failover took %s, less than the lease allows (%s)", took, min)
	}
}
