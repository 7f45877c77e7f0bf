package settings

import (
	"maps"
	"time"

	"leasetune.io/leasetune/pkg/election"
)

// pendingTriple is a valid stored triple waiting for the settle time.
type pendingTriple struct {
	t     election.Timings
	since time.Time // when the settings first held t (the batch's clock starts)
	said  bool      // its TimingsPending Event has been recorded
}

// settlement is what settle decides.
type settlement struct {
	// effective is the triple in effect per component after this
	// evaluation.
	effective map[Component]election.Timings
	// pending holds the valid triples still waiting for the settle time.
	pending map[Component]pendingTriple
	// status is each component's view: its inputs, why they were refused,
	// and the triple pending with the time it takes effect.
	status map[Component]ComponentStatus
	// waiting are the components whose pending triple has not been said
	// yet (its TimingsPending Event and log line are due), in the order
	// of Components.
	waiting []Component
	// recheck, when positive, is how long from now the settle time of the
	// pending triples ends: the settings must be evaluated again then.
	recheck time.Duration
}

// settle decides, without side effects, which triples are in effect after
// an evaluation at now of inputs (every setting's Input, by name), from
// effective (the triples in effect before) and pending (the triples that
// waited; neither map is changed), with the settle time settleFor
// (ProviderOptions.Settle):
//   - an invalid triple (Evaluate refuses it) leaves the triple in effect
//     whole, and nothing of its component waits;
//   - a triple equal to the one in effect changes nothing, and drops what
//     waited;
//   - the first triple known for a component, and every triple when
//     settleFor is not positive, takes effect at once;
//   - any other valid triple waits; it waits from the first evaluation
//     that found it (a different triple starts afresh), and every waiting
//     triple takes effect together, once none of them has changed for
//     settleFor (so one intended change that spans components, as the
//     fleet-controller Deployment carries two triples, is one write per
//     object, not one per component).
func settle(inputs map[string]Input, effective map[Component]election.Timings, pending map[Component]pendingTriple, now time.Time, settleFor time.Duration) settlement {
	out := settlement{
		effective: maps.Clone(effective),
		pending:   maps.Clone(pending),
		status:    map[Component]ComponentStatus{},
	}
	if out.effective == nil {
		out.effective = map[Component]election.Timings{}
	}
	if out.pending == nil {
		out.pending = map[Component]pendingTriple{}
	}
	var latest time.Time // the newest of the waiting triples
	for _, c := range Components {
		var vals [3]Resolved
		for i, d := range Of(c) {
			vals[i] = Resolve(d, inputs[d.Name])
		}
		t, err := Evaluate(c, vals)
		cur, had := out.effective[c]
		switch {
		case err != nil || (had && cur == t):
			delete(out.pending, c)
		case !had || settleFor <= 0:
			out.effective[c] = t
			delete(out.pending, c)
		default:
			pt, ok := out.pending[c]
			if !ok || pt.t != t {
				pt = pendingTriple{t: t, since: now}
			}
			out.pending[c] = pt
			if pt.since.After(latest) {
				latest = pt.since
			}
		}
		out.status[c] = ComponentStatus{Inputs: vals, Refused: err}
	}
	if len(out.pending) == 0 {
		return out
	}
	at := latest.Add(settleFor)
	if !now.Before(at) {
		for c, pt := range out.pending {
			out.effective[c] = pt.t
		}
		clear(out.pending)
		return out
	}
	for _, c := range Components {
		pt, ok := out.pending[c]
		if !ok {
			continue
		}
		st := out.status[c]
		t := pt.t
		st.Pending, st.PendingAt = &t, at
		out.status[c] = st
		if !pt.said {
			out.waiting = append(out.waiting, c)
		}
	}
	out.recheck = at.Sub(now)
	return out
}
