// Package own names what is leasetune's own in a cluster: the field
// manager of its writes, the label of the objects it creates, its Lease and
// its webhook's Secret. Every part of the project takes them from here.
//
// Every write leasetune's controllers make to objects that others write
// too (the Fleet Deployments and rancher-config by fleetsettings, the
// Rancher Deployment by rancherenv, the cluster objects' agentEnvVars by
// agentenv, the state ConfigMaps by ownstate, and their removal by `leasetune
// cleanup`) is sent under FieldManager, so that the object's managedFields
// tell leasetune's entries from another writer's.
//
// The field manager must be one and the same for all of them: Fleet agent
// channel detection (fleet.DetectChannel) takes the env entries of the
// Fleet Deployments that another field manager owns as the Fleet chart's,
// and rancherenv reports the Rancher Deployment's entries that another
// field manager owns as someone else's; an entry leasetune wrote under a
// second name would be read as the chart's or a user's. Changing it makes
// every entry an installation already holds look foreign.
package own

// FieldManager is the field manager (metav1.PatchOptions.FieldManager and
// the like) of leasetune's writes.
const FieldManager = "leasetune"

// ManagedByLabel marks the objects leasetune creates for itself (its state
// ConfigMaps, its webhook Secret, the ElectionStatus) with the value
// FieldManager, which `leasetune cleanup` looks for.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// Lease is the Lease of leasetune's leader election unless --lease-name
// names another (the controller's and cleanup's default).
const Lease = "leasetune"

// WebhookSecret is the Secret holding the webhook's CA and serving
// certificate.
const WebhookSecret = "leasetune-webhook-tls" //nolint:gosec // G101: a Secret's name, not a credential
