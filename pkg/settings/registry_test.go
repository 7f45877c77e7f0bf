package settings

import (
	"testing"

	"leasetune.io/leasetune/pkg/election"
)

func TestRegistry(t *testing.T) {
	want := map[string]string{
		"fleet-leader-election-lease-duration":       "CATTLE_FLEET_LEADER_ELECTION_LEASE_DURATION",
		"fleet-leader-election-renew-deadline":       "CATTLE_FLEET_LEADER_ELECTION_RENEW_DEADLINE",
		"fleet-leader-election-retry-period":         "CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD",
		"fleet-agent-leader-election-lease-duration": "CATTLE_FLEET_AGENT_LEADER_ELECTION_LEASE_DURATION",
		"fleet-agent-leader-election-renew-deadline": "CATTLE_FLEET_AGENT_LEADER_ELECTION_RENEW_DEADLINE",
		"fleet-agent-leader-election-retry-period":   "CATTLE_FLEET_AGENT_LEADER_ELECTION_RETRY_PERIOD",
		"rancher-leader-election-lease-duration":     "CATTLE_RANCHER_LEADER_ELECTION_LEASE_DURATION",
		"rancher-leader-election-renew-deadline":     "CATTLE_RANCHER_LEADER_ELECTION_RENEW_DEADLINE",
		"rancher-leader-election-retry-period":       "CATTLE_RANCHER_LEADER_ELECTION_RETRY_PERIOD",
	}
	if len(Registry) != len(want) {
		t.Fatalf("%d settings, want %d", len(Registry), len(want))
	}
	for _, d := range Registry {
		if want[d.Name] != d.EnvVar() {
			t.Errorf("%s: env var %s, want %s", d.Name, d.EnvVar(), want[d.Name])
		}
		if got, ok := Lookup(d.Name); !ok || got != d {
			t.Errorf("Lookup(%s) = %v, %v", d.Name, got, ok)
		}
		if d.Description == "" {
			t.Errorf("%s has no description", d.Name)
		}
	}
	for _, c := range Components {
		defs := Of(c)
		var vals [3]Resolved
		for i, d := range defs {
			if d.Component != c || d.Field != election.Fields[i] {
				t.Errorf("Of(%s)[%d] = %s (%s %s)", c, i, d.Name, d.Component, d.Field)
			}
			vals[i] = Resolved{Value: d.Default}
		}
		// The defaults form a valid triple: Fleet's 30s/25s/10s, and for
		// Rancher wrangler's built-in 45s/30s/2s (so that unset settings
		// change nothing there).
		want := election.FleetDefaults
		if c == Rancher {
			want = election.WranglerDefaults
		}
		if got, err := Evaluate(c, vals); err != nil || got != want {
			t.Errorf("defaults of %s: %s, %v", c, got, err)
		}
	}
	if _, ok := Lookup("server-url"); ok {
		t.Error("Lookup found a Rancher setting that is not ours")
	}
}
