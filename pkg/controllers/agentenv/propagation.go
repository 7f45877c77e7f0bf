package agentenv

import (
	"fmt"
	"sync"
	"time"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/metrics"
)

// controllerName is the controller label of this controller's metrics.
const controllerName = "agentenv"

// ReasonPropagated is the Event on the fleet-agent Settings that sums up a
// global agent triple change once every cluster has been synced.
const ReasonPropagated = "AgentTimingsPropagated"

// propagation is the bookkeeping of global agent triple changes: which one
// is being propagated, the clusters it still owes a sync, and what its
// writes restarted, so that the change is summed up in one Event on the
// agent Settings when its last cluster is synced, instead of one Event per
// cluster (at 10,000 clusters those were 10,000 Event writes, most of
// which client-go's broadcaster dropped). The controller's first pass
// after its caches synced is summed up the same way. Safe for concurrent
// use.
type propagation struct {
	mu sync.Mutex
	// last and lastOK are the global agent triple last seen.
	last   election.Timings
	lastOK bool
	// changeAt is when the triple last changed, for the propagation
	// metric (zero once the queue ran empty).
	changeAt time.Time
	// change is the change being propagated (nil: none); seq numbers the
	// changes; firstPass is set once the first pass has begun.
	change    *globalChange
	seq       uint64
	firstPass bool
	// perMinute is the pace of the cluster writes
	// (Options.ClustersPerMinute; 0: unpaced), for a change's deadline.
	perMinute float64
}

// globalChange is the propagation of one global agent triple: the fleet
// Clusters it enqueued and not yet synced, and what its writes restarted.
// first marks the controller's first pass after its caches synced (or a
// change that took one over); replaced, a change that took over another
// one's counts.
type globalChange struct {
	seq    uint64
	at     time.Time
	triple election.Timings
	owed   map[string]bool
	// wrote is each cluster written, by its key: a cluster written twice
	// (by the first pass, then for a change that took it over) counts once.
	wrote           map[string]clusterWrite
	first, replaced bool
	// deadline is when the change should be done at the pace: at plus
	// the clusters it owed at its begin divided by the pace (at itself
	// when unpaced).
	deadline time.Time
}

// clusterWrite is what a cluster's last write in a globalChange did.
type clusterWrite struct{ removed, cattle, replans bool }

// tripleChanged records the global agent triple t (ok: known) seen at now
// and reports whether it differs from the last one. Before the first pass
// has begun (the caches are still syncing) the first pass takes the new
// triple and owes every cluster; a change owes only the clusters cached so
// far (keys).
func (p *propagation) tripleChanged(t election.Timings, ok bool, now time.Time, keys func() []string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ok == p.lastOK && t == p.last {
		return false
	}
	p.last, p.lastOK = t, ok
	p.changeAt = now
	if ok && p.firstPass {
		p.begin(t, false, now, keys())
	}
	return true
}

// beginFirstPass starts summing up the first pass over the clusters after
// the caches synced (each was enqueued as the informer added it), with the
// agent triple t when one is known (ok).
func (p *propagation) beginFirstPass(t election.Timings, ok bool, now time.Time, keys []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.firstPass = true
	if ok {
		p.begin(t, true, now, keys)
	}
}

// begin starts summing up the propagation of the agent triple t over the
// clusters keys (first: the first pass). A change that replaces one still
// propagating takes over its counts and the clusters it still owes, so
// that no write goes unreported: each was held back from its own Event
// for the summary. Syncs that began before it settle nothing of it
// (settle). Call with p.mu held.
func (p *propagation) begin(t election.Timings, first bool, now time.Time, keys []string) {
	p.seq++
	g := &globalChange{seq: p.seq, at: now, triple: t, owed: map[string]bool{}, first: first}
	for _, key := range keys {
		g.owed[key] = true
	}
	if old := p.change; old != nil {
		for key := range old.owed {
			g.owed[key] = true
		}
		g.wrote = old.wrote
		g.first = g.first || old.first
		g.replaced = true
		g.at = old.at
	}
	g.deadline = g.at
	if p.perMinute > 0 {
		g.deadline = g.at.Add(time.Duration(float64(len(g.owed)) / p.perMinute * float64(time.Minute)))
	}
	p.change = g
	if len(g.owed) == 0 {
		p.change = nil // no cluster: nothing to sum up
	}
	p.publish()
}

// publish sets the propagation gauges of agentenv from the change being
// propagated: the clusters it still owes a sync
// (metrics.PropagationPending) and its deadline in Unix seconds
// (metrics.PropagationDeadline); both 0 when none is. Call with p.mu held.
func (p *propagation) publish() {
	pending, deadline := 0.0, 0.0
	if g := p.change; g != nil {
		pending = float64(len(g.owed))
		deadline = float64(g.deadline.Unix()) + float64(g.deadline.Nanosecond())/1e9
	}
	metrics.PropagationPending.WithLabelValues(controllerName).Set(pending)
	metrics.PropagationDeadline.WithLabelValues(controllerName).Set(deadline)
}

// newPropagation returns the bookkeeping of a controller whose cluster
// writes are paced at perMinute (0: unpaced), with its gauges at 0.
func newPropagation(perMinute float64) *propagation {
	p := &propagation{perMinute: perMinute}
	p.publish()
	return p
}

// syncSeq is the change a sync that begins now can settle (0: none).
func (p *propagation) syncSeq() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.change == nil {
		return 0
	}
	return p.change.seq
}

// since is when the triple last changed (zero: no change propagating).
func (p *propagation) since() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changeAt
}

// idle marks the queue empty: later writes are not part of a change.
func (p *propagation) idle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changeAt = time.Time{}
}

// count records a write of the cluster key in the change being propagated
// and reports whether the change owes that cluster (the write is then
// summed up, not reported on its own).
func (p *propagation) count(key string, w clusterWrite) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.change
	if g == nil || !g.owed[key] {
		return false
	}
	if g.wrote == nil {
		g.wrote = map[string]clusterWrite{}
	}
	g.wrote[key] = w
	return true
}

// settle marks the cluster key as done for the change being propagated,
// when its sync began under that change (seq, from syncSeq): a sync
// decided for an earlier triple settles nothing, the cluster is queued
// again and its next sync does. It returns the change once its last
// cluster is settled (nil before).
func (p *propagation) settle(key string, seq uint64) *globalChange {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.change
	if g == nil || g.seq != seq || !g.owed[key] {
		return nil
	}
	delete(g.owed, key)
	defer p.publish()
	if len(g.owed) > 0 {
		return nil
	}
	p.change = nil
	return g
}

// totals counts the clusters written (their entries written or removed)
// and what those writes restarted.
func (g *globalChange) totals() (written, removed, cattle, replans int) {
	for _, w := range g.wrote {
		if w.removed {
			removed++
		} else {
			written++
		}
		if w.cattle {
			cattle++
		}
		if w.replans {
			replans++
		}
	}
	return written, removed, cattle, replans
}

// quiet reports whether the change is the first pass of a restart that
// wrote nothing: it raises no Event, only its log line.
func (g *globalChange) quiet() bool {
	written, removed, _, _ := g.totals()
	return g.first && !g.replaced && written+removed == 0
}

// summary is the message that sums up a propagated change: took is how
// long it took, leftAlone the clusters left alone, channel the Fleet agent
// channel.
func (g *globalChange) summary(took time.Duration, leftAlone int, channel fleet.AgentChannel) string {
	written, removed, cattle, replans := g.totals()
	msg := fmt.Sprintf("the agent triple %s is propagated (%s): %d cluster(s) had CATTLE_ELECTION_* written to their agent env and %d had leasetune's entries removed, each redeploying its fleet-agent (%d also cattle-cluster-agent, %d re-planning every node); %d cluster(s) are left alone (their leasetune.io/agent-env-status annotation says why)",
		g.triple, took, written, removed, cattle, replans, leftAlone)
	if written+removed == 0 {
		msg = fmt.Sprintf("the agent triple %s needed no change of any cluster's agent env (%s)", g.triple, took)
		if channel == fleet.ChannelAgentManagement {
			msg += "; on this Fleet the agents get it from fleet-agentmanagement (FLEET_AGENT_ELECTION_* on the fleet-controller Deployment), which re-renders every agent when it restarts"
		}
		msg += fmt.Sprintf("; %d cluster(s) are left alone (their leasetune.io/agent-env-status annotation says why)", leftAlone)
	}
	switch {
	case g.first && g.replaced:
		msg = "since leasetune's start (a change came during its first pass), " + msg
	case g.first:
		msg = "at leasetune's start, " + msg
	case g.replaced:
		msg += " (with the writes of the change it replaced)"
	}
	return msg
}
