package fakes

import (
	"fmt"
	"sync"
	"time"

	"leasetune.io/leasetune/pkg/workloop"
)

// Queue is a workloop.Queue that records what a controller enqueues, for
// exact-action tests.
type Queue[K comparable] struct {
	mu      sync.Mutex
	entries []Enqueued[K]
}

// Enqueued is one Add (After 0) or AddAfter.
type Enqueued[K comparable] struct {
	Key   K
	After time.Duration
}

func (e Enqueued[K]) String() string {
	if e.After == 0 {
		return fmt.Sprintf("add %v", e.Key)
	}
	return fmt.Sprintf("add %v after %s", e.Key, e.After)
}

var _ workloop.Queue[string] = (*Queue[string])(nil)

// Add implements workloop.Queue.
func (q *Queue[K]) Add(k K) { q.AddAfter(k, 0) }

// AddAfter implements workloop.Queue.
func (q *Queue[K]) AddAfter(k K, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.entries = append(q.entries, Enqueued[K]{k, d})
}

// Entries returns what was enqueued, in order, and forgets it.
func (q *Queue[K]) Entries() []Enqueued[K] {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.entries
	q.entries = nil
	return out
}

// Added returns what was enqueued, in order, as "add K" or "add K after
// D", and forgets it.
func (q *Queue[K]) Added() []string {
	var out []string
	for _, e := range q.Entries() {
		out = append(out, e.String())
	}
	return out
}
