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
// Each sync gathers (the triples in effect, the agent channel from
// pkg/controllers/fleetchannel, the judgement of a change of the agent
// triple by every agent), decides with the pure package pkg/fleetenv
// (Desired, PatchBody, MergeChartValues), makes at most one write and then
// reports (metrics, Events, logs) in one deferred step. Writes are JSON
// patches of exactly the owned entries (tested by name and index, so a
// stale cache cannot misplace them) under the field manager "leasetune",
// made only when an owned entry differs by parsed duration; entries keep
// their position and are never removed.
package fleetsettings
