// Package fieldmanager names the field manager of leasetune's writes.
//
// Every write leasetune's controllers make to objects that others write
// too (the Fleet Deployments and rancher-config by fleetsettings, the
// Rancher Deployment by rancherenv, the cluster objects' agentEnvVars by
// agentenv, the state ConfigMaps by ownstate, and their removal by `leasetune
// cleanup`) is sent under Leasetune, so that the object's managedFields
// tell leasetune's entries from another writer's.
//
// The value must be one and the same for all of them: Fleet agent channel
// detection (fleet.DetectChannel) takes the env entries of the Fleet
// Deployments that another field manager owns as the Fleet chart's, and
// rancherenv reports the Rancher Deployment's entries that another field
// manager owns as someone else's; an entry leasetune wrote under a second
// name would be read as the chart's or a user's. Changing the value makes
// every entry an installation already holds look foreign.
package fieldmanager

// Leasetune is the field manager (metav1.PatchOptions.FieldManager and
// the like) of leasetune's writes.
const Leasetune = "leasetune"

// ManagedByLabel marks the objects leasetune creates for itself (its state
// ConfigMaps, its webhook Secret, the ElectionStatus) with the value
// Leasetune, which `leasetune cleanup` looks for.
const ManagedByLabel = "app.kubernetes.io/managed-by"
