package fleet

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

// DefaultNamespace is the Fleet system namespace Rancher installs Fleet into.
const DefaultNamespace = "cattle-fleet-system"

// ShardIDLabel marks the pods of a sharded Fleet Deployment.
const ShardIDLabel = "fleet.cattle.io/shard-id"

// Deployment names of the Fleet chart.
const (
	ControllerDeployment = "fleet-controller"
	GitjobDeployment     = "gitjob"
	HelmopsDeployment    = "helmops"
)

// Container names that run a Fleet process reading CATTLE_ELECTION_*.
const (
	ControllerContainer      = "fleet-controller"
	CleanupContainer         = "fleet-cleanup"
	AgentManagementContainer = "fleet-agentmanagement"
	GitjobContainer          = "gitjob"
	HelmopsContainer         = "helmops"
)

var fleetContainers = map[string]bool{
	ControllerContainer: true, CleanupContainer: true, AgentManagementContainer: true,
	GitjobContainer: true, HelmopsContainer: true,
}

// IsTarget reports whether d is a Deployment of the Fleet chart whose
// containers read CATTLE_ELECTION_*: fleet-controller, gitjob and helmops,
// and their shards (fleet-controller-shard-*, gitjob-shard-*,
// helmops-shard-*) whose pod template carries the shard-id label.
func IsTarget(d *appsv1.Deployment) bool {
	switch d.Name {
	case ControllerDeployment, GitjobDeployment, HelmopsDeployment:
		return true
	}
	for _, base := range []string{ControllerDeployment, GitjobDeployment, HelmopsDeployment} {
		if strings.HasPrefix(d.Name, base+"-shard-") {
			_, labelled := d.Spec.Template.Labels[ShardIDLabel]
			return labelled
		}
	}
	return false
}

// IsFleetContainer reports whether a container of a target Deployment runs
// a Fleet process that reads CATTLE_ELECTION_*.
func IsFleetContainer(name string) bool { return fleetContainers[name] }
