package recommend

import (
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/settings"
)

// Defaults returns the settings' defaults for each component (Fleet's
// 30s/25s/10s; wrangler's 45s/30s/2s for Rancher): what is in effect where
// nothing was set.
func Defaults() map[settings.Component]election.Timings {
	return map[settings.Component]election.Timings{settings.FleetController: election.FleetDefaults,
		settings.FleetAgent: election.FleetDefaults, settings.Rancher: election.WranglerDefaults}
}

// InEffect returns the triple in effect per component in an installation
// (its nine Setting objects and leasetune's state ConfigMap, read with
// inventory.Settings and inventory.State), as the controller would hold it
// (settings.Snapshot); a component with none gets the default. State data
// that does not decode counts as none.
func InEffect(snap *inventory.Snapshot) map[settings.Component]election.Timings {
	out := Defaults()
	triples, _ := snap.Triples()
	for _, c := range settings.Components {
		if st := triples[c]; st.HasEffective {
			out[c] = st.Effective
		}
	}
	return out
}
