package slim

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/rancher"
)

// TestSlimKeepsWhatTheControllerReads: the transformed object routes and
// decides exactly like the whole one, and carries none of the large parts.
func TestSlimKeepsWhatTheControllerReads(t *testing.T) {
	prov := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "provisioning.cattle.io/v1", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": "prod", "namespace": "fleet-default", "uid": "u1", "resourceVersion": "7",
			"labels": map[string]interface{}{"env": "prod"},
			"annotations": map[string]interface{}{agentenv.RetryPeriodAnnotation: "5s", agentenv.RecordAnnotation: `{"CATTLE_ELECTION_RETRY_PERIOD":"5s"}`,
				"objectset.rio.cattle.io/applied": "H4sIAAAA...big", "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			"managedFields": []interface{}{map[string]interface{}{"manager": "rancher"}}},
		"spec": map[string]interface{}{"agentEnvVars": []interface{}{map[string]interface{}{"name": "HTTPS_PROXY", "value": "p"}},
			"rkeConfig":         map[string]interface{}{"machinePools": []interface{}{map[string]interface{}{"name": "pool", "quantity": int64(3)}}},
			"kubernetesVersion": "v1.30.4+rke2r1"},
		"status": map[string]interface{}{"clusterName": "c-m-abcd1234", "conditions": []interface{}{map[string]interface{}{"type": "Ready"}}},
	}}
	out, err := slim(prov)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*unstructured.Unstructured)
	if _, ok := s.GetAnnotations()["objectset.rio.cattle.io/applied"]; ok {
		t.Error("Rancher's applied copy kept")
	}
	if len(s.GetManagedFields()) != 0 {
		t.Error("managedFields kept")
	}
	if v, _, _ := unstructured.NestedSlice(s.Object, "spec", "rkeConfig", "machinePools"); v != nil {
		t.Error("rkeConfig content kept")
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(s.Object, "status", "conditions"); found {
		t.Error("status kept")
	}
	if s.GetUID() != "u1" || s.GetResourceVersion() != "7" || rancher.ManagementNameOf(s) != "c-m-abcd1234" || !rancher.HasRKEConfig(s) ||
		s.GetAnnotations()[agentenv.RetryPeriodAnnotation] != "5s" || s.GetAnnotations()[agentenv.RecordAnnotation] == "" {
		t.Errorf("lost what is read: %v", s.Object)
	}
	if _, ok := s.GetLabels()["env"]; ok {
		t.Error("a label the controller does not read kept")
	}
	// The fingerprint is the whole object's: the same from the slim copy,
	// and another when a dropped label changes.
	if fingerprint(s) != fingerprint(prov) {
		t.Error("the slim copy's fingerprint differs from the whole object's")
	}
	relabelled := prov.DeepCopy()
	relabelled.SetLabels(map[string]string{"env": "staging"})
	if s2, _ := slim(relabelled); fingerprint(s2.(*unstructured.Unstructured)) == fingerprint(s) {
		t.Error("a change of a dropped label does not change the fingerprint")
	}
	fc := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": "prod", "namespace": "fleet-default", "labels": map[string]interface{}{rancher.ClusterNameLabel: "c-m-abcd1234"}}}}
	rv, _ := rancher.Parse("v2.10.3")
	whole, err1 := agentenv.Route(fc, prov, nil, rv)
	slimmed, err2 := agentenv.Route(fc, s, nil, rv)
	if err1 != nil || err2 != nil || whole.TargetRef != slimmed.TargetRef || whole.Provisioned != slimmed.Provisioned {
		t.Fatalf("routes differ: %+v %v / %+v %v", whole, err1, slimmed, err2)
	}
	decide := func(rt agentenv.Routing) agentenv.Decision {
		return agentenv.Decide(agentenv.Input{Facts: agentenv.FactsOf(rt.Target), Global: election.FleetDefaults, Channel: fleet.ChannelClusterEnvV09})
	}
	a, b := decide(whole), decide(slimmed)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("decisions differ:\n%+v\n%+v", a, b)
	}
}

// TestSlimInternsRepeatedStrings: two clusters with the same env share one
// copy of it (kept as JSON text), which reads back as the same entries; a
// string longer than internLen is not interned.
func TestSlimInternsRepeatedStrings(t *testing.T) {
	mk := func(name string) *unstructured.Unstructured {
		// Fresh strings, as the JSON decoder makes them.
		n, v := string([]byte("CATTLE_ELECTION_RETRY_PERIOD")), string([]byte("10s"))
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
			"metadata": map[string]interface{}{"name": name, "namespace": "fleet-default"},
			"spec": map[string]interface{}{"agentEnvVars": []interface{}{map[string]interface{}{"name": n, "value": v},
				map[string]interface{}{"name": "X", "valueFrom": map[string]interface{}{"resourceFieldRef": map[string]interface{}{"divisor": int64(1), "resource": "limits.memory"}}}}},
		}}
	}
	text := func(u interface{}) string {
		s, _, _ := unstructured.NestedString(u.(*unstructured.Unstructured).Object, "spec", agentenv.CompactEnvKey)
		return s
	}
	a, _ := slim(mk("a"))
	b, _ := slim(mk("b"))
	ta, tb := text(a), text(b)
	if ta == "" || unsafe.StringData(ta) != unsafe.StringData(tb) {
		t.Errorf("the env text is not shared: %q %q", ta, tb)
	}
	got, err := agentenv.EnvVars(a.(*unstructured.Unstructured))
	whole, _ := agentenv.EnvVars(mk("a"))
	if err != nil || len(got) != 2 || got[0]["name"] != "CATTLE_ELECTION_RETRY_PERIOD" || got[0]["value"] != "10s" {
		t.Fatalf("read back: %v %v", got, err)
	}
	// Written back as it was: the number keeps its text.
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(whole)
	if string(gj) != string(wj) {
		t.Errorf("read back %s, whole %s", gj, wj)
	}
	long := strings.Repeat("x", internLen+1)
	if got := interned.of(long); unsafe.StringData(got) != unsafe.StringData(long) {
		t.Error("a long string was copied")
	}
}
