// Package manager runs the whole project in one process (Run, configured by
// Config; cmd/leasetune's `controller` subcommand is a thin flag layer over
// them, and the integration tests call Run directly).
//
// On every replica (manager.go, serving.go, certs.go, ui.go, index.go):
//   - /healthz and /readyz (health.go) and /metrics, each on its own address;
//   - the HTTPS server of the admission webhook (pkg/admission) and the
//     Rancher-compatible /v3/settings API (pkg/settingsapi), with a serving
//     certificate kept in the Secret own.WebhookSecret and its CA published
//     in the webhook configuration's caBundle, both followed by watches and
//     retried with backoff while /readyz says why;
//   - the Rancher UI extension's bundle (pkg/uiplugin), on its own plain-HTTP
//     address, where nothing else is served (its UIPlugin comes from the
//     Helm chart);
//   - the index of the fleet Clusters (pkg/agentenv/index) with which the webhook
//     and fleetsettings judge a change of the agent triple.
//
// Behind client-go leader election on the Lease <Namespace>/<LeaseName>
// (leader.go), on the leader only (components.go): the settings Provider and
// the fleetsettings, rancherenv and agentenv controllers, and the
// ElectionStatus while its CRD exists. They start once the Setting CRD is served (made
// with Config.InstallCRDs) and stop, and later start afresh, when it is
// deleted under them. When ctx ends they stop first and the Lease is
// released after, so no two leaders ever write; a lost lease stops them and
// makes Run return an error, for the process to exit and restart.
package manager
