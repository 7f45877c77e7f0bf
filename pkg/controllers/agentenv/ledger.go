package agentenv

import (
	"sync"
	"time"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/metrics"
)

// ledger is what the controller remembers of each fleet Cluster between
// syncs, by the fleet Cluster's key: the problem it is left alone for (and
// the ClustersLeftAlone gauge that counts them), the last problem message
// and ignored-override note reported (each is reported once), when the
// revert guard found the project's entries removed, and the objects the
// guard stopped writing. Safe for concurrent use; the report step is its
// only writer.
type ledger struct {
	mu       sync.Mutex
	problems map[string]agentenv.Problem // why the cluster is left alone
	reported map[string]string           // the last problem message reported
	ignored  map[string]string           // the ignored overrides last reported
	reverts  map[string][]time.Time      // when its entries were found removed
	fenced   map[string]string           // fingerprint of the object the guard stopped writing
}

func newLedger() *ledger {
	for _, p := range []agentenv.Problem{agentenv.ProblemInvalid, agentenv.ProblemForeign, agentenv.ProblemUnsupported, agentenv.ProblemReverted} {
		metrics.ClustersLeftAlone.WithLabelValues(string(p)).Add(0) // present from the start
	}
	return &ledger{problems: map[string]agentenv.Problem{}, reported: map[string]string{}, ignored: map[string]string{},
		reverts: map[string][]time.Time{}, fenced: map[string]string{}}
}

// setProblem records (p != "") or clears a cluster's problem and keeps the
// gauge in step.
func (l *ledger) setProblem(key string, p agentenv.Problem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setProblemLocked(key, p)
}

func (l *ledger) setProblemLocked(key string, p agentenv.Problem) {
	old, had := l.problems[key]
	if had && old == p {
		return
	}
	if had {
		metrics.ClustersLeftAlone.WithLabelValues(string(old)).Dec()
	}
	if p == "" {
		delete(l.problems, key)
		return
	}
	l.problems[key] = p
	metrics.ClustersLeftAlone.WithLabelValues(string(p)).Inc()
}

// problem records a cluster's problem and its message (p == "": none) and
// reports whether the message is new, i.e. is to be said (logged and an
// Event): each distinct message is said once.
func (l *ledger) problem(key string, p agentenv.Problem, msg string) (isNew bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setProblemLocked(key, p)
	if p == "" {
		delete(l.reported, key)
		return false
	}
	isNew = l.reported[key] != msg
	l.reported[key] = msg
	return isNew
}

// ignoredOnce records the ignored overrides id of a cluster and reports
// whether they differ from the last ones reported.
func (l *ledger) ignoredOnce(key, id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	isNew := l.ignored[key] != id
	l.ignored[key] = id
	return isNew
}

// revertsWithin is the number of reverts of a cluster's object counted
// within RevertWindow before now.
func (l *ledger) revertsWithin(key string, now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.reverts[key] {
		if now.Sub(at) < RevertWindow {
			n++
		}
	}
	return n
}

// addRevert counts a revert at now, dropping those outside the window.
func (l *ledger) addRevert(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kept := l.reverts[key][:0]
	for _, at := range l.reverts[key] {
		if now.Sub(at) < RevertWindow {
			kept = append(kept, at)
		}
	}
	l.reverts[key] = append(kept, now)
}

// fence records that the guard stopped writing the object whose
// fingerprint is fp, with the message it reported.
func (l *ledger) fence(key, fp, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fenced[key] = fp
	l.setProblemLocked(key, agentenv.ProblemReverted)
	l.reported[key] = msg
}

// fencedMessage returns the message of a fenced cluster whose object has
// not changed otherwise since (fingerprint fp), and true; once the object
// has changed, the guard forgets the fence and the reverts (the object is
// written again), and it returns false.
func (l *ledger) fencedMessage(key, fp string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	was, ok := l.fenced[key]
	if !ok {
		return "", false
	}
	if was == fp {
		return l.reported[key], true
	}
	delete(l.fenced, key)
	delete(l.reverts, key)
	return "", false
}

// forget drops what is remembered of a deleted cluster.
func (l *ledger) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.setProblemLocked(key, "")
	delete(l.reported, key)
	delete(l.reverts, key)
	delete(l.fenced, key)
	delete(l.ignored, key)
}

// leftAlone counts the clusters with a problem.
func (l *ledger) leftAlone() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.problems)
}

// snapshot copies the problems.
func (l *ledger) snapshot() map[string]agentenv.Problem {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]agentenv.Problem, len(l.problems))
	for k, v := range l.problems {
		out[k] = v
	}
	return out
}

// clearProblems takes this controller's problems out of the gauge (a
// later controller, after a lost and regained lease, starts from none).
func (l *ledger) clearProblems() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key := range l.problems {
		l.setProblemLocked(key, "")
	}
}
