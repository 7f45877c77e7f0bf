package plan

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/restart"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/kit"
)

// emptyJSON is `plan -o json` where nothing is installed.
const emptyJSON = `{
  "triples": [
    {
      "component": "fleet-controller",
      "inEffect": "leaseDuration=30s renewDeadline=25s retryPeriod=10s"
    },
    {
      "component": "fleet-agent",
      "inEffect": "leaseDuration=30s renewDeadline=25s retryPeriod=10s"
    },
    {
      "component": "rancher",
      "inEffect": "leaseDuration=45s renewDeadline=30s retryPeriod=2s"
    }
  ],
  "channel": "",
  "changes": [],
  "leftAlone": null,
  "refused": null,
  "totals": {
    "deploymentRollouts": 0,
    "fleetAgentRedeploys": 0,
    "clusterAgentRedeploys": 0,
    "nodePlanClusters": 0,
    "controllerLockRequestsPerHour": 0,
    "agentLockRequestsPerHour": 0,
    "rancherRollout": false,
    "rancherLockRequestsPerHourBefore": 0,
    "rancherLockRequestsPerHour": 0,
    "clusterAgentLocksRetuned": 0,
    "clusterAgentLocksKept": 0
  }
}`

func snapshotWith(settings map[string]string, deps ...appsv1.Deployment) *inventory.Snapshot {
	s := &inventory.Snapshot{Options: inventory.Options{Namespace: "leasetune-system", FleetNamespace: fleet.DefaultNamespace,
		RancherNamespace: "cattle-system", RancherDeployment: "rancher"}, FleetDeployments: deps}
	for name, value := range settings {
		o := v3.Setting{Value: value}
		o.Name = name
		s.Settings = append(s.Settings, o)
	}
	return s
}

// gitjob is the Fleet chart's gitjob Deployment at Fleet's 30s/25s/10s.
func gitjob() appsv1.Deployment {
	d := appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultNamespace, Name: fleet.GitjobDeployment}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: fleet.GitjobContainer, Env: []corev1.EnvVar{
		{Name: "CATTLE_ELECTION_LEASE_DURATION", Value: "30s"}, {Name: "CATTLE_ELECTION_RENEW_DEADLINE", Value: "25s"},
		{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "10s"}}}}
	return d
}

// TestFromSnapshot: the report is computed from the snapshot alone.
func TestFromSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name      string
		snap      *inventory.Snapshot
		set       []Assignment
		changes   []Change
		leftAlone []string
		refused   []string
		totals    Totals
	}{
		{name: "nothing installed: nothing to write", snap: snapshotWith(nil)},
		{name: "Fleet at its defaults: nothing to write", snap: snapshotWith(nil, gitjob()),
			totals: Totals{ControllerLocksAfter: 360}},
		{name: "a proposed retry period rolls gitjob", snap: snapshotWith(nil, gitjob()),
			set: []Assignment{{"fleet-leader-election-retry-period", "4s"}},
			changes: []Change{{Object: "Deployment cattle-fleet-system/gitjob", Field: "container gitjob env CATTLE_ELECTION_RETRY_PERIOD",
				Old: "10s", New: "4s", Restarts: "a rollout of gitjob", Kinds: restart.Set{restart.DeploymentRollout}}},
			totals: Totals{Rollouts: 1, ControllerLocksBefore: 360, ControllerLocksAfter: 900}},
		{name: "a refused proposal is left out", snap: snapshotWith(nil, gitjob()),
			set:     []Assignment{{"fleet-leader-election-retry-period", "999ms"}},
			refused: []string{"fleet-leader-election-retry-period=999ms: "},
			totals:  Totals{ControllerLocksBefore: 360, ControllerLocksAfter: 360}},
		{name: "no Rancher Deployment for a Rancher triple", snap: snapshotWith(map[string]string{"rancher-leader-election-retry-period": "5s"}),
			leftAlone: []string{"Deployment cattle-system/rancher: not found, so the rancher-leader-election-* settings (leaseDuration=45s renewDeadline=30s retryPeriod=5s) reach no Rancher here (--rancher-namespace, --rancher-deployment)"}},
		{name: "a cluster that cannot be routed says why", snap: func() *inventory.Snapshot {
			s := snapshotWith(nil)
			s.Clusters = []inventory.Cluster{{Err: errors.New("fleet Cluster fleet-default/gone-1: no provisioning Cluster")}}
			return s
		}(), leftAlone: []string{"fleet Cluster fleet-default/gone-1: no provisioning Cluster"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := FromSnapshot(tc.snap, tc.set)
			if !reflect.DeepEqual(r.Changes, tc.changes) {
				t.Errorf("changes %+v, want %+v", r.Changes, tc.changes)
			}
			if !reflect.DeepEqual(r.LeftAlone, tc.leftAlone) {
				t.Errorf("left alone %q, want %q", r.LeftAlone, tc.leftAlone)
			}
			if len(r.Refused) != len(tc.refused) {
				t.Errorf("refused %q, want %q", r.Refused, tc.refused)
			}
			for i := range tc.refused {
				if i < len(r.Refused) && !strings.HasPrefix(r.Refused[i], tc.refused[i]) {
					t.Errorf("refused %q, want %q…", r.Refused[i], tc.refused[i])
				}
			}
			if got := r.Totals(); !reflect.DeepEqual(got, tc.totals) {
				t.Errorf("totals %+v, want %+v", got, tc.totals)
			}
		})
	}
}

// TestFromSnapshotOutput: `plan` and `plan -o json` where nothing is
// installed, to the byte.
func TestFromSnapshotOutput(t *testing.T) {
	r := FromSnapshot(snapshotWith(nil), nil)
	b, err := r.JSON()
	if err != nil || string(b) != emptyJSON {
		t.Errorf("%v\n%s\nwant\n%s", err, b, emptyJSON)
	}
	// A refused value in the JSON as it was given: not escaped for HTML.
	b, err = FromSnapshot(snapshotWith(nil), []Assignment{{"fleet-leader-election-retry-period", "1s&<x>"}}).JSON()
	if err != nil || !bytes.Contains(b, []byte(`retryPeriod \"1s&<x>\" is not a duration`)) {
		t.Errorf("%v: a refused value escaped for HTML, or missing:\n%s", err, b)
	}
	var out bytes.Buffer
	r.Print(&out)
	want := `fleet-controller: leaseDuration=30s renewDeadline=25s retryPeriod=10s
fleet-agent: leaseDuration=30s renewDeadline=25s retryPeriod=10s
rancher: leaseDuration=45s renewDeadline=30s retryPeriod=2s
fleet agent channel: unknown (no fleet-controller Deployment): nothing is written to clusters

No writes: everything is converged.

Restarts: 0 Deployment rollout(s), 0 fleet-agent redeploy(s), 0 cattle-cluster-agent redeploy(s), 0 cluster(s) whose nodes are re-planned.
Lock requests per hour (client-go v0.30+ leaders, one replica per Fleet process): Fleet controllers 0, fleet-agents 0.
`
	if out.String() != want {
		t.Errorf("%s\nwant\n%s", out.String(), want)
	}
}

// TestRancherConfigFleetV016Schema: a rancher-config value Fleet v0.16's
// chart refuses is rewritten by leasetune's write of that triple, and is
// reported where leasetune leaves the document alone.
func TestRancherConfigFleetV016Schema(t *testing.T) {
	withConfig := func(doc string) *inventory.Snapshot {
		s := snapshotWith(nil)
		s.RancherConfig = &corev1.ConfigMap{Data: map[string]string{"fleet": doc}}
		return s
	}
	r := FromSnapshot(withConfig("agent:\n  leaderElection:\n    leaseDuration: 30s\n    renewDeadline: 25s\n    retryPeriod: +10s\n"), nil)
	if len(r.LeftAlone) != 0 || len(r.Changes) != 1 || !strings.Contains(r.Changes[0].New, "retryPeriod: 10s") {
		t.Errorf("a refused value leasetune writes over: changes %+v, left alone %q", r.Changes, r.LeftAlone)
	}
	r = FromSnapshot(withConfig("leaderElection: &le\n  retryPeriod: +10s\nagent:\n  leaderElection: *le\n"), nil)
	var schema int
	for _, l := range r.LeftAlone {
		if strings.Contains(l, "leaderElection.retryPeriod: \"+10s\" is not what Fleet v0.16's chart accepts") && strings.Contains(l, fleet.ChartDurationPattern) {
			schema++
		}
	}
	if len(r.Changes) != 0 || schema != 2 {
		t.Errorf("a document leasetune leaves alone: changes %+v, left alone %q; want both refused values named", r.Changes, r.LeftAlone)
	}
}

// TestLocksLeftAlone: beside Rancher v2.13+ the plan lists rancher-turtles'
// and Cluster API's locks (and rancher-webhook's from v2.14), which leasetune's settings do not reach, with
// what they cost at their defaults; beside v2.12 or without Rancher, none.
func TestLocksLeftAlone(t *testing.T) {
	for _, tc := range []struct {
		image string
		want  []string
	}{
		{"", nil},
		{"rancher/rancher:v2.12.12", nil},
		{"rancher/rancher:v2.13.8", []string{"cattle-turtles-system/controller-leader-election-rancher-turtles", "cattle-capi-system/controller-leader-election-capi"}},
		{"rancher/rancher:v2.15.0", []string{"cattle-turtles-system/controller-leader-election-rancher-turtles", "cattle-capi-system/controller-leader-election-capi",
			"cattle-system/rancher-webhook-leader"}},
	} {
		s := snapshotWith(nil)
		if tc.image != "" {
			d := kit.Deployment("cattle-system", "rancher", kit.WithContainer("rancher"), kit.WithImage("rancher", tc.image))
			s.Rancher, s.RancherReplicas = d, 1
			s.RancherVersion, _ = rancher.Detect(d)
		}
		r := FromSnapshot(s, nil)
		var got []string
		for _, l := range r.Totals().LocksLeftAlone {
			got = append(got, l.Namespace+"/"+l.Name)
			if l.RequestsPerHour != 1800 || l.Defaults != "leaseDuration=15s renewDeadline=10s retryPeriod=2s" || l.Change == "" {
				t.Errorf("%s: %+v", tc.image, l)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v, want %v", tc.image, got, tc.want)
		}
		var b strings.Builder
		r.Print(&b)
		if n := strings.Count(b.String(), "Left alone: "); n != len(tc.want) {
			t.Errorf("%q: %d lines Left alone:\n%s", tc.image, n, b.String())
		}
	}
}

// TestTotalsCountKinds: Totals counts each object once by the kinds of its
// changes, whatever their words say.
func TestTotalsCountKinds(t *testing.T) {
	r := &Report{clusters: 7, Changes: []Change{
		{Object: "Deployment a/fleet-controller", Field: "x", Restarts: "words", Kinds: restart.Set{restart.DeploymentRollout}},
		{Object: "Deployment a/fleet-controller", Field: "y", Restarts: "words", Kinds: restart.Set{restart.DeploymentRollout}},
		{Object: "Deployment b/rancher", Field: "x", Restarts: "words", Kinds: restart.Set{restart.RancherRollout}},
		{Object: "ConfigMap b/rancher-config", Field: "x", Restarts: "fleet-agent every node cattle-cluster-agent"},
		{Object: "clusters.fleet.cattle.io f/c1", Restarts: "words", Kinds: restart.OfCluster(false, false)},
		{Object: "clusters.management.cattle.io c-1", Restarts: "words", Kinds: restart.OfCluster(true, false)},
		{Object: "clusters.management.cattle.io c-2", Restarts: "words", Kinds: restart.OfCluster(true, true)},
	}}
	got := r.Totals()
	want := Totals{Rollouts: 2, RancherRollout: true, FleetAgents: 3, ClusterAgents: 2, NodePlans: 1}
	if got.Rollouts != want.Rollouts || got.RancherRollout != want.RancherRollout || got.FleetAgents != want.FleetAgents ||
		got.ClusterAgents != want.ClusterAgents || got.NodePlans != want.NodePlans {
		t.Errorf("totals %+v, want %+v", got, want)
	}
	// fleet-agentmanagement's agent triple: one rollout, then every agent.
	r = &Report{clusters: 7, agentRollout: true, Changes: []Change{
		{Object: "Deployment a/fleet-controller", Field: "container fleet-agentmanagement env FLEET_AGENT_ELECTION_RETRY_PERIOD",
			Kinds: restart.Set{restart.DeploymentRollout, restart.FleetAgent}},
	}}
	if got := r.Totals(); got.Rollouts != 1 || got.FleetAgents != 7 || got.RancherRollout {
		t.Errorf("agent triple: totals %+v, want 1 rollout and 7 fleet-agents", got)
	}
}

// No fleet-controller, so no agent channel: the agentenv controller writes
// no cluster, and plan lists none (it listed the removal of leasetune's
// earlier entries, a write that never came).
func TestNoChannelNoClusterWrites(t *testing.T) {
	s := snapshotWith(nil)
	fc := kit.FleetCluster("fleet-default", "c1",
		kit.WithEnv(kit.Env("CATTLE_ELECTION_LEASE_DURATION=30s", "CATTLE_ELECTION_RENEW_DEADLINE=25s", "CATTLE_ELECTION_RETRY_PERIOD=5s")...),
		kit.WithAnnotations(map[string]string{"leasetune.io/agent-env": `{"CATTLE_ELECTION_LEASE_DURATION":"30s","CATTLE_ELECTION_RENEW_DEADLINE":"25s","CATTLE_ELECTION_RETRY_PERIOD":"5s"}`}))
	s.FleetClusters = append(s.FleetClusters, *fc)
	s.Clusters = inventory.Route(s.FleetClusters, nil, nil, rancher.Version{})
	r := FromSnapshot(s, nil)
	if len(r.Changes) != 0 {
		t.Errorf("changes %+v: want none while the channel is unknown", r.Changes)
	}
	s.Channel = fleet.ChannelFixedV012
	if r := FromSnapshot(s, nil); len(r.Changes) != 1 || r.Changes[0].Field != "spec.agentEnvVars" {
		t.Errorf("on %s, changes %+v: want the removal of leasetune's entries (Fleet renders the names)", s.Channel, r.Changes)
	}
}

// A proposal typed in an order the webhook would refuse step by step is
// planned as the page writes it: in an order it accepts (leaseDuration
// first, here). One no order takes is refused whole, first in the output,
// and nothing of it is planned.
func TestProposalInAnyOrder(t *testing.T) {
	s := snapshotWith(nil, gitjob())
	set := []Assignment{{"fleet-leader-election-retry-period", "30s"}, {"fleet-leader-election-renew-deadline", "60s"}, {"fleet-leader-election-lease-duration", "72s"}}
	r := FromSnapshot(s, set)
	want := []settings.Write{{Name: "fleet-leader-election-lease-duration", Value: "72s"}, {Name: "fleet-leader-election-renew-deadline", Value: "60s"}, {Name: "fleet-leader-election-retry-period", Value: "30s"}}
	if len(r.Refused) != 0 || !reflect.DeepEqual(r.Order, want) {
		t.Fatalf("refused %q, order %+v; want none and %+v", r.Refused, r.Order, want)
	}
	if got := r.Triples[settings.FleetController].Effective.String(); got != "leaseDuration=1m12s renewDeadline=1m0s retryPeriod=30s" {
		t.Errorf("fleet-controller after: %s", got)
	}

	r = FromSnapshot(s, []Assignment{{"fleet-leader-election-retry-period", "30s"}, {"fleet-leader-election-lease-duration", "72s"}})
	if len(r.Refused) != 1 || !strings.HasPrefix(r.Refused[0], "fleet-leader-election-lease-duration=72s fleet-leader-election-retry-period=30s: the fleet-controller triple is refused") ||
		len(r.Order) != 0 || len(r.Changes) != 0 {
		t.Fatalf("refused %q, order %+v, changes %+v: want one refusal naming both values, nothing planned", r.Refused, r.Order, r.Changes)
	}
	var out bytes.Buffer
	r.Print(&out)
	if !strings.HasPrefix(out.String(), "refused (as the webhook would, in every order") {
		t.Errorf("the refusal is not said first:\n%s", out.String())
	}
}
