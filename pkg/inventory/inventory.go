// Package inventory reads, once, what leasetune's read-only commands and
// the Rancher UI page's API know of an installation, into a Snapshot: the
// nine Setting objects and leasetune's state ConfigMap, the Fleet agent
// channel record and the channel detected from the fleet-controller
// Deployment, the Fleet Deployments, rancher-config, the Rancher Deployment
// with its version and replicas, and the downstream clusters (the fleet,
// provisioning and management Cluster lists, each fleet Cluster routed to
// the object that is the source of its agent env, agentenv.Route).
//
// Read is the only function that makes API calls: reads only, with the
// clients it is given (so with the caller's rights), each object or list
// once. It returns every error but NotFound (an object or a kind that is not
// there is absent, and the snapshot says so), wrapped with what it read; a
// caller that can do without a part names it in Options.Optional, and a read
// of it that the API server forbids is then recorded in Snapshot.Unread,
// with its error, instead. Everything else is pure functions over a
// Snapshot.
//
// It does not decide anything: what the controllers would write is
// pkg/plan's (over a Snapshot), what they do is theirs, from their own
// informers; it does not watch, cache or write.
package inventory

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
)

// Part is one thing Read reads; Parts combine with |.
type Part uint

const (
	// Settings are the Setting objects of the nine settings
	// (settings.Registry), from management.cattle.io/v3.
	Settings Part = 1 << iota
	// State is leasetune's state ConfigMap (settings.DefaultStateName) in
	// Options.Namespace.
	State
	// ChannelRecord is leasetune's record of the Fleet agent channel
	// (fleetenv.ChannelConfigMapName) in Options.Namespace.
	ChannelRecord
	// FleetDeployments are the Deployments in Options.FleetNamespace; the
	// channel is detected from the fleet-controller one among them.
	FleetDeployments
	// RancherConfig is rancher-config (fleetenv.RancherConfigName) in
	// Options.RancherNamespace.
	RancherConfig
	// RancherDeployment is the Rancher Deployment (Options.RancherDeployment
	// in Options.RancherNamespace), its version and replicas.
	RancherDeployment
	// Clusters are the fleet, provisioning and management Cluster lists,
	// each fleet Cluster routed (agentenv.Route).
	Clusters
	// ClusterCount is the number of fleet Clusters: from Clusters when
	// that is read, else from a list of one (the API server's
	// remainingItemCount), so that counting 10,000 clusters does not read
	// them.
	ClusterCount
)

// All is every part.
const All = Settings | State | ChannelRecord | FleetDeployments | RancherConfig | RancherDeployment | Clusters | ClusterCount

// parts lists the parts in the order Read reads them.
var parts = []Part{Settings, State, ChannelRecord, FleetDeployments, RancherConfig, RancherDeployment, Clusters, ClusterCount}

var partNames = map[Part]string{
	Settings: "settings", State: "state", ChannelRecord: "channel-record", FleetDeployments: "fleet-deployments",
	RancherConfig: "rancher-config", RancherDeployment: "rancher-deployment", Clusters: "clusters", ClusterCount: "cluster-count",
}

// String names the parts of p, "+"-separated, in Read's order ("" for none).
func (p Part) String() string {
	var out []string
	for _, q := range parts {
		if p&q != 0 {
			out = append(out, partNames[q])
		}
	}
	return strings.Join(out, "+")
}

// Options say where Read reads and what.
type Options struct {
	// Namespace is leasetune's (its state ConfigMaps), FleetNamespace the
	// Fleet system namespace, RancherNamespace Rancher's (rancher-config
	// and the Rancher Deployment), as the controller's flags name them.
	Namespace, FleetNamespace, RancherNamespace string
	// RancherDeployment names the Rancher Deployment ("":
	// rancher.DefaultDeployment).
	RancherDeployment string
	// RancherVersion, when Known, replaces the version the Rancher
	// Deployment's image shows (the --rancher-version flag).
	RancherVersion rancher.Version
	// ChannelOverride, when set, is the Fleet agent channel instead of the
	// detected one (the --fleet-agent-channel flag).
	ChannelOverride fleet.AgentChannel
	// Parts are what to read (0: All). Clusters with RancherVersion not
	// Known also reads RancherDeployment: the routing follows the version.
	Parts Part
	// Optional are the parts the caller can do without: a read of one of
	// them that the API server forbids (403) is recorded in
	// Snapshot.Unread instead of failing Read. Any other error is returned.
	Optional Part
	// SettingsByName reads the nine Settings with one GET each (the get
	// right on them suffices) instead of one LIST.
	SettingsByName bool
}

// Snapshot is what Read found. A part not read (not in Options.Parts, or
// in Unread) is empty, as an absent one is.
type Snapshot struct {
	// Options are the options Read was given, its defaults filled in.
	Options Options
	// Settings are the Setting objects of the nine settings that exist
	// (objects of other names are left out).
	Settings []v3.Setting
	// State is leasetune's state ConfigMap, nil when there is none.
	State *corev1.ConfigMap
	// ChannelRecord is leasetune's channel record, nil when there is none.
	ChannelRecord *corev1.ConfigMap
	// Channel is the Fleet agent channel ("" when unknown) and Evidence
	// what decided it: Options.ChannelOverride ("--fleet-agent-channel");
	// else fleet.DetectChannel on the fleet-controller Deployment, with
	// the recorded channel; else the recorded channel ("recorded: " and
	// the record's evidence).
	Channel  fleet.AgentChannel
	Evidence string
	// FleetDeployments are the Deployments in the Fleet namespace.
	FleetDeployments []appsv1.Deployment
	// RancherConfig is rancher-config, nil when there is none.
	RancherConfig *corev1.ConfigMap
	// Rancher is the Rancher Deployment, nil when there is none;
	// RancherReplicas its spec.replicas (1 when unset, as Kubernetes
	// defaults it; 0 without a Deployment). RancherVersion is
	// Options.RancherVersion when Known, else the version its image shows
	// (rancher.Detect; not Known without one).
	Rancher         *appsv1.Deployment
	RancherReplicas int
	RancherVersion  rancher.Version
	// FleetClusterCount is the number of fleet Clusters (read with
	// ClusterCount or Clusters).
	FleetClusterCount int
	// FleetClusters, ProvisioningClusters and ManagementClusters are the
	// three lists (empty where the kind is not served: no Fleet, no
	// Rancher).
	FleetClusters, ProvisioningClusters, ManagementClusters []unstructured.Unstructured
	// Clusters are the fleet Clusters, in list order, routed.
	Clusters []Cluster
	// Unread are the optional parts whose read the API server forbade,
	// with the error (it names what was read).
	Unread map[Part]error
	// Absent are the parts that are not there (NotFound): for one object
	// (State, ChannelRecord, RancherConfig, RancherDeployment) the object;
	// for Settings, ClusterCount and Clusters the kind (for Clusters the
	// fleet Cluster kind).
	Absent Part
}

// Cluster is one fleet Cluster and the object its agent env is read from
// and written to.
type Cluster struct {
	// Fleet is the fleet Cluster (an element of Snapshot.FleetClusters).
	Fleet *unstructured.Unstructured
	// Routing is agentenv.Route's answer, valid when Err is nil; Err says
	// why the cluster cannot be routed (its source is not there yet).
	Routing agentenv.Routing
	Err     error
}
