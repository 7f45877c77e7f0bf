// Package evaluation is the one evaluation of an installation: from what
// inventory read and the settings' triples, what leasetune's controllers
// decide for each target, typed: the env entries each Deployment write
// changes and what it restarts, rancher-config's merged values, the Rancher
// Deployment's decision and what its lock costs, and each cluster's
// agent-env decision. `leasetune plan` renders it as writes; the
// ElectionStatus groups it. It is pure: no API call, and the same inputs
// give the same evaluation.
package evaluation

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/fleetenv"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/restart"
	"leasetune.io/leasetune/pkg/settings"
)

// Triples are the settings' state per component (settings.Snapshot, or
// the settings Provider's Status on the leader).
type Triples = map[settings.Component]settings.ComponentStatus

// Evaluation is an installation evaluated (Evaluate).
type Evaluation struct {
	Fleet         Fleet
	RancherConfig *RancherConfig // nil: no rancher-config
	Rancher       *Rancher       // nil: no Rancher Deployment
	Clusters      []Cluster      // one per routed fleet Cluster, in the snapshot's order
}

// Evaluate evaluates snap (read with every part, inventory.All; a part not
// read counts as absent) under triples.
func Evaluate(snap *inventory.Snapshot, triples Triples) Evaluation {
	ev := Evaluation{Fleet: FleetOf(snap, triples), RancherConfig: RancherConfigOf(snap, triples),
		Rancher: RancherOf(snap, triples[settings.Rancher])}
	for i := range snap.Clusters {
		ev.Clusters = append(ev.Clusters, ClusterOf(&snap.Clusters[i], triples[settings.FleetAgent], snap.Channel))
	}
	return ev
}

// EnvChange is one env entry a write changes.
type EnvChange struct {
	Container, Name string
	// Old and New are the values ("" for absent, "(valueFrom)" for an
	// entry that takes its value from a source).
	Old, New string
	// Removed is true when the entry goes.
	Removed bool
	// Restarts are what the change restarts.
	Restarts restart.Set
}

// Fleet is the evaluation of the Fleet Deployments.
type Fleet struct {
	// Inputs are what fleetenv.Desired reads; AgentOK is false when no
	// agent triple is known or JudgeProblem refuses it.
	Inputs fleetenv.Inputs
	// JudgeProblem is why the agent triple is not written to
	// fleet-agentmanagement: it would break a cluster's agent
	// (inventory.Snapshot.JudgeAgents); the controller triple still is.
	JudgeProblem error
	// Writes are the Deployments whose env a write changes, in the
	// snapshot's order.
	Writes []DeploymentWrite
	// Locks is the number of Fleet controller processes (one lock each).
	Locks int
	// AgentsRedeployed is true when a write re-renders every fleet-agent
	// (FLEET_AGENT_ELECTION_* on fleet-agentmanagement change).
	AgentsRedeployed bool
}

// DeploymentWrite is one Deployment's write.
type DeploymentWrite struct {
	Deployment *appsv1.Deployment
	Env        []EnvChange
	// Restarts are the union of the changes' restarts.
	Restarts restart.Set
}

// FleetOf evaluates the Fleet Deployments of snap (fleetenv.Desired).
// The agent triple is judged first against every cluster's agent
// (JudgeAgents): refused, only the controller triple is written.
func FleetOf(snap *inventory.Snapshot, triples Triples) Fleet {
	ctrl, agent := triples[settings.FleetController], triples[settings.FleetAgent]
	out := Fleet{Locks: snap.FleetLocks(), Inputs: fleetenv.Inputs{Controller: ctrl.Effective, ControllerOK: ctrl.HasEffective,
		Agent: agent.Effective, AgentOK: agent.HasEffective, Channel: snap.Channel}}
	if out.Inputs.AgentOK {
		if err := snap.JudgeAgents(out.Inputs); err != nil {
			out.JudgeProblem, out.Inputs.AgentOK = err, false
		}
	}
	for i := range snap.FleetDeployments {
		d := &snap.FleetDeployments[i]
		w := DeploymentWrite{Deployment: d}
		for _, ch := range fleetenv.Desired(d, out.Inputs) {
			for _, e := range ch.Env {
				old := EnvValue(d, ch.Container, e.Name)
				if old == e.Value || sameDuration(old, e.Value) {
					continue // rewritten with the value it has: no change
				}
				kinds := restart.Set{restart.DeploymentRollout}
				if election.FleetAgentPrefix.Owns(e.Name) {
					// fleet-agentmanagement re-renders every agent bundle when it
					// restarts with new FLEET_AGENT_ELECTION_* (docs/design.md,
					// "How the timings reach each process").
					kinds = append(kinds, restart.FleetAgent)
					out.AgentsRedeployed = true
				}
				w.Env = append(w.Env, EnvChange{Container: ch.Container, Name: e.Name, Old: old, New: e.Value, Restarts: kinds})
				w.Restarts = union(w.Restarts, kinds)
			}
		}
		if len(w.Env) > 0 {
			out.Writes = append(out.Writes, w)
		}
	}
	return out
}

// RancherConfig is the evaluation of rancher-config's Fleet chart values.
type RancherConfig struct {
	ConfigMap *corev1.ConfigMap
	// Ref names it, as "ConfigMap <namespace>/<name>".
	Ref string
	// Doc is the fleet values as written; Merged what a write makes them
	// (Changed: a write happens). Err is why the ConfigMap is left alone.
	Doc, Merged string
	Changed     bool
	Err         error
	// Problems are what Fleet v0.16's chart refuses in the values as
	// written, ProblemsAfter in them after the write.
	Problems, ProblemsAfter []string
}

// RancherConfigOf evaluates rancher-config (fleetenv.MergeChartValues);
// nil when snap has none.
func RancherConfigOf(snap *inventory.Snapshot, triples Triples) *RancherConfig {
	cm := snap.RancherConfig
	if cm == nil {
		return nil
	}
	ctrl, agent := triples[settings.FleetController], triples[settings.FleetAgent]
	out := &RancherConfig{ConfigMap: cm, Ref: "ConfigMap " + snap.Options.RancherNamespace + "/" + fleetenv.RancherConfigName, Doc: cm.Data[fleetenv.RancherConfigKey]}
	out.Merged, out.Changed, out.Err = fleetenv.MergeChartValues(out.Doc, ctrl.Effective, ctrl.HasEffective, agent.Effective, agent.HasEffective)
	after := out.Doc
	if out.Err == nil && out.Changed {
		after = out.Merged
	}
	out.Problems, out.ProblemsAfter = fleetenv.ChartValueProblems(out.Doc), fleetenv.ChartValueProblems(after)
	return out
}

// Rancher is the evaluation of the Rancher Deployment and its lock
// kube-system/cattle-controllers.
type Rancher struct {
	Deployment *appsv1.Deployment
	Version    rancher.Version
	// Replicas are its replicas: one lock candidate each.
	Replicas int
	// Runs is the triple the lock runs now (rancher.Runs: Rancher's
	// built-in one where it reads no env); RunsKnown is true where it is
	// read from the rancher container's env.
	Runs      election.Timings
	RunsKnown bool
	// Decision is rancherenv.Decide's; Env the entries its write changes
	// (every Rancher replica rolls).
	Decision rancherenv.Decision
	Env      []EnvChange
	// LockBefore and LockAfter are the lock's requests per hour now and
	// after the write (pkg/election's model).
	LockBefore, LockAfter float64
}

// RancherOf evaluates the Rancher Deployment of snap under the Rancher
// triple st; nil when snap has none.
func RancherOf(snap *inventory.Snapshot, st settings.ComponentStatus) *Rancher {
	d := snap.Rancher
	if d == nil {
		return nil
	}
	out := &Rancher{Deployment: d, Version: snap.RancherVersion, Replicas: snap.RancherReplicas}
	var env []corev1.EnvVar
	if i := rancher.ContainerIndex(d); i >= 0 {
		env = d.Spec.Template.Spec.Containers[i].Env
	}
	out.Runs, out.RunsKnown = rancher.Runs(env, snap.RancherVersion)
	out.RunsKnown = out.RunsKnown && rancher.ContainerIndex(d) >= 0
	out.LockBefore = out.lockCost(out.Runs)
	out.LockAfter = out.LockBefore
	out.Decision = rancherenv.Decide(d, rancherenv.Input{Triple: st.Effective, OK: st.HasEffective, Version: snap.RancherVersion})
	if out.Decision.Problem != rancherenv.ProblemNone || !out.Decision.Write {
		return out
	}
	kinds := restart.Set{restart.RancherRollout}
	if out.Decision.Remove {
		for _, n := range election.CattlePrefix.EnvNames() {
			if old := EnvValue(d, rancher.Container, n); has(env, n) {
				out.Env = append(out.Env, EnvChange{Container: rancher.Container, Name: n, Old: old, Removed: true, Restarts: kinds})
			}
		}
		out.LockAfter = out.lockCost(election.WranglerDefaults)
		return out
	}
	for _, e := range out.Decision.Env {
		if old := EnvValue(d, rancher.Container, e.Name); old != e.Value {
			out.Env = append(out.Env, EnvChange{Container: rancher.Container, Name: e.Name, Old: old, New: e.Value, Restarts: kinds})
		}
	}
	out.LockAfter = out.lockCost(st.Effective)
	return out
}

// lockCost is the lock's requests per hour at t: a leader and replicas-1
// followers; none at 0 replicas.
func (r *Rancher) lockCost(t election.Timings) float64 {
	if r.Replicas < 1 {
		return 0
	}
	return election.CostOf(t, r.Replicas-1, election.Supported).TotalRequestsPerHour()
}

// Cluster is the evaluation of one fleet Cluster's agent env.
type Cluster struct {
	Fleet *unstructured.Unstructured
	// Err is why it cannot be routed (its source object is missing).
	Err     error
	Routing agentenv.Routing
	// Facts are what agentenv.FactsOf read of the source object.
	Facts agentenv.SourceFacts
	// Decided is false where no agent triple or no channel is known:
	// nothing is written (the agentenv controller waits for both).
	Decided  bool
	Decision agentenv.Decision
	// Restarts are what a write of the source object's
	// spec.agentEnvVars restarts (agentenv.Restarts).
	Restarts restart.Set
}

// ClusterOf evaluates c under the global agent triple agent on channel ch
// (agentenv.Decide from the source object's facts).
func ClusterOf(c *inventory.Cluster, agent settings.ComponentStatus, ch fleet.AgentChannel) Cluster {
	out := Cluster{Fleet: c.Fleet, Err: c.Err, Routing: c.Routing}
	if c.Err != nil {
		return out
	}
	out.Facts, out.Restarts = agentenv.FactsOf(c.Routing.Target), agentenv.Restarts(c.Routing)
	if agent.HasEffective && ch != "" {
		out.Decided = true
		out.Decision = agentenv.Decide(agentenv.Input{Facts: out.Facts, Global: agent.Effective, Channel: ch, ClusterAgentReads: c.Routing.ClusterAgentReads})
	}
	return out
}

// AgentLock is the cluster's fleet-agent lock's requests per hour once
// the decision's env is in place (0 where it elects no leader or nothing
// is decided).
func (c Cluster) AgentLock() float64 {
	if !c.Decided || !c.Decision.Elects {
		return 0
	}
	return election.CostOf(c.Decision.Runs, 0, election.Supported).TotalRequestsPerHour()
}

// ClusterAgentRetuned reports, for a cluster whose cattle-cluster-agent
// reads CATTLE_ELECTION_* from this list (Routing.ClusterAgentReads),
// whether the list holds any after the write (the agent then runs that
// triple, else wrangler's built-in one); reads is false elsewhere, and
// where the list is not a list of objects (what the agent runs is not
// known: it is left alone).
func (c Cluster) ClusterAgentRetuned() (retuned, reads bool) {
	if c.Err != nil || !c.Routing.ClusterAgentReads || c.Facts.Malformed {
		return false, false
	}
	if !c.Decided || !c.Decision.Change {
		return len(c.Facts.Entries) > 0, true
	}
	for _, it := range c.Decision.Env {
		if n, _ := it["name"].(string); election.CattlePrefix.Owns(n) {
			return true, true
		}
	}
	return false, true
}

func has(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func union(a, b restart.Set) restart.Set {
	for _, k := range b {
		if !a.Has(k) {
			a = append(a, k)
		}
	}
	return a
}

// sameDuration reports whether two env values parse to the same duration.
func sameDuration(a, b string) bool {
	da, err1 := time.ParseDuration(a)
	db, err2 := time.ParseDuration(b)
	return err1 == nil && err2 == nil && da == db
}

// EnvValue is the value of env name in container of d ("" when absent;
// "(valueFrom)" when it takes its value from a source; the last
// occurrence, which the container runs).
func EnvValue(d *appsv1.Deployment, container, name string) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != container {
			continue
		}
		v := ""
		for _, e := range c.Env {
			if e.Name == name {
				v = e.Value
				if e.ValueFrom != nil {
					v = "(valueFrom)"
				}
			}
		}
		return v
	}
	return ""
}
