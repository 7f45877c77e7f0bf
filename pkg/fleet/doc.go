// Package fleet holds what this project knows about Fleet's Deployments and
// agents: which Deployments and containers run a Fleet process that reads
// CATTLE_ELECTION_*, and through which channel the downstream fleet-agents
// get their leader-election timings in each Fleet version (AgentChannel),
// with a pure detector for the channel from the fleet-controller
// Deployment.
//
// The facts come from the public rancher/fleet chart (charts/fleet) and
// agent manifest (internal/cmd/controller/agentmanagement/agent), as
// summarised in docs/design.md, "How the timings reach each process":
//
//	Fleet       controller side                     downstream fleet-agent
//	v0.9        no env: wrangler's 45s/30s/2s       no env: wrangler's 45s/30s/2s
//	v0.10-v0.11 chart leaderElection.* (30/25/10)   no leader election
//	v0.12       as above                            CATTLE_ELECTION_* hardcoded 30s/25s/10s
//	v0.13+      as above                            FLEET_AGENT_ELECTION_* on fleet-agentmanagement
package fleet
