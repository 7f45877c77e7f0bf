// Package settings provides the project's Rancher-style global settings:
// six management.cattle.io/v3 Setting objects holding the leader-election
// timings of the Fleet controllers and of the Fleet agents.
//
// It declares the settings (Registry), resolves each setting's effective
// value (an env var CATTLE_<NAME> on the project's pod, else the object's
// value, else its default), validates the three settings of a component as
// one election.Timings, and offers the effective triples to the controllers
// through the Triples interface. The Provider keeps the Setting objects in
// place (created when missing, restored when deleted, default and source
// kept current) and keeps a durable copy of the users' values and of the
// last good triples in a ConfigMap, so that neither a deletion nor a
// restart of the project ever pushes defaults anywhere.
//
// It does not write anything but Setting objects, its state ConfigMap and
// Events; the controllers under pkg/controllers propagate the triples.
package settings
