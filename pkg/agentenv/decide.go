package agentenv

import (
	"errors"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

// Effective returns the cluster's triple: global, with each override
// annotation that is set replacing its field; validated. Errors name the
// annotation and its value, or list the rules broken with the numbers.
func Effective(global election.Timings, vals [3]string, set [3]bool) (election.Timings, error) {
	t := global
	var errs []error
	for i, f := range election.Fields {
		if !set[i] {
			continue
		}
		d, err := election.ParseDuration(f, vals[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %s: %w", OverrideAnnotations[i], err))
			continue
		}
		t = t.With(f, d)
	}
	if len(errs) > 0 {
		return t, errors.Join(errs...)
	}
	if err := t.Validate(); err != nil {
		return t, err
	}
	return t, nil
}

// Problem says why a cluster is left alone, or why its overrides do not
// take effect.
type Problem string

const (
	// ProblemInvalid: the effective triple does not validate.
	ProblemInvalid Problem = "invalid"
	// ProblemForeign: an entry with one of the three names was not
	// written by the project.
	ProblemForeign Problem = "foreign"
	// ProblemUnsupported: override annotations are set where no agent can
	// read them without a duplicate env name (Fleet v0.12 and v0.13+
	// render the names themselves) or where no agent reads them at all
	// (Fleet v0.9.0; v0.10-v0.11 agents run no election). Unlike the other
	// two, the cluster is still converged (entries the project wrote
	// earlier are removed); only the overrides are not applied.
	ProblemUnsupported Problem = "unsupported"
	// ProblemReverted: another writer keeps removing the project's entries
	// (the controller's revert guard; Decide never returns it).
	ProblemReverted Problem = "reverted"
)

// Input is what Decide reads for one cluster.
type Input struct {
	// Facts are what FactsOf read of the cluster's source object (the
	// Routing's Target): its spec.agentEnvVars, the project's record of
	// what it wrote there, its override annotations.
	Facts SourceFacts
	// Global is the global agent triple; Channel the Fleet agent channel.
	Global  election.Timings
	Channel fleet.AgentChannel
	// ClusterAgentReads is true when Rancher also deploys this list to the
	// cluster's cattle-cluster-agent, which renders no CATTLE_ELECTION_*
	// and reads them (Rancher 2.8.3+, wrangler/v2 and later:
	// Routing.ClusterAgentReads).
	ClusterAgentReads bool
}

// Decision is the outcome of Decide.
type Decision struct {
	// Change is true when Env or Record must be written.
	Change bool
	// Env is the new spec.agentEnvVars (nil: none).
	Env []map[string]interface{}
	// Record is the new ownership record (nil: none).
	Record map[string]string
	// Effective is the cluster's triple: the global agent triple with the
	// overrides on top (valid unless Problem is ProblemInvalid).
	Effective election.Timings
	// Runs is what the cluster's fleet-agent runs once Env is in place
	// (fleet.AgentChannel.AgentRuns); Elects is false where it runs no
	// leader election.
	Runs   election.Timings
	Elects bool
	// Problem and Err say why the cluster is left as it is (Change is then
	// false) or, for ProblemUnsupported, why its overrides do not apply.
	Problem Problem
	Err     error
}

// Decide computes a cluster's spec.agentEnvVars. The rule (docs/agents.md,
// "What reaches each downstream cluster") is that a write happens only when the
// env a process reads changes, and no write ever gives an agent Deployment
// a second entry of an env name:
//
//   - An entry named CATTLE_ELECTION_* that the record does not show with
//     that value (or that takes its value from a source, or appears twice)
//     is someone else's: the cluster is left alone (ProblemForeign).
//   - The entries may be written only where Fleet's agent manifest does not
//     render the names itself (fleet.AgentChannel.RendersElectionEnv); they
//     are read by the fleet-agent on Fleet v0.9.1+
//     (ClusterEnvReachesAgent) and, on Rancher-managed clusters, by
//     cattle-cluster-agent. Where they may not be written, entries the
//     project wrote earlier are removed (a repair: they are duplicates).
//   - Without overrides the global triple is written only for the
//     fleet-agent, where it differs from what the agent runs without
//     entries (fleet.AgentChannel.Baseline).
//   - With overrides, the effective triple is written where an agent reads
//     it and it differs from wrangler's 45s/30s/2s, which both agents run
//     without entries; entries already there stay (with the effective
//     values) while an override is set, so a global triple that catches up
//     with an override restarts nothing. Overrides no agent can read are
//     reported (ProblemUnsupported) and change nothing.
//   - The effective triple must validate, or the cluster is left alone
//     (ProblemInvalid).
//
// Owned entries keep their position, missing ones are appended in the
// fixed order, all three or none; entries the project does not own are
// copied unchanged. A spec.agentEnvVars that is not a list of objects
// (SourceFacts.Malformed) is left alone (ProblemForeign). The Decision's
// Env shares its entries with in.Facts: read it, do not change it.
func Decide(in Input) Decision {
	f := in.Facts
	if f.envErr != nil {
		return Decision{Problem: ProblemForeign, Err: f.envErr}
	}
	env, record := f.env, f.record
	ch := in.Channel
	eff, effErr := Effective(in.Global, f.overrides, f.set)
	anyOverride := f.set[0] || f.set[1] || f.set[2]
	owned := map[string]int{} // name → index in env
	for i, e := range env {
		name, _ := e["name"].(string)
		if !election.CattlePrefix.Owns(name) {
			continue
		}
		value, isString := e["value"].(string)
		_, fromSource := e["valueFrom"]
		_, dup := owned[name]
		want, recorded := record[name]
		if dup || fromSource || !isString || !recorded || want != value {
			d := Decision{Effective: eff, Problem: ProblemForeign}
			d.Runs, d.Elects, _ = ch.AgentRuns(in.Global, toEnvVars(env))
			msg := fmt.Sprintf("spec.agentEnvVars has %s=%q, which leasetune did not write", name, value)
			if ch.RendersElectionEnv() {
				msg += fmt.Sprintf(" and which duplicates a name Fleet's agent manifest renders itself (%s): remove it, or the agent's own helm upgrade fails or loops", ch)
			}
			d.Err = errors.New(msg)
			return d
		}
		owned[name] = i
	}
	var write bool // whether the three entries are wanted
	var problem Problem
	var perr error
	switch {
	case !anyOverride:
		base, _ := ch.Baseline(in.Global)
		write = ch.ClusterEnvReachesAgent() && in.Global != base
	default:
		if perr = OverridesUnread(ch, in.ClusterAgentReads); perr != nil {
			problem = ProblemUnsupported
			break
		}
		if effErr != nil {
			return Decision{Effective: eff, Problem: ProblemInvalid, Err: effErr}
		}
		write = eff != election.WranglerDefaults || len(owned) > 0
	}
	var out []map[string]interface{}
	var newRec map[string]string
	if write {
		want := map[string]string{}
		for _, e := range election.CattlePrefix.Env(eff) {
			want[e.Name] = e.Value
		}
		newRec = want
		for i, e := range env {
			name, _ := e["name"].(string)
			if idx, mine := owned[name]; mine && idx == i {
				out = append(out, map[string]interface{}{"name": name, "value": want[name]})
				continue
			}
			out = append(out, e)
		}
		for _, name := range election.CattlePrefix.EnvNames() {
			if _, ok := owned[name]; !ok {
				out = append(out, map[string]interface{}{"name": name, "value": want[name]})
			}
		}
	} else {
		for i, e := range env {
			name, _ := e["name"].(string)
			if idx, mine := owned[name]; mine && idx == i {
				continue
			}
			out = append(out, e)
		}
	}
	change := !sameEnv(env, out) || !reflect.DeepEqual(normRecord(record), normRecord(newRec))
	d := Decision{Change: change, Env: out, Record: newRec, Effective: eff, Problem: problem, Err: perr}
	d.Runs, d.Elects, _ = ch.AgentRuns(in.Global, toEnvVars(out))
	return d
}

// OverridesUnread says why override annotations cannot take effect on a
// cluster on channel ch, or nil where an agent reads them: the fleet-agent
// on Fleet v0.9.1-v0.9.x (fleet.AgentChannel.ClusterEnvReachesAgent), or
// cattle-cluster-agent where it reads them (clusterAgentReads:
// Routing.ClusterAgentReads) and Fleet's agent manifest renders no
// CATTLE_ELECTION_* (a second entry of a name would break the agent's helm
// upgrade). Decide reports it as ProblemUnsupported; the admission
// webhook refuses such overrides with it.
func OverridesUnread(ch fleet.AgentChannel, clusterAgentReads bool) error {
	if ch.ClusterEnvReachesAgent() || (clusterAgentReads && !ch.RendersElectionEnv()) {
		return nil
	}
	switch ch {
	case fleet.ChannelAgentManagement, fleet.ChannelFixedV012:
		return fmt.Errorf("per-cluster overrides cannot be applied on %s: Fleet's agent manifest renders CATTLE_ELECTION_* itself, and a second entry of a name breaks the agent's helm upgrade; the overrides are not applied (Fleet v0.9.1-v0.9.x, or v0.10-v0.11 on Rancher-managed clusters for cattle-cluster-agent, allow them)", ch)
	case fleet.ChannelFixedV090:
		return fmt.Errorf("per-cluster overrides cannot take effect on %s: Fleet v0.9.0 agents read no election env; the overrides are not applied (Fleet v0.9.1+ reads them)", ch)
	}
	return fmt.Errorf("per-cluster overrides have no reader on %s: Fleet v0.10-v0.11 agents run no leader election and this cluster has no cattle-cluster-agent; the overrides are not applied", ch)
}

// toEnvVars converts raw agentEnvVars items to EnvVars for the pure Fleet
// model (name, literal value, and whether a source gives the value).
func toEnvVars(env []map[string]interface{}) []corev1.EnvVar {
	out := make([]corev1.EnvVar, 0, len(env))
	for _, e := range env {
		name, _ := e["name"].(string)
		v := corev1.EnvVar{Name: name}
		v.Value, _ = e["value"].(string)
		if _, from := e["valueFrom"]; from {
			v.ValueFrom = &corev1.EnvVarSource{}
		}
		out = append(out, v)
	}
	return out
}

func sameEnv(a, b []map[string]interface{}) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func normRecord(r map[string]string) map[string]string {
	if len(r) == 0 {
		return nil
	}
	return r
}
