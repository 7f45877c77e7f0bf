// Package agentenv propagates the effective agent triple, with per-cluster
// override annotations, to each downstream cluster's agent env:
// spec.agentEnvVars, which Fleet appends to the fleet-agent container (and,
// on clusters Rancher manages, Rancher to cattle-cluster-agent's).
//
// For every fleet.cattle.io/v1alpha1 Cluster it decides (Route) which object
// is the source of the cluster's agent env: its override annotations apply
// and its spec.agentEnvVars is written. That is
//
//   - the fleet Cluster itself for standalone Fleet;
//   - the provisioning.cattle.io/v1 Cluster for RKE2/K3s clusters Rancher
//     provisions, and for imported clusters beside Rancher before v2.11;
//   - the management.cattle.io/v3 Cluster for imported clusters beside
//     Rancher v2.11 and later (rancher.Version.ImportedSourceIsManagement)
//     and for legacy clusters (c-xxxxx, local).
//
// Rancher generates the other objects from the source, so they are never
// written. The desired list comes from a pure function (Decide): the three
// CATTLE_ELECTION_* entries only where the cluster's agent would otherwise
// run another triple (fleet.AgentChannel.Baseline), after every entry it
// does not own, all three or none.
//
// It owns an entry only where it wrote it, recorded in the annotation
// RecordAnnotation on the written object; any other entry with one of the
// three names belongs to someone else, and the cluster is then left alone
// and reported in StatusAnnotation. Each sync gathers from the informers'
// caches, decides (planSync), makes at most one write, a JSON merge patch
// with the resourceVersion read (decided again from a fresh read after a
// conflict, so a concurrent edit is never lost), and then reports, once:
// Events, metrics and logs. A global change of the triple, and the first
// pass after a start, are summed up in one Event on the agent Settings.
//
// It does not write the Fleet Deployments (pkg/controllers/fleetsettings)
// nor the Rancher Deployment (pkg/controllers/rancherenv).
package agentenv
