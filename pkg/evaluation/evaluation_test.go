package evaluation

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/rancherenv"
	"leasetune.io/leasetune/pkg/restart"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/kit"
)

// snapshot is an installation with the given settings, Fleet Deployments
// and fleet Clusters (each routed as inventory routes them).
func snapshot(ch fleet.AgentChannel, set map[string]string, deps []appsv1.Deployment, fleets ...*unstructured.Unstructured) (*inventory.Snapshot, Triples) {
	s := &inventory.Snapshot{Options: inventory.Options{Namespace: "leasetune-system", FleetNamespace: fleet.DefaultNamespace,
		RancherNamespace: "cattle-system", RancherDeployment: "rancher"}, FleetDeployments: deps, Channel: ch}
	for name, value := range set {
		o := v3.Setting{Value: value}
		o.Name = name
		s.Settings = append(s.Settings, o)
	}
	for _, f := range fleets {
		s.FleetClusters = append(s.FleetClusters, *f)
	}
	s.Clusters = inventory.Route(s.FleetClusters, nil, nil, rancher.Version{})
	triples, err := s.Triples()
	if err != nil {
		panic(err)
	}
	return s, triples
}

// fleetController is fleet-controller with its fleet-agentmanagement
// container at Fleet's 30s/25s/10s.
func fleetController(agentEnv ...string) appsv1.Deployment {
	ctrl := kit.Env("CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RENEW_DEADLINE=25s", "CATTLE_ELECTION_RETRY_PERIOD=10s")
	return *kit.Deployment(fleet.DefaultNamespace, fleet.ControllerDeployment,
		kit.WithContainer(fleet.ControllerContainer, ctrl...),
		kit.WithContainer(fleet.AgentManagementContainer, append(ctrl, kit.Env(agentEnv...)...)...))
}

// Every change is typed with what it restarts: the controller triple rolls
// fleet-controller; the agent triple on fleet-agentmanagement (the
// agentmanagement channel) rolls it and redeploys every fleet-agent. A
// value spelled differently but of the same duration is no change.
func TestFleetOf(t *testing.T) {
	snap, triples := snapshot(fleet.ChannelAgentManagement, map[string]string{
		"fleet-leader-election-retry-period":       "10000ms", // the same duration: nothing
		"fleet-agent-leader-election-retry-period": "5s",
	}, []appsv1.Deployment{fleetController()})
	f := FleetOf(snap, triples)
	if f.JudgeProblem != nil || len(f.Writes) != 1 || !f.AgentsRedeployed {
		t.Fatalf("FleetOf = %+v: want one write that redeploys the agents", f)
	}
	w := f.Writes[0]
	want := []EnvChange{
		{Container: fleet.AgentManagementContainer, Name: "FLEET_AGENT_ELECTION_LEASE_DURATION", New: "30s", Restarts: restart.Set{restart.DeploymentRollout, restart.FleetAgent}},
		{Container: fleet.AgentManagementContainer, Name: "FLEET_AGENT_ELECTION_RENEW_DEADLINE", New: "25s", Restarts: restart.Set{restart.DeploymentRollout, restart.FleetAgent}},
		{Container: fleet.AgentManagementContainer, Name: "FLEET_AGENT_ELECTION_RETRY_PERIOD", New: "5s", Restarts: restart.Set{restart.DeploymentRollout, restart.FleetAgent}},
	}
	if !reflect.DeepEqual(w.Env, want) || !reflect.DeepEqual(w.Restarts, restart.Set{restart.DeploymentRollout, restart.FleetAgent}) {
		t.Errorf("write = %+v\nwant env %+v", w, want)
	}

	// On a channel where Fleet renders the agents' names, the agent triple
	// goes nowhere on fleet-agentmanagement: a controller change only rolls.
	snap, triples = snapshot(fleet.ChannelFixedV012, map[string]string{"fleet-leader-election-retry-period": "5s"}, []appsv1.Deployment{fleetController()})
	f = FleetOf(snap, triples)
	if f.AgentsRedeployed || len(f.Writes) != 1 || !reflect.DeepEqual(f.Writes[0].Restarts, restart.Set{restart.DeploymentRollout}) || len(f.Writes[0].Env) != 2 {
		t.Errorf("FleetOf on %s = %+v: want one rollout, two containers' retry periods", fleet.ChannelFixedV012, f)
	}
}

// The agentenv controller decides nothing until it knows the agent
// channel; the evaluation neither (plan listed a removal of leasetune's
// earlier entries there that the controller never makes).
func TestClusterOfWaitsForTheChannel(t *testing.T) {
	fc := kit.FleetCluster("fleet-default", "c1",
		kit.WithEnv(kit.Env("CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RENEW_DEADLINE=25s", "CATTLE_ELECTION_RETRY_PERIOD=5s")...),
		kit.WithAnnotations(map[string]string{"leasetune.io/agent-env": `{"CATTLE_ELECTION_LEASE_DURATION":"30s","CATTLE_ELECTION_RENEW_DEADLINE":"25s","CATTLE_ELECTION_RETRY_PERIOD":"5s"}`}))
	for _, tc := range []struct {
		ch      fleet.AgentChannel
		decided bool
	}{{"", false}, {fleet.ChannelFixedV012, true}} {
		snap, triples := snapshot(tc.ch, nil, nil, fc)
		ev := Evaluate(snap, triples)
		if len(ev.Clusters) != 1 {
			t.Fatalf("channel %q: %d clusters", tc.ch, len(ev.Clusters))
		}
		c := ev.Clusters[0]
		if c.Decided != tc.decided || c.Decision.Change != tc.decided {
			t.Errorf("channel %q: Decided %t, Change %t; want both %t (Fleet v0.12+ renders the names: leasetune's entries go)", tc.ch, c.Decided, c.Decision.Change, tc.decided)
		}
		if !reflect.DeepEqual(c.Restarts, restart.Set{restart.FleetAgent}) {
			t.Errorf("channel %q: restarts %v, want the cluster's fleet-agent", tc.ch, c.Restarts)
		}
	}
}

// Rancher: the entries its write changes, the removal back to Rancher's
// built-in triple, and the lock's cost before and after, per replica.
func TestRancherOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		extra   []string
		set     map[string]string
		changes int
		removed bool
		after   election.Timings
	}{
		{name: "new triple", set: map[string]string{"rancher-leader-election-retry-period": "10s"}, changes: 3, after: election.Timings{LeaseDuration: 45e9, RenewDeadline: 30e9, RetryPeriod: 10e9}},
		{name: "back to the defaults", extra: []string{"CATTLE_ELECTION_LEASE_DURATION=45s", "CATTLE_ELECTION_RENEW_DEADLINE=30s", "CATTLE_ELECTION_RETRY_PERIOD=10s"},
			changes: 3, removed: true, after: election.WranglerDefaults},
		{name: "converged", changes: 0, after: election.WranglerDefaults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, triples := snapshot(fleet.ChannelFixedV012, tc.set, nil)
			snap.Rancher = kit.RancherDeployment("v2.15.0", kit.Env(tc.extra...)...)
			if tc.extra != nil { // leasetune's entries, recorded as it records them
				snap.Rancher.Annotations = map[string]string{rancherenv.RecordAnnotation: `{"CATTLE_ELECTION_LEASE_DURATION":"45s","CATTLE_ELECTION_RENEW_DEADLINE":"30s","CATTLE_ELECTION_RETRY_PERIOD":"10s"}`}
			}
			snap.RancherVersion, _ = rancher.Parse("v2.15.0")
			snap.RancherReplicas = 3
			r := RancherOf(snap, triples[settings.Rancher])
			if r == nil || len(r.Env) != tc.changes {
				t.Fatalf("RancherOf = %+v: want %d changes", r, tc.changes)
			}
			for _, e := range r.Env {
				if e.Removed != tc.removed || !reflect.DeepEqual(e.Restarts, restart.Set{restart.RancherRollout}) {
					t.Errorf("change %+v: want removed %t, a Rancher rollout", e, tc.removed)
				}
			}
			if want := election.CostOf(tc.after, 2, election.Supported).TotalRequestsPerHour(); r.LockAfter != want {
				t.Errorf("LockAfter = %v, want %v (a leader and two followers at %v)", r.LockAfter, want, tc.after)
			}
		})
	}
	snap, triples := snapshot(fleet.ChannelFixedV012, nil, nil)
	if r := RancherOf(snap, triples[settings.Rancher]); r != nil {
		t.Errorf("no Rancher Deployment: RancherOf = %+v, want nil", r)
	}
}

// A Rancher Deployment without a rancher container: nothing is known of
// what its lock reads (the ElectionStatus shows no runs), though its
// version is.
func TestRancherOfNoContainer(t *testing.T) {
	snap, triples := snapshot(fleet.ChannelFixedV012, nil, nil)
	snap.Rancher = kit.Deployment("cattle-system", "rancher", kit.WithContainer("proxy"))
	snap.RancherVersion, _ = rancher.Parse("v2.12.3")
	snap.RancherReplicas = 2
	r := RancherOf(snap, triples[settings.Rancher])
	if r.RunsKnown || r.Decision.Problem != rancherenv.ProblemNoContainer || len(r.Env) != 0 {
		t.Errorf("RancherOf = RunsKnown %t, problem %q, %d changes; want not known, %q, none", r.RunsKnown, r.Decision.Problem, len(r.Env), rancherenv.ProblemNoContainer)
	}
}

// A malformed spec.agentEnvVars on a Rancher-managed source: what its
// cattle-cluster-agent runs is not known, so it is counted neither as
// retuned nor as kept.
func TestClusterAgentRetunedMalformed(t *testing.T) {
	c := Cluster{Routing: agentenv.Routing{RancherManaged: true, ClusterAgentReads: true}, Facts: agentenv.SourceFacts{Malformed: true}}
	if retuned, reads := c.ClusterAgentRetuned(); retuned || reads {
		t.Errorf("ClusterAgentRetuned = %t, %t; want false, false", retuned, reads)
	}
}
