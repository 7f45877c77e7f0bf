// Package rancher holds what this project knows about Rancher's own
// behaviour that decides where it may write: which Rancher version runs
// (from the image of the Rancher Deployment), which cluster object is the
// source of a cluster's agent env in that version, and whether
// cattle-cluster-agent reads CATTLE_ELECTION_*. Each fact cites the
// rancher/rancher file at the release tags it was read from.
package rancher

import (
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"leasetune.io/leasetune/pkg/release"
)

// Names of the Rancher Deployment and its container as Rancher's chart
// renders them (rancher/rancher chart/templates/deployment.yaml: the
// Deployment is named after the release, "rancher" by default, and the
// container "rancher").
const (
	DefaultNamespace  = "cattle-system"
	DefaultDeployment = "rancher"
	Container         = "rancher"
)

// legacyName is Rancher's test for a legacy cluster: rancher/rancher
// v2.8.0-v2.12.x pkg/controllers/provisioningv2/cluster/controller.go,
// mgmtNameRegexp used by isLegacyCluster.
var legacyName = regexp.MustCompile("^(c-[a-z0-9]{5}|local)$")

// IsLegacyName reports whether a management Cluster name is legacy
// (c-xxxxx, local): the management Cluster is then the source and Rancher
// generates the provisioning Cluster from it, without env
// (generateProvisioningClusterFromLegacyCluster).
func IsLegacyName(name string) bool { return legacyName.MatchString(name) }

// Version is the Rancher version leasetune runs beside; Known is false when
// it could not be told.
type Version struct {
	release.Version
	Known bool
}

// ContainerIndex is the index of the rancher container (Container) in d's
// pod template, or -1.
func ContainerIndex(d *appsv1.Deployment) int {
	for i, c := range d.Spec.Template.Spec.Containers {
		if c.Name == Container {
			return i
		}
	}
	return -1
}

// Detect reads the Rancher version from the release tag of the rancher
// container's image in the Rancher Deployment (rancher/rancher:v2.11.3).
func Detect(d *appsv1.Deployment) (Version, bool) {
	if d == nil {
		return Version{}, false
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == Container {
			if v, ok := release.FromImage(c.Image); ok {
				return Version{Version: v, Known: true}, true
			}
		}
	}
	return Version{}, false
}

// Parse reads a version given as vMAJOR.MINOR.PATCH (the --rancher-version
// flag).
func Parse(s string) (Version, bool) {
	v, ok := release.Parse(s)
	return Version{Version: v, Known: ok}, ok
}

// ImportedSourceIsManagement reports whether, for an imported (no
// spec.rkeConfig), non-legacy cluster, the management Cluster is the source
// of its agent env. From v2.11.0, createNewCluster in
// pkg/controllers/provisioningv2/cluster/controller.go calls
// updateImportedCluster once the management Cluster exists, which
// generates the management Cluster from itself ("the management cluster
// remains the source of truth for imported clusters after cluster
// creation"): a direct edit stays and the provisioning Cluster's env no
// longer flows. v2.8.0-v2.10.x generate it from the provisioning Cluster,
// which is then the source. An unknown version is taken as before v2.11:
// writing the provisioning Cluster of a v2.11+ Rancher only has no effect,
// while writing the management Cluster of an older one fights Rancher.
func (v Version) ImportedSourceIsManagement() bool {
	return v.Known && v.AtLeast(2, 11, 0)
}

// ClusterAgentReadsElectionEnv reports whether cattle-cluster-agent reads
// CATTLE_ELECTION_* for its lock kube-system/cattle-controllers: Rancher
// 2.8.3+ builds with wrangler/v2 (and 2.9+ wrangler/v3), whose pkg/leader
// reads them; 2.8.0-2.8.2 build with wrangler v1, which reads none
// (rancher/rancher go.mod at those tags; pkg/wrangler/context.go). An
// unknown version is taken as a reader.
func (v Version) ClusterAgentReadsElectionEnv() bool {
	return !v.Known || v.AtLeast(2, 8, 3)
}

// ImportedPlansReadAgentEnv reports whether, beside this Rancher, the
// management Cluster's spec.agentEnvVars of an imported RKE2/K3s cluster
// with day-2 operations goes into system-agent's upgrade Plans, so that a
// write of it re-runs a job on every node of that cluster: v2.15.0+
// (rancher/rancher v2.15.0 pkg/controllers/management/systemagent/
// controller.go: installer :1147-1153 renders the Plans from planEnv
// :1196-1199, every spec.agentEnvVars entry but CATTLE_ROLE_NONE; the
// Plans are re-applied when their hash changes, :307-335). Before v2.15
// only provisioned clusters' Plans carry the env (v2.14.4 pkg/controllers/
// capr/managesystemagent/managesystemagent.go:246-249). An unknown version
// is taken as one that does: a re-plan counted that does not happen costs
// nothing, one that happens uncounted restarts every node unannounced.
func (v Version) ImportedPlansReadAgentEnv() bool {
	return !v.Known || v.AtLeast(2, 15, 0)
}

// Facts of a management Cluster that decide Rancher v2.15's imported
// day-2 operations (rancher/rancher v2.15.0).
const (
	// ProviderLabel: pkg/controllers/dashboard/kubernetesprovider/
	// kubernetesprovider.go:14.
	ProviderLabel = "provider.cattle.io"
	// OperationsEnabledAnnotation: systemagent/controller.go:54.
	OperationsEnabledAnnotation = "rancher.io/operations-enabled"
	// AdministratedAnnotation: systemagent/controller.go:164.
	AdministratedAnnotation = "provisioning.cattle.io/administrated"
)

// IsPlanBookkeeping reports whether the annotation key is one Rancher
// writes on a cluster object as a consequence of its agent env, to track
// the system-agent upgrade Plans it applied (rancher/rancher v2.15.0
// pkg/controllers/management/systemagent/controller.go:53-57: the applied
// hash, stored by an Update of the management Cluster after every change
// of its env, :354-370, and the operations.cattle.io/imported-* disable
// state; pkg/controllers/capr/managesystemagent/managesystemagent.go:48,
// the provisioned clusters' applied hash). A change of one of them is not
// a change "otherwise" for the revert guard.
func IsPlanBookkeeping(key string) bool {
	switch key {
	case "management.cattle.io/applied-system-agent-upgrader-hash", "rke.cattle.io/applied-system-agent-upgrader-hash":
		return true
	}
	return strings.HasPrefix(key, "operations.cattle.io/imported-")
}

// ImportedDay2Ops reports whether Rancher v2.15's imported-system-agent
// handler renders upgrade Plans for the management Cluster name with
// these labels, annotations and status.driver
// (systemagent/controller.go onChange :218-241): shouldInstall :155-183
// (not "local", not administrated, driver k3s or rke2 or the provider
// label rke2 or k3s) and OperationsEnabledForCluster :72-91 (the
// annotation "true" or "false", else the setting
// imported-cluster-day2-ops-enabled, default "true": pkg/settings/
// setting.go:471; the feature imported-day-2-ops is on by default:
// pkg/features/feature.go:201-205). leasetune reads neither the setting nor
// the feature: without the annotation "false" day-2 operations are taken
// as on, their defaults.
func ImportedDay2Ops(name string, labels, annotations map[string]string, driver string) bool {
	if name == "local" || annotations[AdministratedAnnotation] == "true" {
		return false
	}
	switch {
	case driver == "k3s", driver == "rke2", labels[ProviderLabel] == "rke2", labels[ProviderLabel] == "k3s":
	default:
		return false
	}
	return annotations[OperationsEnabledAnnotation] != "false"
}
