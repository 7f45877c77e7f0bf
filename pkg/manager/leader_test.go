package manager

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/metrics"
)

func leadConfig(t *testing.T) Config {
	t.Helper()
	timings := election.Timings{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}
	if err := timings.Validate(); err != nil {
		t.Fatal(err)
	}
	return Config{Namespace: "leasetune-system", LeaseName: "leasetune", Identity: "replica-a", Timings: timings}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// holderOf returns the Lease's holder ("" when released or absent).
func holderOf(t *testing.T, cs *fake.Clientset) string {
	t.Helper()
	l, err := cs.CoordinationV1().Leases("leasetune-system").Get(context.Background(), "leasetune", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestLeadStopsComponentsBeforeRelease: when ctx ends, the components stop
// while the Lease is still held, and the Lease is released after; lead
// returns nil.
func TestLeadStopsComponentsBeforeRelease(t *testing.T) {
	cs := fake.NewSimpleClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ready atomic.Bool
	started := make(chan struct{})
	var holderAtStop atomic.Value
	components := func(cctx context.Context) error {
		close(started)
		<-cctx.Done()
		time.Sleep(300 * time.Millisecond) // stopping takes a while: a write finishing
		holderAtStop.Store(holderOf(t, cs))
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- lead(ctx, cs, leadConfig(t), quiet, &ready, components) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the components did not start")
	}
	if !ready.Load() || holderOf(t, cs) != "replica-a" {
		t.Fatalf("leading: ready %v, holder %q", ready.Load(), holderOf(t, cs))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("lead: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lead did not return after ctx ended")
	}
	if got := holderAtStop.Load(); got != "replica-a" {
		t.Errorf("the Lease's holder while the components stopped: %q, want replica-a (released before they stopped)", got)
	}
	if h := holderOf(t, cs); h != "" {
		t.Errorf("the Lease is still held by %q after lead returned", h)
	}
}

// TestLeadComponentsFail: an error of the components while leading ends
// lead with that error.
func TestLeadComponentsFail(t *testing.T) {
	boom := errors.New("boom")
	done := make(chan error, 1)
	var ready atomic.Bool
	go func() {
		done <- lead(context.Background(), fake.NewSimpleClientset(), leadConfig(t), quiet, &ready, func(context.Context) error { return boom })
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Errorf("lead: %v, want boom", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lead did not return after the components failed")
	}
}

// TestLeadRefusesInvalidTimings: an invalid own triple is an error before
// anything runs.
func TestLeadRefusesInvalidTimings(t *testing.T) {
	cfg := leadConfig(t)
	cfg.Timings.RenewDeadline = cfg.Timings.LeaseDuration
	var ready atomic.Bool
	err := lead(context.Background(), fake.NewSimpleClientset(), cfg, quiet, &ready, func(context.Context) error {
		t.Error("the components ran")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "own leader election") || ready.Load() {
		t.Errorf("lead: %v, ready %v", err, ready.Load())
	}
}

// TestLeaderGauge: leasetune_leader is 0 on a replica that follows (another
// holds the Lease), 1 while the components run on the leader, and 0 again
// once they have stopped.
func TestLeaderGauge(t *testing.T) {
	leader := func() float64 { return testutil.ToFloat64(metrics.Leader) }
	cs := fake.NewSimpleClientset()
	// Another replica holds the Lease, renewed now for an hour.
	other, hour, now := "replica-b", int32(3600), metav1.NewMicroTime(time.Now())
	if _, err := cs.CoordinationV1().Leases("leasetune-system").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "leasetune-system", Name: "leasetune"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &other, LeaseDurationSeconds: &hour, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	metrics.Leader.Set(1) // whatever came before: lead starts as a follower
	ctx, cancel := context.WithCancel(context.Background())
	var ready atomic.Bool
	inside := make(chan float64, 1)
	done := make(chan error, 1)
	go func() {
		done <- lead(ctx, cs, leadConfig(t), quiet, &ready, func(cctx context.Context) error {
			inside <- leader()
			<-cctx.Done()
			return nil
		})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !ready.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // a retry period and more: still following
	if got := leader(); got != 0 {
		t.Errorf("following: leasetune_leader %v, want 0", got)
	}
	// The other replica releases the Lease: this one takes it.
	if err := cs.CoordinationV1().Leases("leasetune-system").Delete(context.Background(), "leasetune", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-inside:
		if got != 1 {
			t.Errorf("leading: leasetune_leader %v, want 1", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the components did not start")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("lead: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lead did not return after ctx ended")
	}
	if got := leader(); got != 0 {
		t.Errorf("stopped: leasetune_leader %v, want 0", got)
	}
}
