// Package workloop is the one controller loop of leasetune's binary:
// informer event handlers put keys on a client-go rate-limited work queue,
// workers hand each key to the controller's sync; a failed sync is retried
// with the queue's backoff, a successful one forgets its failures. The
// work queue never gives one key to two workers at once, and a key added
// while it is being synced is synced once more afterwards.
//
// Every controller runs on it, whatever its informers are: wrangler's
// typed caches (lasso's shared informers) for the handful of Settings,
// Deployments and ConfigMaps, client-go informers of slim objects for the
// clusters (docs/design.md, "Controllers").
package workloop

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"leasetune.io/leasetune/pkg/metrics"
)

// Options configure New.
type Options struct {
	// Name names the queue and is the controller label of
	// metrics.QueueDepth and of the logs.
	Name string
	// RateLimiter paces the retries of failed syncs; DefaultRateLimiter()
	// when nil.
	RateLimiter workqueue.RateLimiter
	// Workers is the number of concurrent syncs (default 1).
	Workers int
	// Idle, when set, is called after a sync that leaves the queue empty.
	Idle func()
	// Log receives structured logs; slog.Default() when nil.
	Log *slog.Logger
}

// Queue is what a controller's sync and handlers enqueue with; a Loop is
// one, and unit tests give a controller a recording one.
type Queue[K comparable] interface {
	Add(K)
	AddAfter(K, time.Duration)
}

// Loop is a controller's work queue and workers. Its keys are of type K
// (a string "namespace/name", or a struct that also names the kind).
type Loop[K comparable] struct {
	opts  Options
	sync  func(context.Context, K) error
	queue workqueue.RateLimitingInterface
	log   *slog.Logger
}

var _ Queue[string] = (*Loop[string])(nil)

// MaxRetryDelay is the longest a failed key waits for its next try with
// DefaultRateLimiter. Nothing else may wake a controller at rest (a
// Deployment that does not change sees no event for hours), so a cause
// fixed (a webhook that refused the write, RBAC) is acted on within this.
const MaxRetryDelay = 30 * time.Second

// DefaultRateLimiter is client-go's DefaultControllerRateLimiter with its
// per-key backoff capped at MaxRetryDelay instead of 1000 s: 5 ms
// doubling per failure, and all retries together at 10 a second (bursts
// of 100). lasso, which ran three of these controllers before, doubles
// from 5 ms to 30 s too, then waits 2 minutes from the 30th failure on
// (github.com/rancher/lasso v0.0.0-20230629200414-8a54b32e6792
// pkg/controller/controller.go applyDefaultOptions).
func DefaultRateLimiter() workqueue.RateLimiter {
	return workqueue.NewMaxOfRateLimiter(
		workqueue.NewItemExponentialFailureRateLimiter(5*time.Millisecond, MaxRetryDelay),
		&workqueue.BucketRateLimiter{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// New returns a loop that syncs each key with sync; call Run to start it.
// Keys added before Run wait for it.
func New[K comparable](opts Options, sync func(context.Context, K) error) *Loop[K] {
	if opts.RateLimiter == nil {
		opts.RateLimiter = DefaultRateLimiter()
	}
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Loop[K]{opts: opts, sync: sync, log: opts.Log.With("controller", opts.Name),
		queue: workqueue.NewNamedRateLimitingQueue(opts.RateLimiter, opts.Name)}
}

// Add enqueues k.
func (l *Loop[K]) Add(k K) {
	l.queue.Add(k)
	l.publish()
}

// AddAfter enqueues k once d has passed.
func (l *Loop[K]) AddAfter(k K, d time.Duration) { l.queue.AddAfter(k, d) }

// Len is the number of keys waiting.
func (l *Loop[K]) Len() int { return l.queue.Len() }

// ShutDown stops a loop that will not Run; Run does it itself when it
// returns.
func (l *Loop[K]) ShutDown() { l.queue.ShutDown() }

// Handler is an informer event handler that enqueues the keys keysOf
// gives for an added, updated (the old and the new object) or deleted
// object (the last state known, for a delete the informer missed).
// keysOf returns none for an object the controller does not read.
func (l *Loop[K]) Handler(keysOf func(obj interface{}) []K) cache.ResourceEventHandler {
	add := func(obj interface{}) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		for _, k := range keysOf(obj) {
			l.Add(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(old, new interface{}) { add(old); add(new) },
		DeleteFunc: add,
	}
}

// Run waits for the caches (synced), then runs the workers until ctx
// ends; it returns once they have stopped, with an error when the caches
// did not sync before ctx ended.
func (l *Loop[K]) Run(ctx context.Context, synced ...cache.InformerSynced) error {
	defer l.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("%s: caches did not sync", l.opts.Name)
	}
	var wg sync.WaitGroup
	for i := 0; i < l.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, l.worker, time.Second)
		}()
	}
	<-ctx.Done()
	l.queue.ShutDown()
	wg.Wait()
	return nil
}

// Start runs the loop (Run) in a goroutine until ctx ends, logging why it
// stopped when that was not ctx's end: for a controller's Register, which
// returns before its informers' factory starts.
func (l *Loop[K]) Start(ctx context.Context, synced ...cache.InformerSynced) {
	go func() {
		if err := l.Run(ctx, synced...); err != nil && ctx.Err() == nil {
			l.log.Error("stopped", "error", err)
		}
	}()
}

// worker syncs keys until the queue shuts down.
func (l *Loop[K]) worker(ctx context.Context) {
	for l.next(ctx) {
	}
}

// next syncs one key; false once the queue has shut down.
func (l *Loop[K]) next(ctx context.Context) bool {
	item, quit := l.queue.Get()
	if quit {
		return false
	}
	err := l.sync(ctx, item.(K))
	switch {
	case err == nil:
		l.queue.Forget(item)
	case ctx.Err() != nil: // stopping: the next leader syncs it
	default:
		l.log.Error("sync failed; retrying", "key", item, "error", err)
		l.queue.AddRateLimited(item)
	}
	// Done before the depth: a key added again during its sync is queued
	// by Done.
	l.queue.Done(item)
	if l.publish() == 0 && l.opts.Idle != nil {
		l.opts.Idle()
	}
	return true
}

// publish sets metrics.QueueDepth and returns the depth.
func (l *Loop[K]) publish() int {
	depth := l.queue.Len()
	metrics.QueueDepth.WithLabelValues(l.opts.Name).Set(float64(depth))
	return depth
}

// Written remembers, per key, the resourceVersion of the object a
// controller's write was computed from, until its cache shows another
// one. A sync that reads that version again reads a cache that has not
// caught up with the write yet: deciding from it would make the same
// write again (refused by a JSON patch's test, or repeated). It waits
// instead: the informer's update event for the write enqueues the key
// again. (client-go's controllers keep "expectations" for the same
// reason.) The zero value is ready to use.
type Written[K comparable] struct {
	mu   sync.Mutex
	from map[K]string
}

// Wrote records a write of key k computed from resourceVersion rv
// (empty: unknown, nothing recorded).
func (w *Written[K]) Wrote(k K, rv string) {
	if rv == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.from == nil {
		w.from = map[K]string{}
	}
	w.from[k] = rv
}

// Stale reports whether rv, the resourceVersion the cache holds for k, is
// the one the last write of k was computed from; another version (or
// none) forgets that write.
func (w *Written[K]) Stale(k K, rv string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	from, ok := w.from[k]
	if ok && rv != "" && from == rv {
		return true
	}
	delete(w.from, k)
	return false
}
