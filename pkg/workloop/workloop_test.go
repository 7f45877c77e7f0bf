package workloop

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"leasetune.io/leasetune/pkg/metrics"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// run starts l and returns a stop that waits for Run to return.
func run(t *testing.T, l *Loop[string], synced ...cache.InformerSynced) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, synced...) }()
	return func() error { cancel(); return <-done }
}

// TestRetriesUntilSynced: a failing sync is retried with the rate
// limiter's backoff until it succeeds; then the key is forgotten and
// the loop goes idle.
func TestRetriesUntilSynced(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	idle := make(chan struct{}, 10)
	l := New(Options{Name: "test", Log: quiet, Idle: func() { idle <- struct{}{} },
		RateLimiter: workqueue.NewItemExponentialFailureRateLimiter(time.Millisecond, 10*time.Millisecond)},
		func(_ context.Context, k string) error {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls < 3 {
				return errors.New("refused")
			}
			return nil
		})
	l.Add("a")
	stop := run(t, l)
	defer stop() //nolint:errcheck // checked below on the happy path
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-idle:
		case <-deadline:
			t.Fatalf("not idle after retries")
		}
		mu.Lock()
		n := calls
		mu.Unlock()
		if n == 3 {
			break
		}
	}
	if got := l.queue.NumRequeues("a"); got != 0 {
		t.Errorf("requeues after success = %d, want 0 (forgotten)", got)
	}
}

// TestAddedDuringSyncIsSyncedAgain: a key added while it syncs is synced
// once more after, never by two workers at once.
func TestAddedDuringSyncIsSyncedAgain(t *testing.T) {
	var l *Loop[string]
	var mu sync.Mutex
	calls, running, overlap := 0, 0, false
	second := make(chan struct{})
	l = New(Options{Name: "test", Log: quiet, Workers: 4}, func(_ context.Context, k string) error {
		mu.Lock()
		calls++
		n := calls
		running++
		overlap = overlap || running > 1
		mu.Unlock()
		if n == 1 {
			l.Add("a")
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		running--
		mu.Unlock()
		if n == 2 {
			close(second)
		}
		return nil
	})
	l.Add("a")
	stop := run(t, l)
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the key added during its sync was not synced again")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if overlap {
		t.Error("two workers synced one key at once")
	}
}

// TestRunNeedsTheCaches: Run syncs nothing before the caches have
// synced, and says so when they never do.
func TestRunNeedsTheCaches(t *testing.T) {
	l := New(Options{Name: "test", Log: quiet}, func(context.Context, string) error {
		t.Error("synced before the caches")
		return nil
	})
	l.Add("a")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := l.Run(ctx, func() bool { return false }); err == nil {
		t.Error("Run = nil with caches that never sync")
	}
}

// TestHandlerKeys: the handler enqueues the keys of the old and the new
// object of an update, and of a tombstone's last known state; none for
// an object keysOf leaves out.
func TestHandlerKeys(t *testing.T) {
	l := New(Options{Name: "test", Log: quiet}, func(context.Context, string) error { return nil })
	defer l.ShutDown()
	keysOf := func(obj interface{}) []string {
		if s, ok := obj.(string); ok && s != "ignored" {
			return []string{s}
		}
		return nil
	}
	h := l.Handler(keysOf)
	h.OnAdd("a", false)
	h.OnUpdate("b", "c")
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "x", Obj: "d"})
	h.OnAdd("ignored", false)
	h.OnAdd(42, false)
	var got []string
	for l.Len() > 0 {
		item, _ := l.queue.Get()
		got = append(got, item.(string))
		l.queue.Done(item)
	}
	want := []string{"a", "b", "c", "d"}
	if len(got) != len(want) {
		t.Fatalf("keys = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("keys = %v, want %v", got, want)
		}
	}
}

// TestStopWaitsForWorkers: Run returns only after a running sync has
// returned.
func TestStopWaitsForWorkers(t *testing.T) {
	started := make(chan struct{})
	var finished bool
	var mu sync.Mutex
	l := New(Options{Name: "test", Log: quiet}, func(ctx context.Context, _ string) error {
		close(started)
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
		mu.Lock()
		finished = true
		mu.Unlock()
		return ctx.Err()
	})
	l.Add("a")
	stop := run(t, l)
	<-started
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !finished {
		t.Error("Run returned before its worker")
	}
}

// TestDefaultBackoffIsCapped: a key that keeps failing waits at most
// MaxRetryDelay for its next try (client-go's default grows to 1000 s).
func TestDefaultBackoffIsCapped(t *testing.T) {
	rl := DefaultRateLimiter()
	var d time.Duration
	for i := 0; i < 40; i++ {
		d = rl.When("a")
	}
	if d != MaxRetryDelay {
		t.Errorf("after 40 failures the next try waits %s, want %s", d, MaxRetryDelay)
	}
	if first := DefaultRateLimiter().When("b"); first > 10*time.Millisecond {
		t.Errorf("a first failure waits %s, want 5ms", first)
	}
}

// TestStoppingDropsTheFailure: a sync that fails because the loop is
// stopping is not retried (the next leader syncs it).
func TestStoppingDropsTheFailure(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := New(Options{Name: "test", Log: quiet}, func(context.Context, string) error {
		cancel()
		return errors.New("stopping")
	})
	defer l.ShutDown()
	l.Add("a")
	if !l.next(ctx) {
		t.Fatal("queue shut down")
	}
	if n := l.queue.NumRequeues("a"); n != 0 || l.Len() != 0 {
		t.Errorf("requeues %d, waiting %d after a failure while stopping; want none", n, l.Len())
	}
}

// TestIdleOnlyWhenEmpty: Idle is called after a sync that leaves nothing
// waiting; not after one during which its key was added again (it waits
// for the second sync).
func TestIdleOnlyWhenEmpty(t *testing.T) {
	var l *Loop[string]
	calls, idles := 0, 0
	l = New(Options{Name: "test", Log: quiet, Idle: func() { idles++ }}, func(context.Context, string) error {
		calls++
		if calls == 1 {
			l.Add("a")
		}
		return nil
	})
	defer l.ShutDown()
	l.Add("a")
	l.next(context.Background())
	if idles != 0 || l.Len() != 1 {
		t.Fatalf("after a sync whose key was added again: %d Idle calls, %d waiting; want 0 and 1", idles, l.Len())
	}
	l.next(context.Background())
	if idles != 1 || l.Len() != 0 {
		t.Errorf("after the second sync: %d Idle calls, %d waiting; want 1 and 0", idles, l.Len())
	}
}

// TestDepthIsPublished: leasetune_workqueue_depth{controller} follows
// what is added and what is synced.
func TestDepthIsPublished(t *testing.T) {
	l := New(Options{Name: "depth-test", Log: quiet}, func(context.Context, string) error { return nil })
	defer l.ShutDown()
	depth := func() float64 { return testutil.ToFloat64(metrics.QueueDepth.WithLabelValues("depth-test")) }
	l.Add("a")
	l.Add("b")
	if got := depth(); got != 2 {
		t.Errorf("depth after two adds: %v, want 2", got)
	}
	l.next(context.Background())
	if got := depth(); got != 1 {
		t.Errorf("depth after one sync: %v, want 1", got)
	}
}

// TestWritten: after a write computed from version 7, the cache's
// version 7 is stale and 8 is not; once 8 was seen, 7 is no longer
// remembered; an unknown version records nothing.
func TestWritten(t *testing.T) {
	var w Written[string]
	if w.Stale("a", "7") {
		t.Error("stale before any write")
	}
	w.Wrote("a", "7")
	for i := 0; i < 2; i++ { // stale until the cache moves on
		if !w.Stale("a", "7") {
			t.Errorf("check %d: the version written from is not stale", i)
		}
	}
	if w.Stale("b", "7") {
		t.Error("another key is stale")
	}
	if w.Stale("a", "8") {
		t.Error("the next version is stale")
	}
	if w.Stale("a", "7") {
		t.Error("still remembered after the cache moved on")
	}
	w.Wrote("a", "")
	if w.Stale("a", "") {
		t.Error("an unknown version is stale")
	}
}

// TestStartSyncsUntilTheEnd: Start runs the loop in the background: an
// added key is synced, and the loop stops with ctx.
func TestStartSyncsUntilTheEnd(t *testing.T) {
	synced := make(chan string, 1)
	l := New(Options{Name: "test", Log: quiet}, func(_ context.Context, k string) error { synced <- k; return nil })
	ctx, cancel := context.WithCancel(context.Background())
	l.Start(ctx)
	l.Add("a")
	select {
	case k := <-synced:
		if k != "a" {
			t.Errorf("synced %q, want a", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not synced")
	}
	cancel()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return l.queue.ShuttingDown(), nil
	}); err != nil {
		t.Error("the queue still runs after ctx ended")
	}
}
