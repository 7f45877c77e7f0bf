// Package rancherenv keeps the leader-election timings of the Rancher
// server itself on the rancher-leader-election-* settings (the effective
// triple of settings.Rancher): the CATTLE_ELECTION_LEASE_DURATION,
// _RENEW_DEADLINE and _RETRY_PERIOD env entries of the container "rancher"
// in the Rancher Deployment (cattle-system/rancher by default), which
// Rancher 2.8.3 and later read for its lock kube-system/cattle-controllers
// (docs/design.md, "How the timings reach each process"; Rancher's chart renders none, so they come only
// from its extraEnv value or from here). The manager registers it with
// --rancher-env (chart value rancherElection.enabled), on the leader.
//
// One controller (Register) watches that one Deployment, by name, and is
// enqueued again when the provider's Rancher triple changes. Each sync
// gathers the Deployment from the cache and the triple (with one pending
// in the settle time) from the provider, computes what to do with the pure
// Decide, reports it (report: one log line, one Event on the Deployment,
// the gauge leasetune_rancher_left_alone, each problem said once) and
// makes at most one write: a JSON patch (PatchBody) that tests the
// container's name and whole env list, the uid and the generation against
// the copy the decision was made on, sets or removes exactly the three
// entries, and records them in the annotation RecordAnnotation, under the
// field manager fieldmanager.Leasetune. A patch whose tests fail (the
// Deployment changed meanwhile) is retried by the work queue from the
// fresh copy.
//
// Decide writes nothing when the container is missing, the Rancher version
// is unknown or reads no election env (before 2.8.3), an entry of the
// three names is someone else's (not as RecordAnnotation records it: the
// Helm release's extraEnv, an edit; Managers names who set it), no valid
// triple is known, or the Deployment holds the triple already; at
// Rancher's built-in 45s/30s/2s with no entries present it writes none, so
// installing leasetune restarts nothing; back at those defaults it removes
// its entries. A due write waits while the Deployment is not Settled
// (mid-rollout, paused, replicas unavailable) and while another triple is
// pending in the settle time, and is never made when the rollout strategy
// would stop every Rancher replica at once. Every write rolls every
// Rancher replica (leasetune_restarts_total{kind="rancher-rollout"}).
package rancherenv
