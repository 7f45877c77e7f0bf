package locks

import (
	"slices"
	"testing"
	"time"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
)

func TestLookup(t *testing.T) {
	cases := []struct {
		resource, ns, name string
		component          string
		governed           settings.Component
	}{
		{"leases", "kube-system", "cattle-controllers", "rancher", settings.Rancher},
		{"leases", "cattle-system", "cattle-controllers", "", ""},
		{"configmaps", "kube-system", "cattle-controllers", "", ""},
		{"leases", "cattle-fleet-system", "fleet-agentmanagement-lock", "fleet-agentmanagement", settings.FleetController},
		{"leases", "cattle-fleet-system", "fleet-gitops-leader-election-shard-s1", "fleet-gitjob", settings.FleetController},
		{"leases", "cattle-fleet-system", "fleet-gitops-leader-election-shardx", "", ""},
		{"leases", "cattle-fleet-local-system", "fleet-agent", "fleet-agent", settings.FleetAgent},
		{"configmaps", "cattle-fleet-system", "fleet-agent-lock", "", ""},
		{"leases", "cattle-turtles-system", "controller-leader-election-rancher-turtles", "rancher-turtles", ""},
		{"leases", "cattle-capi-system", "controller-leader-election-capi", "cluster-api (installed by rancher-turtles)", ""},
		// A clusterctl-installed Cluster API, a user's autoscaler: not
		// Rancher's, not attributed.
		{"leases", "capi-system", "controller-leader-election-capi", "", ""},
		{"leases", "autoscaler", "cluster-autoscaler", "", ""},
		{"leases", "cattle-system", "rancher-webhook-leader", "rancher-webhook", ""},
		{"leases", "kube-system", "cluster-autoscaler", "cluster-autoscaler", ""},
		{"leases", "rke2-bootstrap-system", "rke2-bootstrap-manager-leader-election-capi", "cluster-api-provider-rke2 bootstrap", ""},
		{"leases", "cattle-system", "api-extension", "", ""},
	}
	for _, c := range cases {
		l, ok := Lookup(c.resource, c.ns, c.name)
		if ok != (c.component != "") || l.Component != c.component || l.Governed != c.governed {
			t.Errorf("%s %s/%s: %v %q %q, want %q %q", c.resource, c.ns, c.name, ok, l.Component, l.Governed, c.component, c.governed)
		}
	}
}

// Every lock the catalogue leaves alone says its defaults, how to change
// them and where that was read; every governed one names its source.
func TestCatalogueComplete(t *testing.T) {
	names := map[string]bool{}
	for _, l := range Catalogue {
		if names[l.Name] {
			t.Errorf("%s twice", l.Name)
		}
		names[l.Name] = true
		if l.Source == "" || l.Rancher == "" || l.Component == "" {
			t.Errorf("%s: source %q, Rancher %q, component %q", l.Name, l.Source, l.Rancher, l.Component)
		}
		if l.Governed == "" && (l.Change == "" || l.Defaults.Validate() != nil) {
			t.Errorf("%s: left alone without a valid default triple (%v) or a way to change it (%q)", l.Name, l.Defaults, l.Change)
		}
		if l.Governed != "" && (l.Change != "" || l.Defaults != (election.Timings{})) {
			t.Errorf("%s: governed by %s: its settings say its triple", l.Name, l.Governed)
		}
	}
}

func TestLeftAlone(t *testing.T) {
	turtles, capi, webhook := "controller-leader-election-rancher-turtles", "controller-leader-election-capi", "rancher-webhook-leader"
	for minor, want := range map[int][]string{
		12: nil,
		13: {turtles, capi},
		14: {turtles, capi, webhook},
		15: {turtles, capi, webhook},
		0:  {turtles, capi, webhook}, // unknown: every one
	} {
		var names []string
		for _, l := range LeftAlone(minor) {
			names = append(names, l.Name)
		}
		if !slices.Equal(names, want) {
			t.Errorf("Rancher v2.%d: %v, want %v", minor, names, want)
		}
	}
}

// One replica at 15s/10s/2s with client-go v0.30+: the leader updates
// every retryPeriod and reads nothing, 1,800 requests an hour.
func TestRequestsPerHour(t *testing.T) {
	l, _ := Lookup("leases", "cattle-turtles-system", "controller-leader-election-rancher-turtles")
	if got := l.RequestsPerHour(); got != float64(time.Hour/(2*time.Second)) {
		t.Errorf("%v per hour, want 1800", got)
	}
}
