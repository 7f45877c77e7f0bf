package fleet

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v4/value"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/release"
)

// AgentChannel is the way downstream fleet-agents get their leader-election
// timings, which depends on the Fleet version. Which env names Fleet's agent
// manifest renders itself, per version, is in agent.go.
type AgentChannel string

const (
	// ChannelAgentManagement (Fleet v0.13+): fleet-agentmanagement reads
	// FLEET_AGENT_ELECTION_* and renders every agent with those timings as
	// CATTLE_ELECTION_*; an entry of those names in spec.agentEnvVars would
	// be a duplicate.
	ChannelAgentManagement AgentChannel = "agentmanagement"
	// ChannelFixedV012 (Fleet v0.12): the agent manifest renders
	// CATTLE_ELECTION_* hardcoded to 30s/25s/10s; nothing can change them
	// without a duplicate name.
	ChannelFixedV012 AgentChannel = "fixed-v0.12"
	// ChannelClusterEnvV09 (Fleet v0.9.1-v0.9.x): the manifest renders no
	// election env and the agent (wrangler/v2) reads CATTLE_ELECTION_*, so
	// wrangler's 45s/30s/2s unless a cluster's spec.agentEnvVars sets them.
	ChannelClusterEnvV09 AgentChannel = "cluster-env-v0.9"
	// ChannelFixedV090 (Fleet v0.9.0): the agent is built with wrangler
	// v1.1.1, which hardcodes 45s/30s/2s and reads no env: writing env would
	// only restart agents.
	ChannelFixedV090 AgentChannel = "fixed-v0.9.0"
	// ChannelNoElection (Fleet v0.10-v0.11): agents run no leader election.
	ChannelNoElection AgentChannel = "none"
)

// Channels lists every channel.
var Channels = []AgentChannel{ChannelAgentManagement, ChannelFixedV012, ChannelClusterEnvV09, ChannelFixedV090, ChannelNoElection}

// ParseChannel reads a channel name as given to the --fleet-agent-channel
// flag or recorded in the channel ConfigMap. "cluster-env-v0.12", the name
// earlier releases recorded for v0.12, reads as ChannelFixedV012.
func ParseChannel(s string) (AgentChannel, error) {
	if s == "cluster-env-v0.12" {
		return ChannelFixedV012, nil
	}
	for _, c := range Channels {
		if string(c) == s {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown fleet agent channel %q: want one of %v", s, Channels)
}

// Baseline returns the triple a fleet-agent runs with when its cluster's
// spec.agentEnvVars has no CATTLE_ELECTION_* entries, given the global agent
// triple; false when agents run no leader election.
func (c AgentChannel) Baseline(global election.Timings) (election.Timings, bool) {
	switch c {
	case ChannelAgentManagement:
		return global, true
	case ChannelFixedV012:
		return election.FleetDefaults, true
	case ChannelClusterEnvV09, ChannelFixedV090:
		return election.WranglerDefaults, true
	}
	return election.Timings{}, false
}

// GlobalReachesAgents reports whether the global agent triple changes what
// the agents run: only through FLEET_AGENT_ELECTION_* on v0.13+, and
// through each cluster's spec.agentEnvVars on v0.9.1+.
func (c AgentChannel) GlobalReachesAgents() bool {
	return c == ChannelAgentManagement || c == ChannelClusterEnvV09
}

// Explain says, for an operator, what the channel lets leasetune set.
func (c AgentChannel) Explain() string {
	switch c {
	case ChannelAgentManagement:
		return "Fleet v0.13+ renders every agent's CATTLE_ELECTION_* from FLEET_AGENT_ELECTION_* on fleet-agentmanagement: the global agent triple is set there; per-cluster overrides cannot be applied (an entry in spec.agentEnvVars would duplicate a name Fleet renders)"
	case ChannelFixedV012:
		return "Fleet v0.12 renders every agent's CATTLE_ELECTION_* hardcoded to 30s/25s/10s: neither the global agent triple nor a per-cluster override can change it without a duplicate name; Fleet v0.13+ reads the global agent triple"
	case ChannelClusterEnvV09:
		return "Fleet v0.9.1+ renders no election env: the agent triple and per-cluster overrides are written to each cluster's spec.agentEnvVars"
	case ChannelFixedV090:
		return "Fleet v0.9.0 agents hardcode wrangler's 45s/30s/2s and read no env: nothing is written for them; Fleet v0.9.1+ reads CATTLE_ELECTION_*"
	case ChannelNoElection:
		return "Fleet v0.10-v0.11 agents run no leader election: the agent triple does not apply to them"
	}
	return "unknown channel"
}

// Detection is the result of DetectChannel.
type Detection struct {
	Channel AgentChannel
	// Evidence says what decided, for logs and the state.
	Evidence string
	// Certain is false when the structure of the Deployment alone decided
	// between look-alike versions (v0.10-v0.12 render the same env).
	Certain bool
}

// DetectChannel decides the agent channel from the fleet-controller
// Deployment, in this order:
//
//  1. the tag of the fleet-controller container's image, when it is a
//     release version (vMAJOR.MINOR.PATCH, also with an @digest);
//  2. FLEET_AGENT_ELECTION_* on the fleet-agentmanagement container managed
//     by a field manager other than ours (ownManager): the chart of v0.13+
//     set them (this also catches an upgrade to v0.13+);
//  3. the channel recorded at the first detection (recorded), if any: the
//     rules below read a structure that anything can change, e.g. an
//     Update that drops the env must not turn v0.13 into v0.9;
//  4. FLEET_AGENT_ELECTION_* present: v0.13+;
//  5. CATTLE_ELECTION_* on the fleet-controller container managed by
//     another field manager (the chart of v0.10+ set them): v0.10-v0.12,
//     taken as v0.12 (not certain: v0.10-v0.11 agents run no election and
//     render the same);
//  6. otherwise: v0.9, whose chart sets no election env.
//
// A field manager keeps a list entry it created even after another one
// changed the entry's value, so rules 2 and 4 hold after our own writes.
func DetectChannel(d *appsv1.Deployment, ownManager string, recorded AgentChannel) Detection {
	var ctrl, am *corev1.Container
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		switch c.Name {
		case ControllerContainer:
			ctrl = c
		case AgentManagementContainer:
			am = c
		}
	}
	if ctrl != nil {
		if v, ok := release.FromImage(ctrl.Image); ok {
			return Detection{Channel: channelOfVersion(v), Evidence: "image " + ctrl.Image, Certain: true}
		}
	}
	if am != nil && hasAny(am.Env, election.FleetAgentPrefix) && managedByOther(d, am.Name, election.FleetAgentPrefix, ownManager) {
		return Detection{Channel: ChannelAgentManagement, Evidence: "FLEET_AGENT_ELECTION_* set by the Fleet chart", Certain: true}
	}
	// Everything below reads the structure, which anyone (an Update that
	// drops the env, our own writes) can change: it never overrides a
	// recorded detection.
	if recorded != "" {
		return Detection{Channel: recorded, Evidence: "recorded at first detection", Certain: true}
	}
	if am != nil && hasAny(am.Env, election.FleetAgentPrefix) {
		return Detection{Channel: ChannelAgentManagement, Evidence: "FLEET_AGENT_ELECTION_* present", Certain: true}
	}
	if ctrl != nil && hasAny(ctrl.Env, election.CattlePrefix) && managedByOther(d, ctrl.Name, election.CattlePrefix, ownManager) {
		return Detection{Channel: ChannelFixedV012, Evidence: "CATTLE_ELECTION_* set by the Fleet chart without FLEET_AGENT_ELECTION_*: Fleet v0.10-v0.12, taken as v0.12", Certain: false}
	}
	return Detection{Channel: ChannelClusterEnvV09, Evidence: "no election env set by the Fleet chart: Fleet v0.9 (v0.9.0 reads no env: give its image a release tag, or set the channel)", Certain: true}
}

func channelOfVersion(v release.Version) AgentChannel {
	switch {
	case v.Major > 0 || v.Minor >= 13:
		return ChannelAgentManagement
	case v.Minor == 12:
		return ChannelFixedV012
	case v.Minor >= 10:
		return ChannelNoElection
	case v.Minor == 9 && v.Patch == 0:
		return ChannelFixedV090
	}
	return ChannelClusterEnvV09
}

func hasAny(env []corev1.EnvVar, p election.EnvPrefix) bool {
	for _, e := range env {
		if p.Owns(e.Name) {
			return true
		}
	}
	return false
}

// managedByOther reports whether a field manager other than own manages
// one of the prefix's env entries of the named container.
func managedByOther(d *appsv1.Deployment, container string, p election.EnvPrefix, own string) bool {
	for _, mf := range d.ManagedFields {
		if mf.Manager == own || mf.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if err := set.FromJSON(strings.NewReader(string(mf.FieldsV1.Raw))); err != nil {
			continue
		}
		for _, name := range p.EnvNames() {
			path := fieldpath.MakePathOrDie("spec", "template", "spec", "containers",
				keyByName(container), "env", keyByName(name))
			if set.Has(path) {
				return true
			}
		}
	}
	return false
}

func keyByName(name string) fieldpath.PathElement {
	return fieldpath.PathElement{Key: &value.FieldList{{Name: "name", Value: value.NewValueInterface(name)}}}
}

// ChannelSource offers the detected agent channel
// (pkg/controllers/fleetchannel) to the controllers that write by it and to
// the ElectionStatus.
type ChannelSource interface {
	// Channel returns the agent channel, and false while it is unknown
	// (no fleet-controller Deployment seen yet and nothing recorded).
	Channel() (AgentChannel, bool)
	// OnChannelChange registers f, called without locks after the channel
	// changed. f must not block.
	OnChannelChange(f func())
}
