// Package fleetenv decides the leader-election settings leasetune owns on
// Fleet's side, purely from the objects read and the effective triples:
// the CATTLE_ELECTION_* and FLEET_AGENT_ELECTION_* entries of the
// containers of the Fleet Deployments (Desired, and the JSON patch that
// writes them, PatchBody) and, in a Rancher installation, the Fleet chart
// values Rancher keeps in the ConfigMap cattle-system/rancher-config
// (MergeChartValues, ChartValueProblems). The fleetsettings controller
// (pkg/controllers/fleetsettings) writes what it decides; `leasetune plan`
// and the ElectionStatus show it.
package fleetenv

// ChannelConfigMapName is the ConfigMap, in the project's namespace, in
// which the fleetsettings controller records the detected Fleet agent
// channel (keys "channel" and "evidence").
const ChannelConfigMapName = "leasetune-fleet-channel"
