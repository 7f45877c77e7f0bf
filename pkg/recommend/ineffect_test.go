package recommend

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/settings"
)

func settingObj(name, value string) v3.Setting {
	o := v3.Setting{Value: value}
	o.Name = name
	return o
}

// TestInEffect: the triples the settings and leasetune's record hold in
// effect; a component with none has the default.
func TestInEffect(t *testing.T) {
	agent := election.Timings{LeaseDuration: 45 * time.Second, RenewDeadline: 40 * time.Second, RetryPeriod: 20 * time.Second}
	set := []v3.Setting{settingObj("fleet-agent-leader-election-lease-duration", "45s"), settingObj("fleet-agent-leader-election-renew-deadline", "40s"),
		settingObj("fleet-agent-leader-election-retry-period", "20s")}
	refused := []v3.Setting{settingObj("fleet-leader-election-retry-period", "999ms")}
	record := &corev1.ConfigMap{Data: map[string]string{"effective": `{"fleet-controller":{"leaseDuration":"60s","renewDeadline":"50s","retryPeriod":"20s"}}`}}
	for _, tc := range []struct {
		name string
		snap inventory.Snapshot
		want map[settings.Component]election.Timings
	}{
		{"nothing set", inventory.Snapshot{}, Defaults()},
		{"the agents' three set", inventory.Snapshot{Settings: set},
			map[settings.Component]election.Timings{settings.FleetController: election.FleetDefaults, settings.FleetAgent: agent, settings.Rancher: election.WranglerDefaults}},
		{"refused settings keep the recorded triple", inventory.Snapshot{Settings: refused, State: record},
			map[settings.Component]election.Timings{settings.FleetController: {LeaseDuration: 60 * time.Second, RenewDeadline: 50 * time.Second, RetryPeriod: 20 * time.Second},
				settings.FleetAgent: election.FleetDefaults, settings.Rancher: election.WranglerDefaults}},
		{"refused settings, no record: the default", inventory.Snapshot{Settings: refused}, Defaults()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := InEffect(&tc.snap)
			for _, c := range settings.Components {
				if got[c] != tc.want[c] {
					t.Errorf("%s: %v, want %v", c, got[c], tc.want[c])
				}
			}
		})
	}
}
