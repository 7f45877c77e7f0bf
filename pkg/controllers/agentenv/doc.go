// Package agentenv is the controller that propagates the effective agent
// triple, with per-cluster override annotations, to each downstream
// cluster's agent env (spec.agentEnvVars): the rules (routing, the
// decision, the ownership record) are the domain package pkg/agentenv's,
// the slim caches pkg/agentenv/slim's, the write pkg/agentenv/patch's.
//
// Each sync of a fleet Cluster gathers from the informers' caches (the
// fleet Cluster and the object agentenv.Route makes its source), decides
// (planSync, with agentenv.Decide), makes at most one write, a JSON merge
// patch with the resourceVersion read (decided again from a fresh read
// after a conflict, so a concurrent edit is never lost), and then
// reports, once: Events, metrics and logs; a cluster left alone is said in
// its agentenv.StatusAnnotation. A revert guard stops writing an object
// another writer keeps reverting. A global change of the triple, and the
// first pass after a start, are summed up in one Event on the agent
// Settings.
//
// It does not write the Fleet Deployments (pkg/controllers/fleetsettings)
// nor the Rancher Deployment (pkg/controllers/rancherenv).
package agentenv
