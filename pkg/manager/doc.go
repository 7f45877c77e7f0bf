// Package manager runs the project's components in one process: the
// settings Provider, the fleetsettings and agentenv controllers, behind
// client-go leader election on a Lease, with health, readiness and
// Prometheus endpoints. cmd/leasetune's `controller` subcommand is a thin
// flag layer over Config and Run; the integration tests call Run directly.
package manager
