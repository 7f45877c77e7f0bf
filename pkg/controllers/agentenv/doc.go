// Package agentenv propagates the effective agent triple, with per-cluster
// override annotations, to each downstream cluster's agent env:
// spec.agentEnvVars, which Fleet appends to the fleet-agent container (a
// later duplicate name wins for that cluster).
//
// For every fleet.cattle.io/v1alpha1 Cluster it decides (Route) which object
// holds the override annotations and which object's spec.agentEnvVars to
// write: the fleet Cluster itself for standalone Fleet; the
// provisioning.cattle.io/v1 Cluster for RKE2/K3s clusters Rancher provisions;
// the management.cattle.io/v3 Cluster for imported and legacy clusters. It
// then computes the desired list in a pure function (Decide): the three
// CATTLE_ELECTION_* entries only where the cluster's agent would otherwise
// run another triple (fleet.AgentChannel.Baseline), after every entry it
// does not own, all three or none.
//
// It owns an entry only where it wrote it, recorded in the annotation
// RecordAnnotation on the written object; any other entry with one of the
// three names belongs to someone else, and the cluster is then left alone
// and reported. Writes are JSON merge patches with the resourceVersion read,
// retried from the fresh object on a conflict, so a concurrent edit is
// never lost.
package agentenv
