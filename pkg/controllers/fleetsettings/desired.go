package fleetsettings

import (
	"encoding/json"

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
// none (DESIGN.md rule 2). The agent triple goes on fleet-agentmanagement
// when the channel is fleet.ChannelAgentManagement, or when the container
// already has FLEET_AGENT_ELECTION_* entries (they are kept current, never
// removed). A triple that is not known, or does not validate, is not written.
func Desired(d *appsv1.Deployment, in Inputs) []ContainerEnv {
	if !fleet.IsTarget(d) {
		return nil
	}
	ctrlOK := in.ControllerOK && in.Controller.Validate() == nil
	agentOK := in.AgentOK && in.Agent.Validate() == nil
	var out []ContainerEnv
	for _, c := range d.Spec.Template.Spec.Containers {
		if !fleet.IsFleetContainer(c.Name) {
			continue
		}
		var env []corev1.EnvVar
		if ctrlOK && differs(c.Env, election.CattlePrefix, in.Controller) {
			env = append(env, election.CattlePrefix.Env(in.Controller)...)
		}
		if c.Name == fleet.AgentManagementContainer && agentOK &&
			(in.Channel == fleet.ChannelAgentManagement || present(c.Env, election.FleetAgentPrefix)) &&
			differs(c.Env, election.FleetAgentPrefix, in.Agent) {
			env = append(env, election.FleetAgentPrefix.Env(in.Agent)...)
		}
		if len(env) > 0 {
			out = append(out, ContainerEnv{Container: c.Name, Env: env})
		}
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

// PatchBody builds the strategic merge patch that writes changes on d:
// containers and env entries are merged by name, so entries the project
// does not own, and other containers, are untouched. The
// $setElementOrder directives keep every existing container and env entry
// where it is and put new entries after them (without them, a strategic
// merge patch reorders lists by the order of the patch). An owned entry
// that took its value from a source gets "valueFrom": null so that its
// literal value is valid.
func PatchBody(d *appsv1.Deployment, changes []ContainerEnv) ([]byte, error) {
	type obj = map[string]interface{}
	byName := map[string]ContainerEnv{}
	for _, ch := range changes {
		byName[ch.Container] = ch
	}
	var containers, containerOrder []obj
	for _, c := range d.Spec.Template.Spec.Containers {
		containerOrder = append(containerOrder, obj{"name": c.Name})
		ch, ok := byName[c.Name]
		if !ok {
			continue
		}
		fromSource := map[string]bool{}
		var order []obj
		existing := map[string]bool{}
		for _, e := range c.Env {
			if e.ValueFrom != nil {
				fromSource[e.Name] = true
			}
			if !existing[e.Name] {
				order = append(order, obj{"name": e.Name})
			}
			existing[e.Name] = true
		}
		// The patch list must follow the relative order of
		// $setElementOrder: owned entries that exist, where they are, then
		// new ones in the fixed order.
		want := map[string]string{}
		for _, e := range ch.Env {
			want[e.Name] = e.Value
		}
		var env []obj
		for _, e := range c.Env {
			if v, ok := want[e.Name]; ok {
				en := obj{"name": e.Name, "value": v}
				if fromSource[e.Name] {
					en["valueFrom"] = nil
				}
				env = append(env, en)
				delete(want, e.Name)
			}
		}
		for _, e := range ch.Env {
			if _, ok := want[e.Name]; ok {
				env = append(env, obj{"name": e.Name, "value": e.Value})
				order = append(order, obj{"name": e.Name})
			}
		}
		containers = append(containers, obj{"name": c.Name, "env": env, "$setElementOrder/env": order})
	}
	return json.Marshal(obj{"spec": obj{"template": obj{"spec": obj{
		"containers": containers, "$setElementOrder/containers": containerOrder,
	}}}})
}
