package agentenv

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

// The global agent triple reaches a v0.13+ agent through the entries Fleet
// renders, and a cluster's own spec.agentEnvVars come after them: where
// those set CATTLE_ELECTION_* (someone else's entries, which leasetune
// leaves alone), the agent runs a mix, the last entry of a name winning. A
// global change that passes every check of its own can so leave an agent
// with a triple client-go refuses: the judgement below finds such clusters
// (docs/settings.md, "Validation at the door").

// ClusterEnv is a fleet Cluster's CATTLE_ELECTION_* entries, in order.
type ClusterEnv struct {
	Namespace, Name string
	Env             []corev1.EnvVar
}

// Key is namespace/name.
func (c ClusterEnv) Key() string { return c.Namespace + "/" + c.Name }

// Broken is a cluster whose fleet-agent would run an invalid triple.
type Broken struct {
	Cluster ClusterEnv
	// Runs is the triple the agent would run; Err why it is refused.
	Runs election.Timings
	Err  error
}

// JudgeGlobal returns the clusters whose fleet-agent runs a valid triple
// with the global agent triple cur and would run an invalid one with next
// (fleet.AgentChannel.AgentRuns), sorted by key. A cluster already broken
// with cur is not counted: a change that breaks nothing new is never
// refused, so there is always a way out.
func JudgeGlobal(cur, next election.Timings, ch fleet.AgentChannel, clusters []ClusterEnv) []Broken {
	if cur == next || !ch.RendersElectionEnv() || !ch.GlobalReachesAgents() {
		// Only on v0.13+ does the global triple combine with entries of
		// others; on v0.9.1+ leasetune writes all three or leaves the
		// cluster alone.
		return nil
	}
	var out []Broken
	for _, c := range clusters {
		before, elects, err := ch.AgentRuns(cur, c.Env)
		if !elects || err != nil || before.Validate() != nil {
			continue
		}
		after, _, err := ch.AgentRuns(next, c.Env)
		if err == nil {
			err = after.Validate()
		}
		if err != nil {
			out = append(out, Broken{Cluster: c, Runs: after, Err: err})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Cluster.Key() < out[j].Cluster.Key() })
	return out
}

// BrokenError describes the clusters JudgeGlobal found, the first few by
// name, for a refusal or an Event.
func BrokenError(next election.Timings, broken []Broken) error {
	const show = 5
	var parts []string
	for i, b := range broken {
		if i == show {
			parts = append(parts, fmt.Sprintf("and %d more", len(broken)-show))
			break
		}
		var own []string
		for _, e := range b.Cluster.Env {
			own = append(own, e.Name+"="+e.Value)
		}
		parts = append(parts, fmt.Sprintf("%s (its spec.agentEnvVars sets %s, so its agent would run %s: %v)",
			b.Cluster.Key(), strings.Join(own, " "), b.Runs, b.Err))
	}
	return fmt.Errorf("the agent triple %s would leave the fleet-agent of %d cluster(s) with an invalid triple: %s; remove their own CATTLE_ELECTION_* entries (they also duplicate names Fleet renders) or choose values valid with them",
		next, len(broken), strings.Join(parts, "; "))
}

// ClusterEnvOf returns a fleet Cluster's election entries for JudgeGlobal.
func ClusterEnvOf(u *unstructured.Unstructured) ClusterEnv {
	return ClusterEnv{Namespace: u.GetNamespace(), Name: u.GetName(), Env: electionEntries(u)}
}

// electionEntries returns u's CATTLE_ELECTION_* entries of
// spec.agentEnvVars (valueFrom marked, its source dropped).
func electionEntries(u *unstructured.Unstructured) []corev1.EnvVar {
	env, err := EnvVars(u)
	if err != nil {
		return nil
	}
	return electionEntriesOf(env)
}

// electionEntriesOf returns the CATTLE_ELECTION_* entries of a decoded
// spec.agentEnvVars list, in order.
func electionEntriesOf(env []map[string]interface{}) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range toEnvVars(env) {
		if election.CattlePrefix.Owns(e.Name) {
			out = append(out, e)
		}
	}
	return out
}
