package fleet

import "k8s.io/apimachinery/pkg/runtime/schema"

// ClusterGVR is Fleet's Cluster kind, one per downstream cluster: its
// spec.agentEnvVars are appended to the cluster's fleet-agent container
// (agent.go). Rancher generates it for the clusters it manages
// (rancher.ClusterNameLabel names their management Cluster).
var ClusterGVR = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "clusters"}
