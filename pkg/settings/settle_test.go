package settings

import (
	"maps"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
)

// inputsOf returns every setting's Input with the Setting objects holding
// the triples of set (the other components' objects hold no value: their
// defaults).
func inputsOf(set map[Component]election.Timings) map[string]Input {
	out := map[string]Input{}
	for _, c := range Components {
		for i, d := range Of(c) {
			obj := &v3.Setting{Default: d.Default}
			obj.Name = d.Name
			if t, ok := set[c]; ok {
				obj.Value = election.FormatDuration(t.Get(election.Fields[i]))
			}
			out[d.Name] = Input{Object: obj}
		}
	}
	return out
}

// defaultsOf is every component at its default triple.
func defaultsOf(t *testing.T) map[Component]election.Timings {
	t.Helper()
	out := map[Component]election.Timings{}
	for _, c := range Components {
		tr, err := Evaluate(c, [3]Resolved{
			Resolve(Of(c)[0], Input{}), Resolve(Of(c)[1], Input{}), Resolve(Of(c)[2], Input{}),
		})
		if err != nil {
			t.Fatalf("%s defaults: %v", c, err)
		}
		out[c] = tr
	}
	return out
}

// TestSettle steps a fake clock through the settle time: a first triple
// and settle 0 take effect at once; changes wait together, from the
// newest, until none has changed for the settle time; a refused triple or
// the triple in effect drop what waited; the caller's maps stay as they
// were.
func TestSettle(t *testing.T) {
	const settleFor = 10 * time.Second
	clk := testingclock.NewFakePassiveClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	defaults := defaultsOf(t)
	t2 := triple(t, 60*time.Second, 40*time.Second, 15*time.Second)
	t3 := triple(t, 90*time.Second, 60*time.Second, 20*time.Second)

	// Nothing in effect yet: the first triples take effect at once.
	s := settle(inputsOf(nil), nil, nil, clk.Now(), settleFor)
	if !maps.Equal(s.effective, defaults) || len(s.pending) != 0 || len(s.waiting) != 0 || s.recheck != 0 {
		t.Fatalf("first evaluation: %+v", s)
	}

	// Settle 0: a change takes effect at once.
	s = settle(inputsOf(map[Component]election.Timings{FleetController: t2}), defaults, nil, clk.Now(), 0)
	if s.effective[FleetController] != t2 || len(s.pending) != 0 || s.recheck != 0 {
		t.Fatalf("settle 0: %+v", s)
	}

	// A change waits settleFor, from now; it is to be said.
	effective := maps.Clone(defaults)
	start := clk.Now()
	s = settle(inputsOf(map[Component]election.Timings{FleetController: t2}), effective, nil, clk.Now(), settleFor)
	if s.effective[FleetController] != defaults[FleetController] || s.recheck != settleFor {
		t.Fatalf("a change took effect before the settle time: %+v", s)
	}
	st := s.status[FleetController]
	if st.Pending == nil || *st.Pending != t2 || !st.PendingAt.Equal(start.Add(settleFor)) || len(s.waiting) != 1 || s.waiting[0] != FleetController {
		t.Fatalf("pending: %+v, waiting %v", st, s.waiting)
	}
	if !maps.Equal(effective, defaults) {
		t.Fatalf("settle changed the caller's map: %v", effective)
	}
	pending := s.pending
	pt := pending[FleetController]
	pt.said = true // reportPending said it
	pending[FleetController] = pt

	// 4s later the agent triple changes too: both wait until 10s after
	// that; only the new one is to be said.
	clk.SetTime(start.Add(4 * time.Second))
	both := inputsOf(map[Component]election.Timings{FleetController: t2, FleetAgent: t3})
	s = settle(both, effective, pending, clk.Now(), settleFor)
	at := start.Add(14 * time.Second)
	for _, c := range []Component{FleetController, FleetAgent} {
		if st := s.status[c]; st.Pending == nil || !st.PendingAt.Equal(at) {
			t.Errorf("%s: pending %+v, want until %s", c, st, at)
		}
	}
	if len(s.waiting) != 1 || s.waiting[0] != FleetAgent || s.recheck != settleFor || !s.pending[FleetController].since.Equal(start) {
		t.Errorf("second change: waiting %v, recheck %s, pending %+v", s.waiting, s.recheck, s.pending)
	}
	if len(pending) != 1 {
		t.Errorf("settle changed the caller's pending map: %+v", pending)
	}
	pending = s.pending

	// 1s before the end nothing has changed: still waiting, 1s to go.
	clk.SetTime(at.Add(-time.Second))
	s = settle(both, effective, pending, clk.Now(), settleFor)
	if s.recheck != time.Second || len(s.pending) != 2 || s.effective[FleetAgent] != defaults[FleetAgent] {
		t.Errorf("1s before: %+v", s)
	}
	pending = s.pending

	// At the end both take effect together.
	clk.SetTime(at)
	s = settle(both, effective, pending, clk.Now(), settleFor)
	if s.effective[FleetController] != t2 || s.effective[FleetAgent] != t3 || len(s.pending) != 0 || s.recheck != 0 || len(s.waiting) != 0 {
		t.Errorf("at the end: %+v", s)
	}
	for c, st := range s.status {
		if st.Pending != nil || st.Refused != nil {
			t.Errorf("%s at the end: %+v", c, st)
		}
	}

	// A different triple while one waits starts afresh.
	clk.SetTime(at.Add(time.Minute))
	s = settle(inputsOf(map[Component]election.Timings{FleetController: t3}), effective, pending, clk.Now(), settleFor)
	if pt := s.pending[FleetController]; pt.t != t3 || !pt.since.Equal(clk.Now()) || pt.said || s.recheck != settleFor {
		t.Errorf("a different triple: %+v, recheck %s", s.pending, s.recheck)
	}

	// A refused triple leaves the triple in effect whole and drops what waited.
	bad := inputsOf(nil)
	bad[Of(FleetAgent)[1].Name].Object.Value = "5m" // renewDeadline above leaseDuration
	s = settle(bad, effective, pending, clk.Now(), settleFor)
	if s.status[FleetAgent].Refused == nil || s.effective[FleetAgent] != defaults[FleetAgent] {
		t.Errorf("refused: %+v", s.status[FleetAgent])
	}
	if _, ok := s.pending[FleetAgent]; ok || len(s.pending) != 0 || s.recheck != 0 {
		t.Errorf("a refused triple kept waiting: %+v", s.pending)
	}

	// Back to the triple in effect: nothing waits, nothing changes.
	s = settle(inputsOf(nil), effective, pending, clk.Now(), settleFor)
	if len(s.pending) != 0 || !maps.Equal(s.effective, effective) || s.recheck != 0 {
		t.Errorf("back to the triple in effect: %+v", s)
	}
}
