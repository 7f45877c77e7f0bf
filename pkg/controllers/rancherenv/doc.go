// Package rancherenv is the controller that keeps the leader-election
// timings of the Rancher server itself on the rancher-leader-election-*
// settings (the effective triple of settings.Rancher): the
// CATTLE_ELECTION_* entries of the container "rancher" in the Rancher
// Deployment, as the pure package pkg/rancherenv decides them. The manager
// registers it with --rancher-env (chart value rancherElection.enabled),
// on the leader.
//
// One controller (Register) watches that one Deployment, by name, and is
// enqueued again when the provider's Rancher triple changes. Each sync
// gathers the Deployment from the cache and the triple (with one pending
// in the settle time) from the provider, computes what to do with
// rancherenv.Decide, reports it (report: one log line, one Event on the
// Deployment, the gauge leasetune_rancher_left_alone, each problem said
// once) and makes at most one write: a JSON patch (rancherenv.PatchBody)
// that tests the container's name and whole env list, the uid and the
// generation against the copy the decision was made on, sets or removes
// exactly the three entries, and records them in the annotation
// rancherenv.RecordAnnotation, under the field manager
// own.FieldManager. A patch whose tests fail (the Deployment changed
// meanwhile) is retried by the work queue from the fresh copy. Every
// write rolls every Rancher replica
// (leasetune_restarts_total{kind="rancher-rollout"}).
package rancherenv
