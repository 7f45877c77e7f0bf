package electionstatus

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

func fleetCluster(ns, name string, labels, ann map[string]string, env ...map[string]interface{}) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": name, "namespace": ns}, "spec": map[string]interface{}{}}}
	u.SetLabels(labels)
	u.SetAnnotations(ann)
	if len(env) > 0 {
		items := make([]interface{}, len(env))
		for i, e := range env {
			items[i] = e
		}
		_ = unstructured.SetNestedSlice(u.Object, items, "spec", "agentEnvVars")
	}
	return u
}

func e(name, value string) map[string]interface{} {
	return map[string]interface{}{"name": name, "value": value}
}

func deployment(ns, name string, replicas int32, containers ...corev1.Container) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: containers}}}}
}

// installation is a Fleet v0.9 installation (the channel on which leasetune
// writes each cluster's env) with five standalone clusters: three plain,
// one with a retry-period override, one with a hand-written entry.
func installation() (*inventory.Snapshot, map[settings.Component]settings.ComponentStatus) {
	agent := election.Timings{LeaseDuration: 60e9, RenewDeadline: 50e9, RetryPeriod: 20e9}
	fleets := []unstructured.Unstructured{
		fleetCluster("fleet-default", "a", nil, nil),
		fleetCluster("fleet-default", "b", nil, nil),
		fleetCluster("fleet-default", "c", nil, nil),
		fleetCluster("fleet-default", "over", nil, map[string]string{agentenv.RetryPeriodAnnotation: "5s"}),
		fleetCluster("fleet-default", "hand", nil, nil, e("CATTLE_ELECTION_RETRY_PERIOD", "3s")),
	}
	ctrl := deployment(fleet.DefaultNamespace, fleet.ControllerDeployment, 1,
		corev1.Container{Name: "fleet-controller", Env: []corev1.EnvVar{{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "10s"}}})
	snap := &inventory.Snapshot{Channel: fleet.ChannelClusterEnvV09, Evidence: "test", FleetDeployments: []appsv1.Deployment{*ctrl},
		FleetClusters: fleets, FleetClusterCount: len(fleets)}
	snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
	triples := map[settings.Component]settings.ComponentStatus{}
	for _, c := range settings.Components {
		var objs []v3.Setting
		if c == settings.FleetAgent {
			for _, d := range settings.Of(c) {
				s := v3.Setting{Value: election.FormatDuration(agent.Get(d.Field))}
				s.Name = d.Name
				objs = append(objs, s)
			}
		}
		st, _ := settings.Snapshot(objs, nil)
		triples[c] = st[c]
	}
	return snap, triples
}

func TestComputeGroupsAndLists(t *testing.T) {
	snap, triples := installation()
	st := Compute(snap, triples, Options{})
	if len(st.Components) != 3 || st.Components[1].Component != "fleet-agent" || st.Components[1].InEffect.RetryPeriod != "20s" {
		t.Fatalf("components %+v", st.Components)
	}
	if got := st.Components[1].Settings[2]; got.Source != "user" || got.Value != "20s" {
		t.Errorf("the agent retry period %+v, want user 20s", got)
	}
	if got := st.Components[0].Settings[0]; got.Source != "default" || got.Value != "30s" {
		t.Errorf("the controller lease %+v, want default 30s", got)
	}
	if st.Agents.Clusters != 5 || len(st.Agents.Groups) != 3 {
		t.Fatalf("agents %+v, want 5 clusters in 3 groups (plain×3, override, hand-written)", st.Agents)
	}
	counts := map[int]int{}
	for _, g := range st.Agents.Groups {
		counts[g.Count]++
	}
	if counts[3] != 1 || counts[1] != 2 {
		t.Errorf("group sizes %v", counts)
	}
	if len(st.Clusters) != 2 || st.Clusters[0].Name != "fleet-default/hand" || st.Clusters[0].Problem != "foreign" ||
		st.Clusters[1].Name != "fleet-default/over" || st.Clusters[1].Effective == nil || st.Clusters[1].Effective.RetryPeriod != "5s" {
		t.Errorf("listed clusters %+v", st.Clusters)
	}
	if len(st.Components[0].Targets) != 1 || st.Components[0].Targets[0].Env[0].Value != "10s" {
		t.Errorf("controller targets %+v", st.Components[0].Targets)
	}
}

// TestComputeIsDeterministic: the same installation, its lists in any
// order, gives the same status byte for byte (the leader writes only
// when the bytes differ).
func TestComputeIsDeterministic(t *testing.T) {
	snap, triples := installation()
	want, _ := json.Marshal(Compute(snap, triples, Options{}))
	rnd := rand.New(rand.NewSource(1))
	for i := 0; i < 20; i++ {
		rnd.Shuffle(len(snap.FleetClusters), func(a, b int) {
			snap.FleetClusters[a], snap.FleetClusters[b] = snap.FleetClusters[b], snap.FleetClusters[a]
		})
		snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
		got, _ := json.Marshal(Compute(snap, triples, Options{}))
		if string(got) != string(want) {
			t.Fatalf("order %d gives another status:\n%s\n%s", i, got, want)
		}
	}
}

func TestComputeCapsTheListedClusters(t *testing.T) {
	snap, triples := installation()
	for i := 0; i < MaxClusters+7; i++ {
		snap.FleetClusters = append(snap.FleetClusters, fleetCluster("many", strings.Repeat("x", 3)+string(rune('a'+i%26))+string(rune('a'+i/26)),
			nil, map[string]string{agentenv.RetryPeriodAnnotation: "5s"}))
	}
	snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, rancher.Version{})
	st := Compute(snap, triples, Options{})
	if len(st.Clusters) != MaxClusters || st.ClustersNotListed != 2+7 {
		t.Errorf("%d listed, %d not listed; want %d and 9", len(st.Clusters), st.ClustersNotListed, MaxClusters)
	}
}

func TestComputeReadOnlyAndRancher(t *testing.T) {
	snap, triples := installation()
	snap.Rancher = deployment("cattle-system", "rancher", 3, corev1.Container{Name: rancher.Container, Image: "rancher/rancher:v2.12.12",
		Env: []corev1.EnvVar{{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "5s"}}})
	snap.RancherReplicas = 3
	snap.RancherVersion, _ = rancher.Detect(snap.Rancher)
	st := Compute(snap, triples, Options{EnvSet: func(d settings.Definition) bool { return d.Name == "rancher-leader-election-retry-period" }, RancherEnv: true})
	r := st.Components[2].Settings[2]
	if !r.ReadOnly || r.Source != "env" || !strings.Contains(r.ReadOnlyReason, r.EnvVar) {
		t.Errorf("an env-set setting %+v, want read-only saying which env var", r)
	}
	if !st.Rancher.Present || st.Rancher.Replicas != 3 || st.Rancher.Runs == nil || st.Rancher.Runs.RetryPeriod != "5s" || !st.Rancher.Managed {
		t.Errorf("rancher %+v", st.Rancher)
	}
	if len(st.Components[2].Targets) != 1 || st.Components[2].Targets[0].Object != "Deployment cattle-system/rancher" {
		t.Errorf("rancher targets %+v", st.Components[2].Targets)
	}
}
