// Package fleetagent is a test double of Fleet's agent manifest: the
// fleet-agent workload that fleet-agentmanagement (fleet-controller in
// v0.9) renders for every downstream cluster and ships as the agent's own
// Bundle, which the agent upgrades with helm.
//
// It is written from rancher/fleet's manifest.go at each release tag, read
// in a bare clone (git show <tag>:<path>); no Fleet code is copied. Every
// env entry and every step that touches env cites the tag, the file and the
// lines it models:
//
//	v0.9.x     internal/cmd/controller/agent/manifest.go                 (one blob v0.9.1-v0.9.18)
//	v0.10.x+   internal/cmd/controller/agentmanagement/agent/manifest.go (blobs change at
//	           v0.10.1, v0.11.0, v0.11.3, v0.12.0, v0.13.0, v0.14.0, v0.14.2, v0.15.2, v0.16.0;
//	           none of v0.10.1, v0.11.0, v0.14.2 touches env)
//
// What matters for env:
//
//   - v0.9: a Deployment, one container fleet-agent: NAMESPACE (fieldRef),
//     AGENT_SCOPE, CHECKIN_INTERVAL, then spec.agentEnvVars appended.
//   - v0.10.0-v0.11.2: a StatefulSet with an init container
//     fleet-agent-register (NAMESPACE), fleet-agent (NAMESPACE,
//     AGENT_SCOPE) and fleet-agent-clusterstatus (NAMESPACE,
//     CHECKIN_INTERVAL); spec.agentEnvVars appended to every container.
//   - v0.11.3-v0.11.x: as v0.10, and fleet-agent starts with
//     BUNDLEDEPLOYMENT_RECONCILER_WORKERS, DRIFT_RECONCILER_WORKERS.
//   - v0.12: a Deployment, one container: the two worker variables,
//     NAMESPACE, AGENT_SCOPE, CHECKIN_INTERVAL and CATTLE_ELECTION_*
//     hardcoded 30s / 10s / 25s (lease, retry, renew), then the cluster's.
//   - v0.13: the same with CATTLE_ELECTION_* from the agent triple
//     (FLEET_AGENT_ELECTION_* on fleet-agentmanagement), time.Duration's
//     String.
//   - v0.14.0-v0.15.x: also EXPERIMENTAL_COPY_RESOURCES_DOWNSTREAM after
//     the election names.
//   - v0.15.2+: CATTLE_WRANGLER_CHECK_GVK_ERROR_MAPPING appended before
//     the cluster's entries when fleet-agentmanagement has it in its own env
//     and the cluster's entries do not name it (Fleet's only de-duplication).
//   - v0.16: EXPERIMENTAL_COPY_RESOURCES_DOWNSTREAM is gone.
//
// The agent manifest is exported to the Bundle with wrangler's
// yaml.Export (v0.14.10 internal/cmd/controller/agentmanagement/controllers/
// manageagent/manageagent.go:359; wrangler v3.3.1 pkg/yaml/yaml.go:138-224):
// apiVersion and kind set, top-level metadata reduced to name, namespace,
// labels and annotations, status dropped. Manifest returns that JSON, which
// is what helm's createPatch marshals as the original and target objects.
package fleetagent
