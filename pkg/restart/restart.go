// Package restart names what leasetune's writes restart: the kinds that
// plan and the ElectionStatus count, that the controllers record in the
// restart ledger (metric leasetune_restarts_total{kind}), and the words
// each is said with.
package restart

import "strings"

// Kind is one kind of restart a write causes.
type Kind string

const (
	// DeploymentRollout is a rollout of a Fleet Deployment.
	DeploymentRollout Kind = "deployment-rollout"
	// RancherRollout is a rollout of every Rancher replica.
	RancherRollout Kind = "rancher-rollout"
	// FleetAgent is a redeploy of one cluster's fleet-agent.
	FleetAgent Kind = "fleet-agent"
	// ClusterAgent is a redeploy of one Rancher-managed cluster's
	// cattle-cluster-agent.
	ClusterAgent Kind = "cattle-cluster-agent"
	// NodePlan is one cluster whose nodes' system-agent Plan runs again: a
	// Rancher-provisioned one, or an imported RKE2/K3s one with day-2
	// operations beside Rancher v2.15+.
	NodePlan Kind = "node-plan"
)

// Kinds are every kind, in the order they are reported.
var Kinds = []Kind{DeploymentRollout, RancherRollout, FleetAgent, ClusterAgent, NodePlan}

// Set is the kinds one write restarts.
type Set []Kind

// Has reports whether s holds k.
func (s Set) Has(k Kind) bool {
	for _, x := range s {
		if x == k {
			return true
		}
	}
	return false
}

// OfCluster is what a write of a cluster object's agent env restarts: its
// fleet-agent; its cattle-cluster-agent where Rancher manages the cluster;
// and the system agent on every node where its Plan is fed from that
// object (such a cluster is always Rancher-managed).
func OfCluster(rancherManaged, replans bool) Set {
	s := Set{FleetAgent}
	if rancherManaged {
		s = append(s, ClusterAgent)
	}
	if replans {
		s = append(s, NodePlan)
	}
	return s
}

// String says in words what a cluster's set (OfCluster) restarts; any
// other set is its kinds' names, joined with commas.
func (s Set) String() string {
	switch {
	case s.Has(NodePlan):
		return "fleet-agent, cattle-cluster-agent and the system agent on every node"
	case s.Has(ClusterAgent):
		return "fleet-agent and cattle-cluster-agent"
	case len(s) == 1 && s[0] == FleetAgent:
		return "fleet-agent"
	}
	names := make([]string, len(s))
	for i, k := range s {
		names[i] = string(k)
	}
	return strings.Join(names, ",")
}
