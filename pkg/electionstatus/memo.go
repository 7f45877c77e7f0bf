package electionstatus

import (
	"encoding/json"
	"fmt"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/evaluation"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/settings"
)

// Memo keeps, between calls of Compute, what it derived of each fleet
// Cluster: its group, or its unroutable entries, and its line in the list
// of clusters. A cluster's part is derived again only when what it depends
// on changed: the resourceVersions of its fleet Cluster and of the object
// its env is read from (an object of an informer's cache is not changed in
// place: a new resourceVersion is a new object), its routing, and the
// global agent triple and Fleet agent channel (a change of either forgets
// every cluster). Clusters whose objects have no resourceVersion are never
// kept. At 10,000 clusters, a status computed during a global change
// derives only the clusters written since the last one, rather than
// decoding every cluster's agentEnvVars again every Debounce.
//
// Use NewMemo. A nil *Memo keeps nothing. It is not safe for concurrent
// use. What Compute returns shares nothing with it.
type Memo struct {
	global string
	prev   map[string]memoEntry
	next   map[string]memoEntry
	// groups intern the groups of the clusters kept: at 10,000 clusters
	// in a few groups, each cluster's entry points at its group's one
	// copy, rather than holding its own (its env, record and overrides)
	// for as long as it is kept.
	groups, nextGroups map[string]*outcome
	// Derived counts the clusters derived (not taken from the memo) by the
	// last call, for tests.
	Derived int
}

// NewMemo returns an empty Memo.
func NewMemo() *Memo { return &Memo{prev: map[string]memoEntry{}, groups: map[string]*outcome{}} }

type memoEntry struct {
	deps deps
	out  outcome
}

// outcome is one cluster's part of the status.
type outcome struct {
	unroutable bool
	// key is the group's JSON (routable) or the entries' JSON
	// (unroutable, with entries): what clusters are counted under.
	key     string
	group   Group    // routable: the cluster's group, Count unset
	entries []EnvVar // unroutable: its fleet Cluster's CATTLE_ELECTION_* entries
	listed  *Cluster // its line in the status's list; nil: not listed
}

// begin starts a call: the memo is kept only for the same global agent
// triple and channel.
func (m *Memo) begin(agent settings.ComponentStatus, ch fleet.AgentChannel) {
	if m == nil {
		return
	}
	g := fmt.Sprintf("%t|%v|%s", agent.HasEffective, agent.Effective, ch)
	if g != m.global {
		m.global, m.prev, m.groups = g, map[string]memoEntry{}, map[string]*outcome{}
	}
	m.next = make(map[string]memoEntry, len(m.prev))
	m.nextGroups = make(map[string]*outcome, len(m.groups))
	m.Derived = 0
}

// end keeps only the clusters of this call.
func (m *Memo) end() {
	if m == nil {
		return
	}
	m.prev, m.next = m.next, nil
	m.groups, m.nextGroups = m.nextGroups, nil
}

// outcome is c's part, from the memo where its dependencies are unchanged.
func (m *Memo) outcome(c *inventory.Cluster, agent settings.ComponentStatus, ch fleet.AgentChannel) outcome {
	if m == nil {
		return deriveOutcome(c, agent, ch)
	}
	deps, ok := dependencies(c)
	if !ok {
		m.Derived++
		return deriveOutcome(c, agent, ch)
	}
	name := c.Fleet.GetNamespace() + "/" + c.Fleet.GetName()
	if e, ok := m.prev[name]; ok && e.deps == deps {
		m.next[name] = e
		if !e.out.unroutable {
			if _, ok := m.nextGroups[e.out.key]; !ok {
				m.nextGroups[e.out.key] = &outcome{key: e.out.key, group: e.out.group}
			}
		}
		return e.out
	}
	m.Derived++
	o := deriveOutcome(c, agent, ch)
	if !o.unroutable {
		// The group's key and value from its interned copy, when there is one.
		g, ok := m.groups[o.key]
		if !ok {
			if g, ok = m.nextGroups[o.key]; !ok {
				g = &outcome{key: o.key, group: o.group}
			}
		}
		o.key, o.group = g.key, g.group
		m.nextGroups[o.key] = g
	}
	m.next[name] = memoEntry{deps: deps, out: o}
	return o
}

// deps is what a cluster's outcome depends on besides the global triple
// and channel (comparable: no string is built per cluster).
type deps struct {
	fleetRV, targetRV string
	target            agentenv.Ref
	err               string
	rancherManaged    bool
	provisioned       bool
	replans           bool
	clusterAgentReads bool
	ignored           bool
}

// dependencies is what c's outcome depends on; false when an object has
// no resourceVersion.
func dependencies(c *inventory.Cluster) (deps, bool) {
	d := deps{fleetRV: c.Fleet.GetResourceVersion()}
	if d.fleetRV == "" {
		return d, false
	}
	if c.Err != nil {
		d.err = c.Err.Error()
		return d, true
	}
	rt := c.Routing
	if rt.Target == nil {
		return d, false
	}
	d.targetRV, d.target = rt.Target.GetResourceVersion(), rt.TargetRef
	d.rancherManaged, d.provisioned, d.clusterAgentReads, d.ignored = rt.RancherManaged, rt.Provisioned, rt.ClusterAgentReads, len(rt.Ignored) > 0
	d.replans = rt.Replans
	return d, d.targetRV != ""
}

// deriveOutcome derives c's part of the status.
func deriveOutcome(c *inventory.Cluster, agent settings.ComponentStatus, ch fleet.AgentChannel) outcome {
	name := c.Fleet.GetNamespace() + "/" + c.Fleet.GetName()
	if c.Err != nil {
		o := outcome{unroutable: true, listed: &Cluster{Name: name, Problem: "unroutable", Reason: c.Err.Error()}}
		if env := envVarsOf(agentenv.ClusterEnvOf(c.Fleet).Env); len(env) > 0 {
			key, _ := json.Marshal(env)
			o.key, o.entries = string(key), env
		}
		return o
	}
	ev := evaluation.ClusterOf(c, agent, ch)
	rt, facts := ev.Routing, ev.Facts
	g := Group{RancherManaged: rt.RancherManaged, Provisioned: rt.Provisioned, Replans: rt.Replans, ClusterAgentReads: rt.ClusterAgentReads,
		Entries: envVarsOf(facts.Entries), Record: facts.Record, Malformed: facts.Malformed, Overrides: overridesOf(facts)}
	if rt.TargetRef.GVR != fleet.ClusterGVR {
		g.FleetEntries = envVarsOf(agentenv.ClusterEnvOf(c.Fleet).Env)
	}
	key, _ := json.Marshal(g)
	o := outcome{key: string(key), group: g}
	cl := Cluster{Name: name, Source: rt.TargetRef.String(), Overrides: g.Overrides}
	status := rt.Target.GetAnnotations()[agentenv.StatusAnnotation]
	if d := ev.Decision; ev.Decided {
		// The overrides' triple, where it applies: not where it does not
		// validate, nor where no agent reads overrides (the agents run the
		// global triple there).
		if len(g.Overrides) > 0 && d.Problem != agentenv.ProblemInvalid && d.Problem != agentenv.ProblemUnsupported {
			cl.Effective = TripleOf(d.Effective)
		}
		if d.Elects && d.Runs != agent.Effective {
			cl.Runs = TripleOf(d.Runs)
		}
		if d.Problem != "" {
			cl.Problem, cl.Reason = string(d.Problem), d.Err.Error()
		}
	}
	if cl.Problem == "" && agentenv.IsFenceMessage(status) {
		cl.Problem, cl.Reason = string(agentenv.ProblemReverted), status
	}
	if len(g.Overrides) > 0 || cl.Runs != nil || cl.Problem != "" || len(rt.Ignored) > 0 {
		if len(rt.Ignored) > 0 && cl.Reason == "" {
			cl.Reason = fmt.Sprintf("override annotations on another object of this cluster do not apply: they are read from %s", rt.TargetRef)
		}
		o.listed = &cl
	}
	return o
}

// clone is g with its own maps and slices.
func (g *Group) clone() Group {
	c := *g
	c.Overrides = cloneMap(g.Overrides)
	c.Record = cloneMap(g.Record)
	c.Entries = cloneSlice(g.Entries)
	c.FleetEntries = cloneSlice(g.FleetEntries)
	return c
}

// clone is c with its own map and triples.
func (c Cluster) clone() Cluster {
	c.Overrides = cloneMap(c.Overrides)
	if c.Effective != nil {
		t := *c.Effective
		c.Effective = &t
	}
	if c.Runs != nil {
		t := *c.Runs
		c.Runs = &t
	}
	return c
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cloneSlice(s []EnvVar) []EnvVar {
	if s == nil {
		return nil
	}
	return append([]EnvVar{}, s...)
}
