// Package fleetsettings propagates the effective leader-election triples
// to the Fleet Deployments in the Fleet system namespace, and, in a Rancher
// installation, to the Fleet chart values Rancher keeps under the `fleet`
// key of the ConfigMap cattle-system/rancher-config.
//
// It owns exactly these env entries and nothing else:
//   - CATTLE_ELECTION_LEASE_DURATION, _RENEW_DEADLINE, _RETRY_PERIOD (the
//     controller triple) on every container that runs a Fleet process
//     (fleet.IsFleetContainer) in the fleet-controller, gitjob and helmops
//     Deployments and their shards;
//   - FLEET_AGENT_ELECTION_* (the agent triple) on the fleet-agentmanagement
//     container where Fleet reads it (fleet.ChannelAgentManagement).
//
// What to write is decided by the pure package pkg/fleetenv (Desired,
// PatchBody, MergeChartValues); this controller gathers, writes and
// reports. Writes are JSON patches of exactly the owned entries (tested
// by name and index, so a stale cache cannot misplace them) under the
// field manager "leasetune", made only when an owned entry differs by
// parsed duration; entries keep their position and are never removed.
// The package also detects the Fleet agent channel (fleet.DetectChannel)
// before its first write, records it, and offers it to the agentenv
// controller (Channels).
package fleetsettings
