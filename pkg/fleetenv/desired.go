package fleetenv

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

// Inputs is what decides the env of the Fleet Deployments.
type Inputs struct {
	// Controller is the controller triple; ControllerOK is false when none
	// is known (then nothing is written).
	Controller   election.Timings
	ControllerOK bool
	// Agent is the agent triple; AgentOK is false when none is known.
	Agent   election.Timings
	AgentOK bool
	// Channel is the detected Fleet agent channel.
	Channel fleet.AgentChannel
}

// ContainerEnv is the set of owned env entries to write on one container.
type ContainerEnv struct {
	Container string
	Env       []corev1.EnvVar
}

// Desired returns the owned env entries that must be written on Deployment
// d, per container, or nil when every owned entry already holds the right
// duration. For each container and prefix it writes all three entries or
// none (docs/design.md, rule 2). The agent triple goes on fleet-agentmanagement
// when the channel is fleet.ChannelAgentManagement, or when the container
// already has FLEET_AGENT_ELECTION_* entries (they are kept current, never
// removed). A triple that is not known, or does not validate, is not written.
func Desired(d *appsv1.Deployment, in Inputs) []ContainerEnv {
	ctrlOK := in.ControllerOK && in.Controller.Validate() == nil
	agentOK := in.AgentOK && in.Agent.Validate() == nil
	var out []ContainerEnv
	for _, c := range d.Spec.Template.Spec.Containers {
		var env []corev1.EnvVar
		for _, p := range Prefixes(d, c, in.Channel) {
			t, ok := in.Controller, ctrlOK
			if p == election.FleetAgentPrefix {
				t, ok = in.Agent, agentOK
			}
			if ok && differs(c.Env, p, t) {
				env = append(env, p.Env(t)...)
			}
		}
		if len(env) > 0 {
			out = append(out, ContainerEnv{Container: c.Name, Env: env})
		}
	}
	return out
}

// Prefixes are the env prefixes leasetune keeps in container c of d on
// channel ch: CATTLE_ELECTION_* (the controller triple) in every Fleet
// container of a target Deployment, and FLEET_AGENT_ELECTION_* (the agent
// triple) in fleet-agentmanagement on the agentmanagement channel, or
// where they are already set (kept current, never removed).
func Prefixes(d *appsv1.Deployment, c corev1.Container, ch fleet.AgentChannel) []election.EnvPrefix {
	if !fleet.IsTarget(d) || !fleet.IsFleetContainer(c.Name) {
		return nil
	}
	out := []election.EnvPrefix{election.CattlePrefix}
	if c.Name == fleet.AgentManagementContainer && (ch == fleet.ChannelAgentManagement || present(c.Env, election.FleetAgentPrefix)) {
		out = append(out, election.FleetAgentPrefix)
	}
	return out
}

// differs reports whether env does not give the prefix's three names the
// durations of t: a name is missing, takes its value from a source, does
// not parse, parses to another duration, or occurs twice with different
// values (every occurrence must be right, whichever one a reader takes).
func differs(env []corev1.EnvVar, p election.EnvPrefix, t election.Timings) bool {
	seen := map[string]bool{}
	for _, e := range env {
		if !p.Owns(e.Name) {
			continue
		}
		seen[e.Name] = true
		if e.ValueFrom != nil {
			return true
		}
		for _, f := range election.Fields {
			if p.EnvName(f) != e.Name {
				continue
			}
			d, err := election.ParseDuration(f, e.Value)
			if err != nil || d != t.Get(f) {
				return true
			}
		}
	}
	return len(seen) != 3
}

func present(env []corev1.EnvVar, p election.EnvPrefix) bool {
	for _, e := range env {
		if p.Owns(e.Name) {
			return true
		}
	}
	return false
}

// PatchBody builds the JSON patch (RFC 6902) that writes changes on d.
// Every occurrence of an owned name gets the value (a container runs the
// last one, so a duplicate left by the chart's extraEnv must not survive
// with another value); an entry that took its value from a source loses
// valueFrom; a missing name is appended after the existing entries. Nothing
// else is touched, and positions stay. Each touched container's name and
// whole env list are tested first against d, the cached copy the change was
// computed from: if anyone changed that list since, the patch fails and is
// computed again from the fresh copy, so it never combines with an entry
// it has not seen.
func PatchBody(d *appsv1.Deployment, changes []ContainerEnv) ([]byte, error) {
	type op = map[string]interface{}
	var ops []op
	for _, ch := range changes {
		ci := -1
		for i, c := range d.Spec.Template.Spec.Containers {
			if c.Name == ch.Container {
				ci = i
			}
		}
		if ci < 0 {
			return nil, fmt.Errorf("deployment %s/%s has no container %q", d.Namespace, d.Name, ch.Container)
		}
		base := fmt.Sprintf("/spec/template/spec/containers/%d", ci)
		env := d.Spec.Template.Spec.Containers[ci].Env
		var seen interface{} // null when the container has no env
		if env != nil {
			seen = env
		}
		ops = append(ops,
			op{"op": "test", "path": base + "/name", "value": ch.Container},
			op{"op": "test", "path": base + "/env", "value": seen})
		if env == nil {
			var entries []op
			for _, e := range ch.Env {
				entries = append(entries, op{"name": e.Name, "value": e.Value})
			}
			ops = append(ops, op{"op": "add", "path": base + "/env", "value": entries})
			continue
		}
		for _, e := range ch.Env {
			found := false
			for i, cur := range env {
				if cur.Name != e.Name {
					continue
				}
				found = true
				at := fmt.Sprintf("%s/env/%d", base, i)
				if cur.ValueFrom != nil {
					ops = append(ops, op{"op": "remove", "path": at + "/valueFrom"})
				}
				// add sets a member whether or not it exists (replace needs it).
				ops = append(ops, op{"op": "add", "path": at + "/value", "value": e.Value})
			}
			if !found {
				ops = append(ops, op{"op": "add", "path": base + "/env/-", "value": op{"name": e.Name, "value": e.Value}})
			}
		}
	}
	return json.Marshal(ops)
}
