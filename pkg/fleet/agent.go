package fleet

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/election"
)

// What Fleet's agent manifest renders, read from rancher/fleet at each
// release tag:
//
//   - v0.9.x: internal/cmd/controller/agent/manifest.go (Manifest) renders
//     NAMESPACE, AGENT_SCOPE, CHECKIN_INTERVAL in the agent container and
//     then appends opts.AgentEnvVars (v0.9.9 lines 165-175 and 247-248).
//     v0.9.0 builds with github.com/rancher/wrangler v1.1.1 (go.mod), whose
//     leader election reads no env; v0.9.1 moved to wrangler/v2 v2.1.3,
//     whose pkg/leader reads CATTLE_ELECTION_*.
//   - v0.10-v0.11: internal/cmd/controller/agentmanagement/agent/manifest.go
//     renders NAMESPACE, AGENT_SCOPE and CHECKIN_INTERVAL over its three
//     containers and appends opts.AgentEnvVars to every container (v0.10.0
//     lines 181-236 and 313-322); no election names, and the agent runs no
//     leader election.
//   - v0.12: the same file renders CATTLE_ELECTION_LEASE_DURATION,
//     CATTLE_ELECTION_RETRY_PERIOD and CATTLE_ELECTION_RENEW_DEADLINE from
//     the constants electionLeaseDuration "30s", electionRetryPeriod "10s",
//     electionRenewDeadline "25s" (v0.12.0 lines 29-31 and 191-193, the
//     same in v0.12.19), then appends opts.AgentEnvVars (lines 296-297).
//   - v0.13+: the same three names from opts.LeaseDuration, RetryPeriod and
//     RenewDeadline, which fleet-agentmanagement reads from
//     FLEET_AGENT_ELECTION_* (v0.13.0 lines 193-195, v0.14.10 lines
//     197-199, v0.16.1 lines 199-201), then opts.AgentEnvVars (v0.14.10
//     lines 308-309). Fleet removes no duplicate; v0.16 checks one variable
//     of its own with envVarPresent before adding it.
//
// The agent is its own Bundle, upgraded by helm's three-way strategic merge
// patch, which keys env by name: a second entry of a name breaks or loops
// the agent's upgrade (docs/design.md, "How the timings reach each process"). So wherever the manifest
// renders a name, nothing may add it to spec.agentEnvVars.

// RendersElectionEnv reports whether Fleet's agent manifest renders
// CATTLE_ELECTION_* itself (v0.12 and v0.13+): then an entry of those names
// in a cluster's spec.agentEnvVars is a duplicate.
func (c AgentChannel) RendersElectionEnv() bool {
	return c == ChannelAgentManagement || c == ChannelFixedV012
}

// ClusterEnvReachesAgent reports whether CATTLE_ELECTION_* entries in a
// cluster's spec.agentEnvVars change what its fleet-agent runs without
// duplicating a name Fleet renders: only on Fleet v0.9.1-v0.9.x.
func (c AgentChannel) ClusterEnvReachesAgent() bool { return c == ChannelClusterEnvV09 }

// RenderedElectionEnv returns the CATTLE_ELECTION_* entries the agent
// manifest renders before it appends spec.agentEnvVars, in Fleet's order
// (lease, retry, renew), given the global agent triple; nil where it
// renders none.
func (c AgentChannel) RenderedElectionEnv(global election.Timings) []corev1.EnvVar {
	var t election.Timings
	switch c {
	case ChannelAgentManagement:
		t = global
	case ChannelFixedV012:
		t = election.FleetDefaults
	default:
		return nil
	}
	p := election.CattlePrefix
	return []corev1.EnvVar{
		{Name: p.EnvName(election.LeaseDuration), Value: election.FormatDuration(t.LeaseDuration)},
		{Name: p.EnvName(election.RetryPeriod), Value: election.FormatDuration(t.RetryPeriod)},
		{Name: p.EnvName(election.RenewDeadline), Value: election.FormatDuration(t.RenewDeadline)},
	}
}

// AgentRuns returns the triple a cluster's fleet-agent runs with, given the
// global agent triple and the cluster's spec.agentEnvVars: the entries
// Fleet renders followed by the cluster's, the last entry of a name winning
// (as for any container's env), an empty or absent value meaning wrangler's
// default for that field (wrangler/v2 pkg/leader computeConfig reads each
// variable on its own). elects is false where agents run no leader
// election. It returns an error naming the entry when a value takes its
// value from a source (valueFrom: not known here) or does not parse; it
// does not validate the triple.
func (c AgentChannel) AgentRuns(global election.Timings, clusterEnv []corev1.EnvVar) (t election.Timings, elects bool, err error) {
	base, elects := c.Baseline(global)
	if !elects {
		return election.Timings{}, false, nil
	}
	if c == ChannelFixedV090 {
		return base, true, nil // wrangler v1.1.1 reads no env
	}
	t = election.WranglerDefaults
	env := append(c.RenderedElectionEnv(global), clusterEnv...)
	for _, f := range election.Fields {
		name := election.CattlePrefix.EnvName(f)
		var last *corev1.EnvVar
		for i := range env {
			if env[i].Name == name {
				last = &env[i]
			}
		}
		switch {
		case last == nil || (last.ValueFrom == nil && last.Value == ""):
		case last.ValueFrom != nil:
			return t, true, fmt.Errorf("%s takes its value from a source (valueFrom), which leasetune cannot read", name)
		default:
			d, perr := election.ParseDuration(f, last.Value)
			if perr != nil {
				return t, true, fmt.Errorf("%s: %w", name, perr)
			}
			t = t.With(f, d)
		}
	}
	return t, true, nil
}

// DuplicateNames returns the env names that occur more than once in the
// agent container Fleet renders: its own entries (only the election names
// are modelled here, the ones this project could write) followed by the
// cluster's spec.agentEnvVars.
func (c AgentChannel) DuplicateNames(global election.Timings, clusterEnv []corev1.EnvVar) []string {
	seen := map[string]int{}
	var dups []string
	for _, e := range append(c.RenderedElectionEnv(global), clusterEnv...) {
		seen[e.Name]++
		if seen[e.Name] == 2 {
			dups = append(dups, e.Name)
		}
	}
	return dups
}
