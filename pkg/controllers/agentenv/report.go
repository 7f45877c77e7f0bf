package agentenv

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/agentenv/slim"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/settings"
)

// Event reasons on the cluster objects.
const (
	// ReasonUpdated: the agent env was written (outside a global change,
	// whose writes are summed up in ReasonPropagated).
	ReasonUpdated = "AgentEnvUpdated"
	// ReasonReverted: the revert guard stopped writing an object.
	ReasonReverted = "AgentEnvReverted"
	// ReasonOverrideIgnored: override annotations on an object that is not
	// the cluster's source.
	ReasonOverrideIgnored = "ElectionOverrideIgnored"
)

// problemReasons are the Warning Events' reasons for agentenv.Decide's problems.
var problemReasons = map[agentenv.Problem]string{agentenv.ProblemInvalid: "InvalidElectionOverride", agentenv.ProblemForeign: "ForeignElectionEnv",
	agentenv.ProblemUnsupported: "ElectionOverrideUnsupported"}

// report is a sync's one report step, on every exit path after its write:
// it alone keeps the ledger, the metrics, the log lines and the Events of
// a cluster's sync. Each problem and each ignored override is said once;
// a write's Event is held back for the summary while a global change owes
// the cluster (propagation.go).
func (c *Controller) report(st state, out outcome, done applied) {
	switch {
	case st.gone:
		c.ledger.forget(st.key)
		return
	case st.noTriple || st.noChannel:
		return
	case st.unroutable != nil:
		c.log.Info("cluster not routable yet", "cluster", st.key, "reason", st.unroutable.Error())
		return
	}
	rt := st.route
	for _, o := range rt.Ignored {
		c.reportIgnored(st.key, o, rt)
	}
	switch {
	case st.fenced:
		return // said when the guard fenced it
	case out.action == writeFence:
		if !done.wrote {
			return // retried: the next sync fences again
		}
		c.ledger.fence(st.key, slim.Fingerprint(rt.Target), done.message)
		c.log.Warn("another writer keeps removing leasetune's entries; stopped writing", "cluster", st.key, "object", rt.TargetRef.String(), "message", done.message)
		c.event(rt.Target, corev1.EventTypeWarning, ReasonReverted, done.message)
		return
	}
	if c.ledger.problem(st.key, out.problem, out.message) {
		c.log.Warn("cluster's agent env left as it is", "cluster", st.key, "object", rt.TargetRef.String(), "problem", out.problem, "error", out.message)
		c.event(rt.Target, corev1.EventTypeWarning, problemReasons[out.problem], out.message)
	}
	if out.action == writeEnv && done.wrote {
		if out.revert {
			c.ledger.addRevert(st.key, c.clock.Now())
		}
		c.reportWrite(st.key, rt, out.decision)
	}
}

// reportWrite counts, logs and records a write of a cluster's agent env.
func (c *Controller) reportWrite(key string, rt agentenv.Routing, d agentenv.Decision) {
	metrics.Writes.WithLabelValues("cluster").Inc()
	restarts := agentenv.Restarts(rt)
	for _, k := range restarts {
		metrics.Restarts.WithLabelValues(string(k)).Inc()
	}
	if at := c.prop.since(); !at.IsZero() {
		metrics.PropagationSeconds.WithLabelValues(controllerName).Set(c.clock.Since(at).Seconds())
	}
	msg := fmt.Sprintf("spec.agentEnvVars now holds CATTLE_ELECTION_* for %s; this redeploys %s", d.Effective, restarts)
	if d.Record == nil {
		msg = fmt.Sprintf("removed the CATTLE_ELECTION_* entries leasetune had added; this redeploys %s", restarts)
	}
	if d.Elects {
		msg += fmt.Sprintf("; fleet-agent runs %s", d.Runs)
	}
	if d.Record == nil {
		c.log.Info("agent env entries removed", "object", rt.TargetRef.String(), "redeploys", restarts.String())
	} else {
		c.log.Info("agent env updated", "object", rt.TargetRef.String(), "timings", d.Effective.String(), "redeploys", restarts.String())
	}
	if !c.prop.count(key, clusterWrite{removed: d.Record == nil, cattle: rt.RancherManaged, replans: rt.Replans}) {
		c.event(rt.Target, corev1.EventTypeNormal, ReasonUpdated, msg)
	}
}

// reportIgnored tells, once per object and value, that override
// annotations on o do not apply: this cluster's are read from rt's target.
func (c *Controller) reportIgnored(key string, o *unstructured.Unstructured, rt agentenv.Routing) {
	vals, _ := agentenv.OverridesOf(o)
	if !c.ledger.ignoredOnce(key, fmt.Sprintf("%s/%s %v", o.GetNamespace(), o.GetName(), vals)) {
		return
	}
	msg := fmt.Sprintf("the election.cattle.io/* override annotations on this object do not apply: for this cluster leasetune reads them from %s", rt.TargetRef)
	c.log.Warn("override annotations ignored", "cluster", key, "object", o.GetName(), "readFrom", rt.TargetRef.String())
	c.event(o, corev1.EventTypeWarning, ReasonOverrideIgnored, msg)
}

// sumUpFirstPass makes the first pass over the clusters after the caches
// synced a globalChange (propagation.go), so that its writes too are
// summed up in one Event instead of one per cluster: leasetune's first
// start beside 10,000 clusters writes them all.
func (c *Controller) sumUpFirstPass() {
	t, ok := c.opts.Triples.Effective(settings.FleetAgent)
	c.prop.beginFirstPass(t, ok, c.clock.Now(), c.fleet.GetStore().ListKeys())
}

// settled marks a fleet Cluster as synced for the change being propagated
// (propagation.settle) and, with its last cluster, sums the change up: a
// log line and a Normal Event ReasonPropagated on each fleet-agent
// Setting (none for a first pass of a restart that wrote nothing).
func (c *Controller) settled(key string, seq uint64) {
	g := c.prop.settle(key, seq)
	if g == nil {
		return
	}
	took := c.clock.Since(g.at).Round(time.Millisecond)
	ch, _ := c.opts.Channels.Channel()
	left := c.ledger.leftAlone()
	msg := g.summary(took, left, ch)
	written, removed, cattle, replans := g.totals()
	c.log.Info("agent triple propagated", "timings", g.triple.String(), "took", took.String(), "written", written,
		"removed", removed, "cattleClusterAgents", cattle, "nodePlans", replans, "leftAlone", left, "firstPass", g.first)
	if c.opts.Recorder == nil || g.quiet() {
		return
	}
	for _, d := range settings.Of(settings.FleetAgent) {
		ref := &corev1.ObjectReference{APIVersion: "management.cattle.io/v3", Kind: "Setting", Name: d.Name}
		c.opts.Recorder.Event(ref, corev1.EventTypeNormal, ReasonPropagated, msg)
	}
}

func (c *Controller) event(u *unstructured.Unstructured, eventType, reason, msg string) {
	if c.opts.Recorder == nil || u == nil {
		return
	}
	c.opts.Recorder.Event(u, eventType, reason, msg)
}
