package fleet

import (
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/structured-merge-diff/v4/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v4/value"

	"leasetune.io/leasetune/pkg/election"
)

// AgentChannel is the way downstream fleet-agents get their leader-election
// timings, which depends on the Fleet version.
type AgentChannel string

const (
	// ChannelAgentManagement (Fleet v0.13+): fleet-agentmanagement reads
	// FLEET_AGENT_ELECTION_* and renders every agent with those timings.
	ChannelAgentManagement AgentChannel = "agentmanagement"
	// ChannelClusterEnvV012 (Fleet v0.12): agents get CATTLE_ELECTION_*
	// hardcoded to 30s/25s/10s; a cluster's spec.agentEnvVars overrides it.
	ChannelClusterEnvV012 AgentChannel = "cluster-env-v0.12"
	// ChannelClusterEnvV09 (Fleet v0.9): agents get no env, so wrangler's
	// 45s/30s/2s; a cluster's spec.agentEnvVars overrides it.
	ChannelClusterEnvV09 AgentChannel = "cluster-env-v0.9"
	// ChannelNoElection (Fleet v0.10-v0.11): agents run no leader election.
	ChannelNoElection AgentChannel = "none"
)

// Channels lists every channel.
var Channels = []AgentChannel{ChannelAgentManagement, ChannelClusterEnvV012, ChannelClusterEnvV09, ChannelNoElection}

// ParseChannel reads a channel name as given to the --fleet-agent-channel flag.
func ParseChannel(s string) (AgentChannel, error) {
	for _, c := range Channels {
		if string(c) == s {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown fleet agent channel %q: want one of %v", s, Channels)
}

// Baseline returns the triple an agent runs with when its cluster's
// spec.agentEnvVars has no CATTLE_ELECTION_* entries, given the global agent
// triple; false when agents run no leader election.
func (c AgentChannel) Baseline(global election.Timings) (election.Timings, bool) {
	switch c {
	case ChannelAgentManagement:
		return global, true
	case ChannelClusterEnvV012:
		return election.FleetDefaults, true
	case ChannelClusterEnvV09:
		return election.WranglerDefaults, true
	}
	return election.Timings{}, false
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
		if major, minor, ok := releaseVersion(ctrl.Image); ok {
			return Detection{Channel: channelOfVersion(major, minor), Evidence: "image " + ctrl.Image, Certain: true}
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
		return Detection{Channel: ChannelClusterEnvV012, Evidence: "CATTLE_ELECTION_* set by the Fleet chart without FLEET_AGENT_ELECTION_*: Fleet v0.10-v0.12, taken as v0.12", Certain: false}
	}
	return Detection{Channel: ChannelClusterEnvV09, Evidence: "no election env set by the Fleet chart: Fleet v0.9", Certain: true}
}

func channelOfVersion(major, minor int) AgentChannel {
	switch {
	case major > 0 || minor >= 13:
		return ChannelAgentManagement
	case minor == 12:
		return ChannelClusterEnvV012
	case minor >= 10:
		return ChannelNoElection
	}
	return ChannelClusterEnvV09
}

// releaseVersion reads vMAJOR.MINOR.PATCH (with an optional suffix such as
// -rc.1) from an image reference's tag.
func releaseVersion(image string) (major, minor int, ok bool) {
	if at := strings.Index(image, "@"); at >= 0 {
		image = image[:at] // repo:tag@sha256:digest
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return 0, 0, false
	}
	tag := strings.TrimPrefix(image[i+1:], "v")
	if tag == image[i+1:] {
		return 0, 0, false
	}
	parts := strings.SplitN(tag, ".", 3)
	if len(parts) != 3 {
		return 0, 0, false
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(parts[0])
	minor, err2 = strconv.Atoi(parts[1])
	patch := parts[2]
	if j := strings.IndexAny(patch, "-+"); j >= 0 {
		patch = patch[:j]
	}
	_, err3 := strconv.Atoi(patch)
	return major, minor, err1 == nil && err2 == nil && err3 == nil
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
