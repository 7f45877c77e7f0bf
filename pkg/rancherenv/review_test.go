package rancherenv

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/own"
)

// applyTo applies the patch computed from d to other (what the apiserver
// holds by the time the patch arrives); the error is the patch's.
func applyTo(t *testing.T, d, other *appsv1.Deployment, in Input) (*appsv1.Deployment, error) {
	t.Helper()
	dec := Decide(d, in)
	if !dec.Write {
		t.Fatalf("no write due: %+v", dec)
	}
	body, err := PatchBody(d, dec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(body)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(other)
	out, err := p.Apply(raw)
	if err != nil {
		return nil, err
	}
	var got appsv1.Deployment
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return &got, nil
}

// A Deployment read without annotations gets the record by an "add" of the
// whole annotations map: that must not wipe annotations another writer
// (the Deployment controller's revision, kubectl annotate) added since.
func TestPatchBodyKeepsAnnotationsAddedMeanwhile(t *testing.T) {
	d := deployment("v2.11.3")
	d.Annotations = nil
	other := d.DeepCopy()
	other.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1"}
	got, err := applyTo(t, d, other, Input{Triple: opted, OK: true})
	if err == nil && got.Annotations["deployment.kubernetes.io/revision"] != "1" {
		t.Fatalf("the patch replaced the annotations another writer added: %v", got.Annotations)
	}
	// Nobody added any: the record is written.
	got, err = applyTo(t, d, d, Input{Triple: opted, OK: true})
	if err != nil || len(Record(got)) != 3 {
		t.Fatalf("record %v, %v", got, err)
	}
}

// The write was judged on a settled copy: if the spec changed since (a
// helm upgrade of the image, kubectl scale: a new generation, a rollout
// starting) or the Deployment was deleted and created again (a new uid,
// not yet rolled out), the patch must fail even when the env list is the
// same, so that the decision is made again from the fresh copy.
func TestPatchBodyTestsTheSettledCopy(t *testing.T) {
	d := deployment("v2.11.3")
	d.UID = "uid-1"
	upgraded := d.DeepCopy()
	upgraded.Generation = 2
	upgraded.Spec.Template.Spec.Containers[0].Image = "rancher/rancher:v2.11.4"
	if _, err := applyTo(t, d, upgraded, Input{Triple: opted, OK: true}); err == nil {
		t.Error("the patch applied over a spec changed since it was judged settled (new generation)")
	}
	recreated := d.DeepCopy()
	recreated.UID = "uid-2"
	recreated.Status = appsv1.DeploymentStatus{}
	if _, err := applyTo(t, d, recreated, Input{Triple: opted, OK: true}); err == nil {
		t.Error("the patch applied to a Deployment created again since (new uid)")
	}
	// The same object: applies (also without uid, as in the other tests).
	if _, err := applyTo(t, d, d, Input{Triple: opted, OK: true}); err != nil {
		t.Error(err)
	}
}

// One of leasetune's three entries removed by hand: the other two are
// still exactly its record, so the triple is completed again (all three,
// no duplicate), rather than left partial; back at the defaults the rest
// goes.
func TestDecideCompletesItsPartialTriple(t *testing.T) {
	ours, _ := apply(t, deployment("v2.11.3"), Input{Triple: opted, OK: true})
	for drop := 4; drop < 7; drop++ {
		partial := ours.DeepCopy()
		env := partial.Spec.Template.Spec.Containers[0].Env
		partial.Spec.Template.Spec.Containers[0].Env = append(append([]corev1.EnvVar{}, env[:drop]...), env[drop+1:]...)
		got, dec := apply(t, partial, Input{Triple: opted, OK: true})
		if !dec.Write || dec.Problem != "" {
			t.Fatalf("entry %d removed: %+v", drop, dec)
		}
		if e, found, err := election.CattlePrefix.FromEnv(got.Spec.Template.Spec.Containers[0].Env); !found || err != nil || e != opted || len(names(got)) != 7 {
			t.Fatalf("entry %d removed: env %v", drop, names(got))
		}
		if _, dec := apply(t, got, Input{Triple: opted, OK: true}); dec.Write {
			t.Fatalf("entry %d removed: no rest after the repair: %+v", drop, dec)
		}
		back, dec := apply(t, partial, Input{Triple: election.WranglerDefaults, OK: true})
		if !dec.Write || !dec.Remove || len(names(back)) != 4 {
			t.Fatalf("entry %d removed, defaults: %+v %v", drop, dec, names(back))
		}
	}
	// Removed and another writer's entry in its place: that one is foreign.
	taken := ours.DeepCopy()
	taken.Spec.Template.Spec.Containers[0].Env[6].Value = "9s"
	taken.Spec.Template.Spec.Containers[0].Env = taken.Spec.Template.Spec.Containers[0].Env[1:]
	if dec := Decide(taken, Input{Triple: opted, OK: true}); dec.Write || dec.Problem != ProblemForeign {
		t.Fatalf("foreign value: %+v", dec)
	}
}

// leasetune's own entries whose record annotation was removed by hand are
// left alone (nothing proves them leasetune's), but the report must say
// what is missing, not blame "another writer".
func TestDecideRecordRemovedSaysSo(t *testing.T) {
	ours, _ := apply(t, deployment("v2.11.3"), Input{Triple: opted, OK: true})
	// As the apiserver records leasetune's patch (an Update by its field
	// manager), and the removal of the annotation by kubectl annotate.
	var fields []string
	for _, n := range election.CattlePrefix.EnvNames() {
		fields = append(fields, `"k:{\"name\":\"`+n+`\"}":{".":{},"f:name":{},"f:value":{}}`)
	}
	ours.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"rancher\"}":{"f:env":{"k:{\"name\":\"CATTLE_NAMESPACE\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`)}},
		{Manager: own.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"rancher\"}":{"f:env":{` + strings.Join(fields, ",") + `}}}}}}}`)}},
	}
	delete(ours.Annotations, RecordAnnotation)
	dec := Decide(ours, Input{Triple: opted, OK: true})
	if dec.Write || dec.Problem != ProblemForeign || !strings.Contains(dec.Reason, RecordAnnotation) ||
		!strings.Contains(dec.Reason, "CATTLE_ELECTION_RETRY_PERIOD=5s, set by field manager leasetune") || strings.Contains(dec.Reason, "another writer") {
		t.Fatalf("record removed: %+v", dec)
	}
	ours.Annotations[RecordAnnotation] = "{not json"
	if dec := Decide(ours, Input{Triple: opted, OK: true}); dec.Write || dec.Problem != ProblemForeign || !strings.Contains(dec.Reason, "is unreadable") {
		t.Fatalf("record unreadable: %+v", dec)
	}
	ours.Annotations[RecordAnnotation] = `{"CATTLE_ELECTION_LEASE_DURATION":"45s","CATTLE_ELECTION_RENEW_DEADLINE":"30s","CATTLE_ELECTION_RETRY_PERIOD":"9s"}`
	if dec := Decide(ours, Input{Triple: opted, OK: true}); dec.Write || dec.Problem != ProblemForeign || !strings.Contains(dec.Reason, "CATTLE_ELECTION_RETRY_PERIOD=5s, set by field manager leasetune") || !strings.Contains(dec.Reason, "does not match") {
		t.Fatalf("record edited: %+v", dec)
	}
	// Without managedFields nothing tells who wrote them: not blamed on leasetune.
	ours.ManagedFields = nil
	if dec := Decide(ours, Input{Triple: opted, OK: true}); dec.Problem != ProblemForeign || !strings.Contains(dec.Reason, "set by another writer, not leasetune's;") {
		t.Fatalf("no managedFields: %+v", dec)
	}
}

// A triple pending in the settle time: nothing is written for the one in
// effect meanwhile (it would be one more rollout of every Rancher replica,
// for a triple the operator has already replaced).
func TestDecideWaitsWhilePending(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	dec := Decide(deployment("v2.11.3"), Input{Triple: opted, OK: true, PendingUntil: at})
	if dec.Write || dec.Problem != ProblemNotReady || !strings.Contains(dec.Reason, "settle") {
		t.Fatalf("pending: %+v", dec)
	}
	// Nothing due: nothing said.
	if dec := Decide(deployment("v2.11.3"), Input{Triple: election.WranglerDefaults, OK: true, PendingUntil: at}); dec.Problem != "" {
		t.Fatalf("pending, nothing due: %+v", dec)
	}
}

// The image forms Rancher is installed with: digests, registries with a
// port, pre-release tags (2.8.3's release candidates already build with
// wrangler/v2: rancher/rancher go.mod at v2.8.3-rc1), head builds.
func TestDecideImageForms(t *testing.T) {
	cases := map[string]Problem{
		"registry.example.com:5000/rancher/rancher:v2.9.3":            "",
		"rancher/rancher:v2.9.3@sha256:" + strings.Repeat("a", 64):    "",
		"rancher/rancher@sha256:" + strings.Repeat("a", 64):           ProblemVersionUnknown,
		"registry.example.com:5000/rancher/rancher":                   ProblemVersionUnknown,
		"rancher/rancher:v2.12.0-rc1":                                 "",
		"rancher/rancher:v2.8.3-rc1":                                  "",
		"rancher/rancher:v2.8.2-rc3":                                  ProblemUnsupported,
		"rancher/rancher:v2.9-head":                                   ProblemVersionUnknown,
		"registry.example.com:5000/rancher/rancher:v2.8.2@sha256:abc": ProblemUnsupported,
	}
	for image, want := range cases {
		d := deployment("v2.11.3")
		d.Spec.Template.Spec.Containers[0].Image = image
		dec := Decide(d, Input{Triple: opted, OK: true})
		if dec.Problem != want || dec.Write != (want == "") {
			t.Errorf("%s: %+v, want problem %q", image, dec, want)
		}
	}
}

// The rancher container after a sidecar: only its env changes.
func TestPatchBodyRancherNotFirst(t *testing.T) {
	d := deployment("v2.11.3")
	side := corev1.Container{Name: "istio-proxy", Image: "istio/proxyv2:1.22.0", Env: []corev1.EnvVar{{Name: "A", Value: "1"}}}
	d.Spec.Template.Spec.Containers = append([]corev1.Container{side}, d.Spec.Template.Spec.Containers...)
	got, dec := apply(t, d, Input{Triple: opted, OK: true})
	if !dec.Write || !reflect.DeepEqual(got.Spec.Template.Spec.Containers[0], side) || len(got.Spec.Template.Spec.Containers[1].Env) != 7 {
		t.Fatalf("%+v %+v", dec, got.Spec.Template.Spec.Containers)
	}
	if _, dec := apply(t, got, Input{Triple: opted, OK: true}); dec.Write {
		t.Fatalf("not at rest: %+v", dec)
	}
}
