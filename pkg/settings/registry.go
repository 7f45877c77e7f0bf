package settings

import (
	"strings"

	"leasetune.io/leasetune/pkg/election"
)

// Component is a group of processes that share one timing triple, set by
// three settings.
type Component string

const (
	// FleetController is fleet-controller (with fleet-cleanup and
	// fleet-agentmanagement), gitjob and helmops, which read
	// CATTLE_ELECTION_*: the fleet-leader-election-* settings.
	FleetController Component = "fleet-controller"
	// FleetAgent is every fleet-agent: the fleet-agent-leader-election-*
	// settings.
	FleetAgent Component = "fleet-agent"
	// Rancher is the Rancher server's own lock kube-system/cattle-controllers
	// (rancher/rancher pkg/wrangler/context.go), read from CATTLE_ELECTION_*
	// of the rancher container by Rancher 2.8.3+: the
	// rancher-leader-election-* settings.
	Rancher Component = "rancher"
)

// Components lists the components in a fixed order.
var Components = [3]Component{FleetController, FleetAgent, Rancher}

// Restarts says, in a few words, what a change of the component's triple
// restarts once it takes effect.
func (c Component) Restarts() string {
	switch c {
	case FleetController:
		return "rolls the Fleet controller Deployments whose env it changes"
	case FleetAgent:
		return "redeploys the fleet-agents that take it"
	case Rancher:
		return "rolls every Rancher replica where it changes the Rancher Deployment's env (nothing is written while the settings hold Rancher's own 45s/30s/2s)"
	}
	return "restarts what reads it"
}

// Definition declares one setting: its name, default and description, and
// the component and field of the triple it sets.
type Definition struct {
	// Name is the Setting object's name, e.g. "fleet-leader-election-retry-period".
	Name string
	// Default is the value that applies when the Setting's value is empty.
	Default string
	// Description says in one line what the setting does.
	Description string
	// Component is the component whose triple the setting belongs to.
	Component Component
	// Field is the field of the triple the setting sets.
	Field election.Field
}

// EnvVar returns the name of the env var that overrides the setting on the
// project's pod: "CATTLE_" and the name in upper snake case, as Rancher's
// settings.GetEnvKey does, e.g. CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD.
func (d Definition) EnvVar() string {
	return "CATTLE_" + strings.ToUpper(strings.ReplaceAll(d.Name, "-", "_"))
}

func define(c Component, f election.Field, name string, def election.Timings, desc string) Definition {
	return Definition{Name: name, Default: election.FormatDuration(def.Get(f)), Description: desc, Component: c, Field: f}
}

// Registry declares the nine settings, in a fixed order: the Fleet
// controllers' lease duration, renew deadline and retry period, then the
// Fleet agents', then the Rancher server's. The Fleet defaults are Fleet's
// own since v0.10 (30s/25s/10s); the Rancher defaults are wrangler's
// built-in 45s/30s/2s (pkg/leader/leader.go at wrangler v2.1.4 and v3.2.1,
// which Rancher 2.8.3+ uses without setting any), so that leaving them
// unset changes nothing.
var Registry = [9]Definition{
	define(FleetController, election.LeaseDuration, "fleet-leader-election-lease-duration", election.FleetDefaults,
		"How long a Fleet controller candidate waits before taking over an unrenewed lock (CATTLE_ELECTION_LEASE_DURATION)."),
	define(FleetController, election.RenewDeadline, "fleet-leader-election-renew-deadline", election.FleetDefaults,
		"How long the Fleet controller leader retries a renewal before giving up leadership (CATTLE_ELECTION_RENEW_DEADLINE)."),
	define(FleetController, election.RetryPeriod, "fleet-leader-election-retry-period", election.FleetDefaults,
		"How often the Fleet controllers renew or poll their locks (CATTLE_ELECTION_RETRY_PERIOD)."),
	define(FleetAgent, election.LeaseDuration, "fleet-agent-leader-election-lease-duration", election.FleetDefaults,
		"How long a fleet-agent candidate waits before taking over an unrenewed lock, in every downstream cluster."),
	define(FleetAgent, election.RenewDeadline, "fleet-agent-leader-election-renew-deadline", election.FleetDefaults,
		"How long the fleet-agent leader retries a renewal before giving up leadership, in every downstream cluster."),
	define(FleetAgent, election.RetryPeriod, "fleet-agent-leader-election-retry-period", election.FleetDefaults,
		"How often fleet-agents renew or poll their locks, in every downstream cluster."),
	define(Rancher, election.LeaseDuration, "rancher-leader-election-lease-duration", election.WranglerDefaults,
		"How long a Rancher server replica waits before taking over an unrenewed cattle-controllers lock (CATTLE_ELECTION_LEASE_DURATION of the Rancher Deployment)."),
	define(Rancher, election.RenewDeadline, "rancher-leader-election-renew-deadline", election.WranglerDefaults,
		"How long the Rancher server leader retries a renewal of cattle-controllers before giving up leadership."),
	define(Rancher, election.RetryPeriod, "rancher-leader-election-retry-period", election.WranglerDefaults,
		"How often Rancher server replicas renew or poll the cattle-controllers lock."),
}

// Lookup returns the definition of the setting called name.
func Lookup(name string) (Definition, bool) {
	for _, d := range Registry {
		if d.Name == name {
			return d, true
		}
	}
	return Definition{}, false
}

// Of returns the three definitions of component c in the fixed field order.
func Of(c Component) [3]Definition {
	var out [3]Definition
	for _, d := range Registry {
		if d.Component == c {
			for i, f := range election.Fields {
				if f == d.Field {
					out[i] = d
				}
			}
		}
	}
	return out
}
