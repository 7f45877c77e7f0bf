package agentenv

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/metrics"
)

func propagationGauges() (pending, deadline float64) {
	return testutil.ToFloat64(metrics.PropagationPending.WithLabelValues(controllerName)),
		testutil.ToFloat64(metrics.PropagationDeadline.WithLabelValues(controllerName))
}

// TestPropagationGaugesPaced: at 60 clusters a minute, a change over three
// clusters should be done 3 s after it began; a change that replaces it
// keeps its start and owes the clusters of both; the gauges count down as
// clusters settle and are 0 once the last one has.
func TestPropagationGaugesPaced(t *testing.T) {
	p := newPropagation(60)
	if pend, dl := propagationGauges(); pend != 0 || dl != 0 {
		t.Fatalf("at start: pending %v, deadline %v, want 0 and 0", pend, dl)
	}
	t0 := time.Unix(1_800_000_000, 0)
	other := election.Timings{LeaseDuration: 60 * time.Second, RenewDeadline: 40 * time.Second, RetryPeriod: 15 * time.Second}
	p.beginFirstPass(election.FleetDefaults, true, t0, []string{"ns/a", "ns/b", "ns/c"})
	if pend, dl := propagationGauges(); pend != 3 || dl != 1_800_000_003 {
		t.Errorf("first pass over 3 clusters: pending %v, deadline %v, want 3 and 1800000003", pend, dl)
	}
	if g := p.settle("ns/a", p.syncSeq()); g != nil {
		t.Fatal("the change ended with clusters still owed")
	}
	if pend, dl := propagationGauges(); pend != 2 || dl != 1_800_000_003 {
		t.Errorf("after one cluster: pending %v, deadline %v, want 2 and 1800000003", pend, dl)
	}
	// A change 10 s later, with a fourth cluster: b and c still owed, and d.
	if !p.tripleChanged(other, true, t0.Add(10*time.Second), func() []string { return []string{"ns/a", "ns/b", "ns/c", "ns/d"} }) {
		t.Fatal("the change was not seen")
	}
	if pend, dl := propagationGauges(); pend != 4 || dl != 1_800_000_004 {
		t.Errorf("after a replacing change: pending %v, deadline %v, want 4 and 1800000004 (the first start, 4 clusters)", pend, dl)
	}
	seq := p.syncSeq()
	for _, k := range []string{"ns/a", "ns/b", "ns/c"} {
		p.settle(k, seq)
	}
	if pend, _ := propagationGauges(); pend != 1 {
		t.Errorf("one cluster left: pending %v, want 1", pend)
	}
	if g := p.settle("ns/d", seq); g == nil {
		t.Fatal("the change did not end with its last cluster")
	}
	if pend, dl := propagationGauges(); pend != 0 || dl != 0 {
		t.Errorf("done: pending %v, deadline %v, want 0 and 0", pend, dl)
	}
}

// TestPropagationGaugesUnpaced: unpaced, the deadline is the change's start.
func TestPropagationGaugesUnpaced(t *testing.T) {
	p := newPropagation(0)
	p.beginFirstPass(election.FleetDefaults, true, time.Unix(1_800_000_000, 250_000_000), []string{"ns/a", "ns/b"})
	if pend, dl := propagationGauges(); pend != 2 || dl != 1_800_000_000.25 {
		t.Errorf("unpaced: pending %v, deadline %v, want 2 and 1800000000.25", pend, dl)
	}
	// No cluster at all: nothing is owed.
	p = newPropagation(0)
	p.beginFirstPass(election.FleetDefaults, true, time.Unix(1_800_000_000, 0), nil)
	if pend, dl := propagationGauges(); pend != 0 || dl != 0 {
		t.Errorf("no cluster: pending %v, deadline %v, want 0 and 0", pend, dl)
	}
}
