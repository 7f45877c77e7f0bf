package electionstatus

import (
	"fmt"
	"sort"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/agentenv"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/evaluation"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/locks"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/settings"
)

// Options say what Compute cannot read off the installation.
type Options struct {
	// EnvSet reports whether a setting's env var is set on leasetune's pod
	// (the setting is then read-only); nil: only the objects' source
	// counts.
	EnvSet func(settings.Definition) bool
	// RancherEnv is true when leasetune writes the Rancher Deployment's
	// env (rancherElection.enabled, --rancher-env).
	RancherEnv bool
	// Memo, when not nil, keeps each cluster's part of the status between
	// calls, so that a call derives again only the clusters whose objects
	// changed (see Memo). Calls sharing a Memo must not run concurrently.
	Memo *Memo
}

// Compute is the status of an installation: snap as inventory.Read or the
// leader's caches give it, and triples the settings' state per component
// (the settings Provider's Status on the leader; settings.Snapshot of the
// snapshot's Settings and state elsewhere). It is a pure function, and the
// same inputs give the same status, byte for byte: lists are sorted, so
// that the leader writes only when something changed.
func Compute(snap *inventory.Snapshot, triples map[settings.Component]settings.ComponentStatus, opts Options) Status {
	st := Status{Clusters: []Cluster{}}
	for _, c := range settings.Components {
		st.Components = append(st.Components, component(snap, c, triples[c], opts))
	}
	st.Fleet = Fleet{Channel: string(snap.Channel), Evidence: snap.Evidence, Processes: snap.FleetLocks()}
	if snap.Channel != "" {
		st.Fleet.ChannelExplain = snap.Channel.Explain()
	}
	if p := evaluation.FleetOf(snap, triples).JudgeProblem; p != nil {
		st.Fleet.JudgeProblem = p.Error()
	}
	st.RancherConfig = rancherConfig(evaluation.RancherConfigOf(snap, triples))
	st.Rancher = rancherStatus(evaluation.RancherOf(snap, triples[settings.Rancher]), opts)
	st.Agents, st.Clusters, st.ClustersNotListed = agents(snap, triples[settings.FleetAgent], opts.Memo)
	return st
}

// TripleOf is t as a Triple.
func TripleOf(t election.Timings) *Triple {
	f := election.FormatDuration
	return &Triple{LeaseDuration: f(t.LeaseDuration), RenewDeadline: f(t.RenewDeadline), RetryPeriod: f(t.RetryPeriod)}
}

var sources = map[settings.Origin]string{settings.OriginDefault: "default", settings.OriginObject: "user",
	settings.OriginRemembered: "remembered", settings.OriginEnv: "env"}

func component(snap *inventory.Snapshot, c settings.Component, cs settings.ComponentStatus, opts Options) Component {
	out := Component{Component: string(c), Restarts: c.Restarts()}
	byName := map[string]*v3.Setting{}
	for i := range snap.Settings {
		byName[snap.Settings[i].Name] = &snap.Settings[i]
	}
	for i, d := range settings.Of(c) {
		in := cs.Inputs[i]
		s := Setting{Name: d.Name, Field: string(d.Field), Default: d.Default, Value: in.Value, Source: sources[in.Origin], EnvVar: d.EnvVar()}
		if s.Value == "" {
			s.Value, s.Source = d.Default, "default"
		}
		if o := byName[d.Name]; (o != nil && o.Source == v3.SourceEnv) || in.Origin == settings.OriginEnv || (opts.EnvSet != nil && opts.EnvSet(d)) {
			s.ReadOnly, s.Source = true, "env"
			s.ReadOnlyReason = fmt.Sprintf("set by the env var %s on leasetune's pod (chart value settingsEnv): change or remove it there", d.EnvVar())
		}
		out.Settings = append(out.Settings, s)
	}
	if cs.HasEffective {
		out.InEffect = TripleOf(cs.Effective)
	}
	if cs.Pending != nil {
		out.Pending = TripleOf(*cs.Pending)
		if !cs.PendingAt.IsZero() {
			out.SettlesAt = cs.PendingAt.UTC().Format(time.RFC3339)
		}
	}
	if cs.Refused != nil {
		out.Refused = cs.Refused.Error()
	}
	out.Targets = targets(snap, c)
	return out
}

// targets are the containers whose env a change of component c's triple
// writes (fleetenv.Prefixes): CATTLE_ELECTION_* of every Fleet container
// of the Fleet target Deployments for fleet-controller,
// FLEET_AGENT_ELECTION_* of fleet-agentmanagement where leasetune keeps
// them for fleet-agent, the rancher container for rancher.
func targets(snap *inventory.Snapshot, c settings.Component) []Target {
	var out []Target
	add := func(d *appsv1.Deployment, ctr corev1.Container, p election.EnvPrefix) {
		t := Target{Object: "Deployment " + d.Namespace + "/" + d.Name, Container: ctr.Name, Prefix: string(p)}
		for _, e := range ctr.Env {
			if p.Owns(e.Name) {
				t.Env = append(t.Env, envVarOf(e))
			}
		}
		out = append(out, t)
	}
	want := election.CattlePrefix
	if c == settings.FleetAgent {
		want = election.FleetAgentPrefix
	}
	switch c {
	case settings.FleetController, settings.FleetAgent:
		for i := range snap.FleetDeployments {
			d := &snap.FleetDeployments[i]
			for _, ctr := range d.Spec.Template.Spec.Containers {
				for _, p := range fleetenv.Prefixes(d, ctr, snap.Channel) {
					if p == want {
						add(d, ctr, p)
					}
				}
			}
		}
	case settings.Rancher:
		if d := snap.Rancher; d != nil {
			for _, ctr := range d.Spec.Template.Spec.Containers {
				if ctr.Name == rancher.Container {
					add(d, ctr, election.CattlePrefix)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].Object+" "+out[i].Container < out[j].Object+" "+out[j].Container
	})
	return out
}

func envVarOf(e corev1.EnvVar) EnvVar {
	if e.ValueFrom != nil {
		return EnvVar{Name: e.Name, Value: "(valueFrom)"}
	}
	return EnvVar{Name: e.Name, Value: e.Value}
}

func envVarsOf(env []corev1.EnvVar) []EnvVar {
	var out []EnvVar
	for _, e := range env {
		out = append(out, envVarOf(e))
	}
	return out
}

// rancherConfig reads the leaderElection.* and agent.leaderElection.* keys
// of rancher-config's fleet values as written, and whether leasetune
// leaves the ConfigMap alone.
func rancherConfig(rc *evaluation.RancherConfig) RancherConfig {
	if rc == nil {
		return RancherConfig{}
	}
	out := RancherConfig{Present: true, Object: rc.Ref, SchemaProblems: rc.Problems}
	if rc.Err != nil {
		out.Problem = rc.Err.Error()
	}
	var values map[string]interface{}
	if yaml.Unmarshal([]byte(rc.Doc), &values) != nil {
		return out
	}
	out.Controller = chartTriple(values, "leaderElection")
	if ag, ok := values["agent"].(map[string]interface{}); ok {
		out.Agent = chartTriple(ag, "leaderElection")
	}
	return out
}

// chartTriple is the triple under key of m as written (nil when none of
// its keys is there; an absent key is "").
func chartTriple(m map[string]interface{}, key string) *Triple {
	le, ok := m[key].(map[string]interface{})
	if !ok {
		return nil
	}
	str := func(k string) (string, bool) {
		v, ok := le[k]
		if !ok || v == nil {
			return "", false
		}
		return fmt.Sprint(v), true
	}
	var t Triple
	var any bool
	for _, f := range []struct {
		k string
		p *string
	}{{"leaseDuration", &t.LeaseDuration}, {"renewDeadline", &t.RenewDeadline}, {"retryPeriod", &t.RetryPeriod}} {
		if v, ok := str(f.k); ok {
			*f.p, any = v, true
		}
	}
	if !any {
		return nil
	}
	return &t
}

func rancherStatus(ra *evaluation.Rancher, opts Options) Rancher {
	if ra == nil {
		return Rancher{}
	}
	out := Rancher{Present: true, Replicas: ra.Replicas, Managed: opts.RancherEnv,
		ClusterAgentsRead: ra.Version.ClusterAgentReadsElectionEnv()}
	minor := 0
	if ra.Version.Known {
		out.Version = ra.Version.String()
		minor = ra.Version.Minor
	}
	out.LocksLeftAlone = locks.LeftAloneSummaries(minor)
	if ra.RunsKnown {
		out.Runs = TripleOf(ra.Runs)
	}
	if dec := ra.Decision; dec.Problem != rancherenv.ProblemNone {
		out.Problem = fmt.Sprintf("%s: %s", dec.Problem, dec.Reason)
	}
	if p, why := rancherenv.WriteProblem(ra.Deployment); p != rancherenv.ProblemNone {
		out.WriteProblem = fmt.Sprintf("%s: %s", p, why)
	}
	return out
}

// agents groups the routable clusters and lists those that differ from
// the global agent triple agent (sorted by name, at most MaxClusters).
// memo, when not nil, keeps each cluster's outcome between calls
// (see Memo); the result is the same with or without it, and shares no
// map, slice or pointer with the memo (what it returns is copied: at most
// MaxGroups groups and entries and MaxClusters clusters), so that a caller
// may change it.
func agents(snap *inventory.Snapshot, agent settings.ComponentStatus, memo *Memo) (Agents, []Cluster, int) {
	out := Agents{Clusters: len(snap.FleetClusters), Groups: []Group{}}
	groups := map[string]*Group{}
	unroutable := map[string]*Entries{}
	var listed []Cluster
	memo.begin(agent, snap.Channel)
	for i := range snap.Clusters {
		o := memo.outcome(&snap.Clusters[i], agent, snap.Channel)
		if o.listed != nil {
			listed = append(listed, *o.listed)
		}
		switch {
		case o.unroutable && len(o.entries) > 0:
			if have, ok := unroutable[o.key]; ok {
				have.Count++
			} else {
				unroutable[o.key] = &Entries{Count: 1, Entries: o.entries}
			}
		case o.unroutable:
		default:
			if have, ok := groups[o.key]; ok {
				have.Count++
			} else {
				g := o.group
				g.Count = 1
				groups[o.key] = &g
			}
		}
		if o.unroutable {
			out.Unroutable++
		}
	}
	memo.end()
	for _, k := range largestFirst(groups, func(g *Group) int { return g.Count }) {
		if len(out.Groups) == MaxGroups {
			out.GroupsNotListed++
			out.ClustersNotGrouped += groups[k].Count
			continue
		}
		out.Groups = append(out.Groups, groups[k].clone())
	}
	for _, k := range largestFirst(unroutable, func(e *Entries) int { return e.Count }) {
		if len(out.UnroutableEntries) == MaxGroups {
			out.UnroutableEntriesNotListed++
			continue
		}
		e := *unroutable[k]
		e.Entries = append([]EnvVar(nil), e.Entries...)
		out.UnroutableEntries = append(out.UnroutableEntries, e)
	}
	sort.Slice(listed, func(i, j int) bool { return listed[i].Name < listed[j].Name })
	notListed := 0
	if len(listed) > MaxClusters {
		notListed = len(listed) - MaxClusters
		listed = listed[:MaxClusters]
	}
	for i := range listed {
		listed[i] = listed[i].clone()
	}
	if listed == nil {
		listed = []Cluster{}
	}
	return out, listed, notListed
}

func overridesOf(f agentenv.SourceFacts) map[string]string {
	var out map[string]string
	for i, fld := range election.Fields {
		if f.Set[i] {
			if out == nil {
				out = map[string]string{}
			}
			out[string(fld)] = f.Overrides[i]
		}
	}
	return out
}

// largestFirst returns the keys of m, the largest count first, then in the
// order of the keys (the groups' JSON), so that the same installation gives
// the same bytes whatever the order of its lists.
func largestFirst[T any](m map[string]*T, count func(*T) int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if a, b := count(m[keys[i]]), count(m[keys[j]]); a != b {
			return a > b
		}
		return keys[i] < keys[j]
	})
	return keys
}
