// Package agentenv is the domain of a downstream cluster's agent env,
// spec.agentEnvVars, which Fleet appends to the fleet-agent container
// (and, on clusters Rancher manages, Rancher to cattle-cluster-agent's):
// pure functions of the cluster objects, the global agent triple and the
// Fleet agent channel, with no client, informer or queue. The agentenv
// controller (pkg/controllers/agentenv) converges the clusters with it;
// the admission webhook, the ElectionStatus, `leasetune plan` and
// `cleanup` and the inventory read the same rules from here.
//
// For every fleet.cattle.io/v1alpha1 Cluster, Route decides which object
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
// written. FactsOf reads what a decision needs of the source (SourceFacts)
// and Decide computes the desired list from them: the three
// CATTLE_ELECTION_* entries only where the cluster's agent would otherwise
// run another triple (fleet.AgentChannel.Baseline), after every entry it
// does not own, all three or none.
//
// The project owns an entry only where it wrote it, recorded in the
// annotation RecordAnnotation on the written object; any other entry with
// one of the three names belongs to someone else, and the cluster is then
// left alone (ProblemForeign), said in StatusAnnotation. JudgeGlobal finds
// the clusters a global agent triple change would leave with an invalid
// triple through such entries.
//
// The client-side parts shared by the controller and the other components
// are beside it: the slim cached copies of the cluster objects and their
// informers (pkg/agentenv/slim), the index of the fleet Clusters the
// judgement reads (pkg/agentenv/index) and the merge patch that writes an
// agent env (pkg/agentenv/patch).
package agentenv
