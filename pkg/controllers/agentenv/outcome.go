package agentenv

import (
	"reflect"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
)

// state is what gather read for one fleet Cluster from the caches and the
// ledger: everything planSync decides from.
type state struct {
	key string
	// gone: the fleet Cluster is no longer in the cache.
	gone bool
	// global is the global agent triple and channel the Fleet agent
	// channel; noTriple and noChannel say that either is not known yet.
	global              election.Timings
	channel             fleet.AgentChannel
	noTriple, noChannel bool
	// route is where the cluster's env is read and written; unroutable
	// says why it cannot be routed yet (its source not cached yet).
	route      agentenv.Routing
	unroutable error
	// fenced says that the revert guard stopped writing route.Target and
	// it has not changed otherwise since, fencedMsg what the guard
	// reported; reverts counts the guard's reverts within RevertWindow.
	fencedMsg string
	fenced    bool
	reverts   int
}

// action is the kind of the one write a sync makes.
type action int

const (
	// none: nothing to write.
	none action = iota
	// writeStatus: only the agentenv.StatusAnnotation (set or removed).
	writeStatus
	// writeEnv: spec.agentEnvVars, the record and the agentenv.StatusAnnotation in
	// one merge patch with the resourceVersion read.
	writeEnv
	// writeFence: the revert guard stops writing the object; the status
	// message names the other writer, read live (apply completes it).
	writeFence
)

// outcome is what planSync decided for one cluster: at most one write and
// what to report of it.
type outcome struct {
	action action
	// decision is agentenv.Decide's, when the cluster was decided.
	decision agentenv.Decision
	decided  bool
	// problem and message are the cluster's problem and the value of its
	// agentenv.StatusAnnotation ("" and "" when all is well); status is the value
	// the write gives the agentenv.StatusAnnotation (nil removes it).
	problem agentenv.Problem
	message string
	status  interface{}
	// revert: the write restores entries someone removed (counted by the
	// guard); reverts is then how many within RevertWindow, this one
	// included.
	revert  bool
	reverts int
}

// planSync decides one cluster's sync from what gather read: a pure
// function of st. The rules (docs/agents.md, "What reaches each
// downstream cluster"):
//
//   - nothing is written while the cluster is gone, the global agent
//     triple or the channel is not known, or its source object is not
//     cached yet;
//   - nothing is written to an object the revert guard fenced, until it
//     changes otherwise (its fingerprint);
//   - agentenv.Decide's problems ProblemInvalid and ProblemForeign leave
//     the env as it is; only the StatusAnnotation says why, written where
//     it differs;
//   - a change of the env is one merge patch of the env, the record and
//     the StatusAnnotation; where only the StatusAnnotation differs, that
//     alone is written;
//   - a write that restores entries someone removed counts as a revert;
//     the RevertLimit-th within RevertWindow fences the object instead
//     (writeFence).
func planSync(st state) outcome {
	if st.gone || st.noTriple || st.noChannel || st.unroutable != nil {
		return outcome{}
	}
	target := st.route.Target
	current, hasStatus := target.GetAnnotations()[agentenv.StatusAnnotation]
	if st.fenced {
		return outcome{problem: agentenv.ProblemReverted, message: st.fencedMsg}
	}
	d := agentenv.Decide(agentenv.Input{Facts: agentenv.FactsOf(target), Global: st.global, Channel: st.channel,
		ClusterAgentReads: st.route.ClusterAgentReads})
	out := outcome{decision: d, decided: true, problem: d.Problem}
	if d.Problem != "" {
		out.message = d.Err.Error()
		out.status = out.message
	}
	statusDiffers := (out.message == "" && hasStatus) || (out.message != "" && current != out.message)
	switch {
	case d.Problem == agentenv.ProblemInvalid || d.Problem == agentenv.ProblemForeign:
		// Left alone: the env stays; a status that is already there
		// stays too.
		if current != out.message {
			out.action = writeStatus
		}
	case d.Change && agentenv.IsRevert(target, d):
		out.revert, out.reverts = true, st.reverts+1
		out.action = writeEnv
		if out.reverts >= RevertLimit {
			out.action, out.problem = writeFence, agentenv.ProblemReverted
		}
	case d.Change:
		out.action = writeEnv
	case statusDiffers:
		out.action = writeStatus
	}
	return out
}

// sameApartFromResourceVersion reports whether two cached copies of an
// object differ in nothing but metadata.resourceVersion: an update the
// controller has nothing to do for (a resync; a change of a field the slim
// copy does not keep, such as Rancher's status updates of a management
// Cluster). The copies are slim (slim.go), so every field the controller
// reads and the fingerprint of the rest are compared.
func sameApartFromResourceVersion(old, new interface{}) bool {
	o, ok1 := old.(*unstructured.Unstructured)
	n, ok2 := new.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return false
	}
	if o.GetResourceVersion() == n.GetResourceVersion() {
		return true
	}
	return reflect.DeepEqual(withoutResourceVersion(o.Object), withoutResourceVersion(n.Object))
}

// withoutResourceVersion is a shallow copy of obj whose metadata lacks
// resourceVersion.
func withoutResourceVersion(obj map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	if md, ok := obj["metadata"].(map[string]interface{}); ok {
		m := make(map[string]interface{}, len(md))
		for k, v := range md {
			if k != "resourceVersion" {
				m[k] = v
			}
		}
		out["metadata"] = m
	}
	return out
}
