package framework

import (
	"testing"
	"time"
)

// The waits for "nothing more happens".
const (
	// QuietWindow is how long Recorder.Settle waits with no new write.
	QuietWindow = time.Second
	// QuietDeadline is how long Recorder.Settle waits at most: a
	// controller still writing after a minute is in a loop.
	QuietDeadline = time.Minute
	// ConsistentlyMin is the shortest window Consistently accepts: a
	// claim that something does not happen, checked for less, misses
	// what comes a few seconds later (a resync, a requeue after a
	// backoff, a second write of a fight).
	ConsistentlyMin = 3 * time.Second
	// pollInterval is how often the waits look.
	pollInterval = 50 * time.Millisecond
)

// WaitQuiet polls state every 50ms until it has returned the same value,
// with ok true, throughout window, and returns that value. It fails t when
// that has not happened within deadline, with what report says of the
// last window (report gets the time the window began): something that
// keeps changing is a loop, and a test waiting for it to end would
// otherwise hang until go test's own timeout. Call it on the test's
// goroutine (it may end the test).
func WaitQuiet[S comparable](t testing.TB, what string, window, deadline time.Duration,
	state func() (s S, ok bool), report func(since time.Time) string) S {
	t.Helper()
	began := time.Now()
	last, ok := state()
	since := began
	for {
		time.Sleep(pollInterval)
		now := time.Now()
		s, okNow := state()
		if s != last || !okNow || !ok {
			last, ok, since = s, okNow, now
		} else if now.Sub(since) >= window {
			return s
		}
		if now.Sub(began) > deadline {
			t.Fatalf("%s: not within %s (the last value %v, ready %v); in the last %s:%s",
				what, deadline, last, ok, window, report(now.Add(-window)))
		}
	}
}

// Consistently checks cond every 50ms for d from now, the last time at d,
// and reports with t.Errorf the first time it does not hold; it returns
// whether cond held throughout. It may run on another goroutine than the
// test's. It is the form of every claim that something does not
// happen ("writes nothing"); a d under ConsistentlyMin fails the test.
func Consistently(t testing.TB, what string, d time.Duration, cond func() bool) bool {
	t.Helper()
	if d < ConsistentlyMin {
		t.Fatalf("%s: Consistently for %s, less than ConsistentlyMin %s", what, d, ConsistentlyMin)
	}
	began := time.Now()
	end := began.Add(d)
	for {
		if !cond() {
			t.Errorf("%s: did not hold after %s", what, time.Since(began).Round(time.Millisecond))
			return false
		}
		left := time.Until(end)
		if left <= 0 {
			return true
		}
		time.Sleep(min(pollInterval, left))
	}
}
