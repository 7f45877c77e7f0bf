// Package electionstatus defines the ElectionStatus custom resource
// (leasetune.io/v1alpha1, cluster scoped, one object named Name), through
// which leasetune's leader publishes what only it knows, for the Rancher UI
// page (read through Rancher's steve API as the user) and for anyone with
// `kubectl get electionstatus leasetune -o yaml`; and Compute, the pure
// function that gives its status from an inventory snapshot and the
// settings' state. Its CRD is charts/leasetune/crds/electionstatuses.leasetune.io.yaml.
// The spec is empty; the status subresource holds a Status, written by the
// leader (pkg/controllers/electionstatus) only when it changes.
//
// Durations are strings in Go's syntax ("30s", "1m0s"), as the Settings
// hold them.
//
// It does not read or write the API.
package electionstatus
