package inventory

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// StateData is the data of leasetune's state ConfigMap (nil when there is
// none, or it was not read).
func (s *Snapshot) StateData() map[string]string {
	if s.State == nil {
		return nil
	}
	return s.State.Data
}

// Triples are the components' triples as the settings and leasetune's
// state say (settings.Snapshot); the error is the state's, when its data
// does not decode (the triples are then computed without it).
func (s *Snapshot) Triples() (map[settings.Component]settings.ComponentStatus, error) {
	return settings.Snapshot(s.Settings, s.StateData())
}

// FleetDeployment returns the Deployment name in the Fleet namespace (nil
// when there is none).
func (s *Snapshot) FleetDeployment(name string) *appsv1.Deployment {
	for i := range s.FleetDeployments {
		if s.FleetDeployments[i].Name == name {
			return &s.FleetDeployments[i]
		}
	}
	return nil
}

// FleetLocks counts the Fleet controller processes, one leader-election
// lock each: the Fleet containers (fleet.IsFleetContainer) of the target
// Deployments (fleet.IsTarget).
func (s *Snapshot) FleetLocks() int {
	n := 0
	for i := range s.FleetDeployments {
		if d := &s.FleetDeployments[i]; fleet.IsTarget(d) {
			for _, c := range d.Spec.Template.Spec.Containers {
				if fleet.IsFleetContainer(c.Name) {
					n++
				}
			}
		}
	}
	return n
}

// ClusterEnvs are the fleet Clusters' agent env and overrides, as
// agentenv.JudgeGlobal judges them (agentenv.ClusterEnvOf).
func (s *Snapshot) ClusterEnvs() []agentenv.ClusterEnv {
	var out []agentenv.ClusterEnv
	for i := range s.FleetClusters {
		out = append(out, agentenv.ClusterEnvOf(&s.FleetClusters[i]))
	}
	return out
}

// Missing returns the error of the first part of p, in Read's order, that
// Read recorded in Unread instead of returning it (nil: none).
func (s *Snapshot) Missing(p Part) error {
	for _, q := range parts {
		if err := s.Unread[q]; p&q != 0 && err != nil {
			return err
		}
	}
	return nil
}

// Route routes each fleet Cluster with agentenv.Route for the Rancher
// version rv: its provisioning Cluster is the one whose status.clusterName
// is its management.cattle.io/cluster-name label, its management Cluster
// the one of that name. A cluster that cannot be routed keeps the error.
// The Clusters point into fleets.
func Route(fleets, provs, mgmts []unstructured.Unstructured, rv rancher.Version) []Cluster {
	provBy, mgmtBy := byClusterName(provs), map[string]*unstructured.Unstructured{}
	for i := range mgmts {
		mgmtBy[mgmts[i].GetName()] = &mgmts[i]
	}
	out := make([]Cluster, 0, len(fleets))
	for i := range fleets {
		fc := &fleets[i]
		name := fc.GetLabels()[rancher.ClusterNameLabel]
		rt, err := agentenv.Route(fc, provBy[name], mgmtBy[name], rv)
		out = append(out, Cluster{Fleet: fc, Routing: rt, Err: err})
	}
	return out
}

// ProvisioningByClusterName returns the provisioning Clusters by their
// status.clusterName (the management Cluster's name), as Route pairs them.
func (s *Snapshot) ProvisioningByClusterName() map[string]*unstructured.Unstructured {
	return byClusterName(s.ProvisioningClusters)
}

func byClusterName(provs []unstructured.Unstructured) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for i := range provs {
		if n, _, _ := unstructured.NestedString(provs[i].Object, "status", "clusterName"); n != "" {
			out[n] = &provs[i]
		}
	}
	return out
}

// JudgeAgents judges, as the fleetsettings controller does before it
// writes, a change of the agent triple on fleet-agentmanagement to
// in.Agent by what every v0.13+ agent would run (agentenv.JudgeGlobal,
// over the snapshot's fleet Clusters): an error names the clusters whose
// fleet-agent would run a triple client-go refuses; nil on other
// channels, or when fleet-agentmanagement already holds in.Agent.
func (s *Snapshot) JudgeAgents(in fleetenv.Inputs) error {
	if in.Channel != fleet.ChannelAgentManagement {
		return nil
	}
	var cur election.Timings
	var found bool
	if d := s.FleetDeployment(fleet.ControllerDeployment); d != nil {
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == fleet.AgentManagementContainer {
				cur, found, _ = election.FleetAgentPrefix.FromEnv(c.Env)
			}
		}
	}
	if !found || cur == in.Agent {
		return nil
	}
	if broken := agentenv.JudgeGlobal(cur, in.Agent, in.Channel, s.ClusterEnvs()); len(broken) > 0 {
		return agentenv.BrokenError(in.Agent, broken)
	}
	return nil
}
