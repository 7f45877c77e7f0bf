// Package rancherenv decides, purely, the leader-election env of the
// Rancher server itself: the CATTLE_ELECTION_LEASE_DURATION,
// _RENEW_DEADLINE and _RETRY_PERIOD entries of the container "rancher" in
// the Rancher Deployment (cattle-system/rancher by default), which Rancher
// 2.8.3 and later read for its lock kube-system/cattle-controllers
// (docs/design.md, "How the timings reach each process"; Rancher's chart
// renders none, so they come only from its extraEnv value or from
// leasetune), for the effective triple of settings.Rancher.
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
// would stop every Rancher replica at once (WriteProblem). PatchBody is
// the one JSON patch that makes a decision. The rancherenv controller
// (pkg/controllers/rancherenv) makes the writes; `leasetune plan` and the
// ElectionStatus show the same decision.
package rancherenv
