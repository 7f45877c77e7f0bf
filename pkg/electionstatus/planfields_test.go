package electionstatus

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/inventory"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// The fields a plan for another triple than the one in effect needs:
// what stops a write of the Rancher Deployment whatever the triple, the
// unroutable clusters' own entries (the judgement of a global agent
// triple reads every fleet Cluster), and rancher-config's name.
func TestComputeWhatAPlanNeeds(t *testing.T) {
	three := int32(3)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cattle-system", Name: "rancher", Generation: 2}}
	d.Spec.Replicas = &three
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "rancher", Image: "rancher/rancher:v2.12.3"}}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 3}
	gone := func(name, retry string) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
			"spec": map[string]interface{}{"agentEnvVars": []interface{}{
				map[string]interface{}{"name": "HTTP_PROXY", "value": "http://proxy"},
				map[string]interface{}{"name": "CATTLE_ELECTION_RETRY_PERIOD", "value": retry}}}}}
		u.SetNamespace("fleet-default")
		u.SetName(name)
		u.SetLabels(map[string]string{rancher.ClusterNameLabel: "c-m-" + name})
		return u
	}
	snap := &inventory.Snapshot{Options: inventory.Options{Namespace: "leasetune-system", FleetNamespace: "cattle-fleet-system", RancherNamespace: "cattle-system"},
		Rancher: d, RancherReplicas: 3, RancherConfig: &corev1.ConfigMap{Data: map[string]string{"fleet": "{}"}},
		FleetClusters: []unstructured.Unstructured{gone("a", "14s"), gone("b", "14s"), gone("c", "20s")}}
	snap.Clusters = inventory.Route(snap.FleetClusters, nil, nil, snap.RancherVersion)
	triples, err := settings.Snapshot(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := Compute(snap, triples, Options{})
	// At Rancher's defaults nothing is due, so Problem stays empty; the
	// rollout in progress would still stop a write.
	if st.Rancher.Problem != "" || !strings.HasPrefix(st.Rancher.WriteProblem, "not-ready: a rollout is in progress") {
		t.Errorf("rancher: problem %q, write problem %q", st.Rancher.Problem, st.Rancher.WriteProblem)
	}
	want := []Entries{
		{Count: 2, Entries: []EnvVar{{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "14s"}}},
		{Count: 1, Entries: []EnvVar{{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "20s"}}},
	}
	if st.Agents.Unroutable != 3 || !reflect.DeepEqual(st.Agents.UnroutableEntries, want) {
		t.Errorf("unroutable %d, entries %+v, want %+v", st.Agents.Unroutable, st.Agents.UnroutableEntries, want)
	}
	if st.RancherConfig.Object != "ConfigMap cattle-system/rancher-config" {
		t.Errorf("rancher-config object %q", st.RancherConfig.Object)
	}
	// A safe, settled Deployment: no write problem.
	d.Status.UpdatedReplicas = 3
	if st := Compute(snap, triples, Options{}); st.Rancher.WriteProblem != "" {
		t.Errorf("settled: write problem %q", st.Rancher.WriteProblem)
	}
}

// TestComputeReportsFleetV016SchemaProblems: a rancher-config fleet value
// Fleet v0.16's values schema refuses is named, with its key and the
// pattern, in the status; none for values it accepts.
func TestComputeReportsFleetV016SchemaProblems(t *testing.T) {
	triples, err := settings.Snapshot(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]int{
		"agent:\n  leaderElection:\n    retryPeriod: 10 s\n":          1,
		"leaderElection:\n  leaseDuration: 30\n  retryPeriod: +10s\n": 2,
		"leaderElection:\n  retryPeriod: 10s\n":                       0,
	} {
		snap := &inventory.Snapshot{Options: inventory.Options{RancherNamespace: "cattle-system"},
			RancherConfig: &corev1.ConfigMap{Data: map[string]string{"fleet": doc}}}
		st := Compute(snap, triples, Options{})
		if len(st.RancherConfig.SchemaProblems) != want {
			t.Errorf("%q: schema problems %q, want %d", doc, st.RancherConfig.SchemaProblems, want)
		}
		for _, p := range st.RancherConfig.SchemaProblems {
			if !strings.Contains(p, "leaderElection.") || !strings.Contains(p, fleet.ChartDurationPattern) {
				t.Errorf("%q: %q names no key or no pattern", doc, p)
			}
		}
	}
}
