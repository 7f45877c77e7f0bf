package rancher

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The cluster kinds Rancher keeps for each downstream cluster besides
// Fleet's Cluster (fleet.ClusterGVR): which of them is the source of the
// cluster's agent env depends on the cluster and the Rancher version
// (ImportedSourceIsManagement, IsLegacyName).
var (
	// ProvisioningClusterGVR is provisioning.cattle.io/v1 clusters: RKE2/K3s
	// clusters Rancher provisions (spec.rkeConfig) and imported ones, in
	// the fleet workspace's namespace.
	ProvisioningClusterGVR = schema.GroupVersionResource{Group: "provisioning.cattle.io", Version: "v1", Resource: "clusters"}
	// ManagementClusterGVR is management.cattle.io/v3 clusters, cluster
	// scoped, named c-m-xxxxxxxx (legacy: c-xxxxx, local).
	ManagementClusterGVR = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "clusters"}
)

// ClusterNameLabel, on a fleet Cluster that Rancher generates, names its
// management Cluster; a fleet Cluster without it is standalone Fleet's.
const ClusterNameLabel = "management.cattle.io/cluster-name"

// ManagementNameOf returns a provisioning Cluster's status.clusterName:
// the name of its management Cluster ("" until Rancher has set it).
func ManagementNameOf(prov *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(prov.Object, "status", "clusterName")
	return s
}

// HasRKEConfig reports whether a provisioning Cluster has spec.rkeConfig:
// an RKE2/K3s cluster Rancher provisions, rather than an imported one.
func HasRKEConfig(prov *unstructured.Unstructured) bool {
	v, found, _ := unstructured.NestedFieldNoCopy(prov.Object, "spec", "rkeConfig")
	return found && v != nil
}
