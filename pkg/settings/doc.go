// Package settings provides the project's Rancher-style global settings:
// nine management.cattle.io/v3 Setting objects holding the leader-election
// timings of the Fleet controllers, of the Fleet agents and of the Rancher
// server (three per component: leaseDuration, renewDeadline, retryPeriod).
//
// It declares the settings (Registry), resolves each setting's effective
// value (an env var CATTLE_<NAME> on the project's pod, else the object's
// value, else its default), validates the three settings of a component as
// one election.Timings, and offers the effective triples to the controllers
// through the Triples interface. The Provider keeps the Setting objects in
// place (restore.go: created when missing, restored when deleted, default
// and source kept current), decides which triples are in effect (settle.go:
// a pure function; new triples wait together for the settle time), reports
// (report.go: every Event, metric and log line about the triples) and keeps
// a durable copy of the users' values and of the last good triples in a
// ConfigMap (state.go), so that neither a deletion nor a restart of the
// project ever pushes defaults anywhere.
//
// It does not write anything but Setting objects, its state ConfigMap and
// Events; the controllers under pkg/controllers propagate the triples.
package settings
