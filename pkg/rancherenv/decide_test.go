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
	"k8s.io/apimachinery/pkg/util/intstr"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/tests/kit"
)

var opted = election.Timings{LeaseDuration: 45 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 5 * time.Second}

// deployment is the Rancher Deployment of rancher/rancher:tag (kit.RancherDeployment).
var deployment = kit.RancherDeployment

// apply runs Decide and applies its patch to d, as the apiserver would
// (applyTo, review_test.go).
func apply(t *testing.T, d *appsv1.Deployment, in Input) (*appsv1.Deployment, Decision) {
	t.Helper()
	dec := Decide(d, in)
	if !dec.Write {
		return d, dec
	}
	got, err := applyTo(t, d, d, in)
	if err != nil {
		t.Fatalf("patch of %s/%s: %v", d.Namespace, d.Name, err)
	}
	return got, dec
}

func names(d *appsv1.Deployment) []string {
	var out []string
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}

func TestDecideLifecycle(t *testing.T) {
	d := deployment("v2.11.3")
	// Rancher's built-in triple needs no entries: nothing to write.
	if _, dec := apply(t, d, Input{Triple: election.WranglerDefaults, OK: true}); dec.Write || dec.Problem != "" {
		t.Fatalf("defaults: %+v", dec)
	}
	// Unknown triple: nothing.
	if _, dec := apply(t, d, Input{}); dec.Write {
		t.Fatalf("no triple: %+v", dec)
	}
	got, dec := apply(t, d, Input{Triple: opted, OK: true})
	if !dec.Write || dec.Version.String() != "v2.11.3" {
		t.Fatalf("opt-in: %+v", dec)
	}
	want := append(names(d), "CATTLE_ELECTION_LEASE_DURATION=45s", "CATTLE_ELECTION_RENEW_DEADLINE=30s", "CATTLE_ELECTION_RETRY_PERIOD=5s")
	if !reflect.DeepEqual(names(got), want) {
		t.Fatalf("env %v, want %v", names(got), want)
	}
	if rec := Record(got); len(rec) != 3 || rec["CATTLE_ELECTION_RETRY_PERIOD"] != "5s" {
		t.Fatalf("record %v", rec)
	}
	// Converged: no write.
	if _, dec := apply(t, got, Input{Triple: opted, OK: true}); dec.Write || dec.Problem != "" {
		t.Fatalf("converged: %+v", dec)
	}
	// A new triple: values in place, positions kept.
	next := election.Timings{LeaseDuration: 60 * time.Second, RenewDeadline: 40 * time.Second, RetryPeriod: 10 * time.Second}
	moved, dec := apply(t, got, Input{Triple: next, OK: true})
	if !dec.Write || names(moved)[6] != "CATTLE_ELECTION_RETRY_PERIOD=10s" || len(names(moved)) != 7 || Record(moved)["CATTLE_ELECTION_LEASE_DURATION"] != "1m0s" {
		t.Fatalf("change: %v %v", names(moved), Record(moved))
	}
	// Back to the defaults: leasetune's entries and record go.
	back, dec := apply(t, moved, Input{Triple: election.WranglerDefaults, OK: true})
	if !dec.Write || !dec.Remove || !reflect.DeepEqual(names(back), names(d)) {
		t.Fatalf("back to defaults: %+v %v", dec, names(back))
	}
	if _, ok := back.Annotations[RecordAnnotation]; ok {
		t.Fatal("record stayed")
	}
}

func TestDecideLeavesAlone(t *testing.T) {
	helmEntry := corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "4s"}
	ours := deployment("v2.11.3")
	ours, _ = apply(t, ours, Input{Triple: opted, OK: true})
	edited := ours.DeepCopy()
	edited.Spec.Template.Spec.Containers[0].Env[6].Value = "3s"
	dup := ours.DeepCopy()
	dup.Spec.Template.Spec.Containers[0].Env = append(dup.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "5s"})
	fromSecret := deployment("v2.11.3", corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", ValueFrom: &corev1.EnvVarSource{}})
	noContainer := deployment("v2.11.3")
	noContainer.Spec.Template.Spec.Containers[0].Name = "server"
	cases := map[string]struct {
		d    *appsv1.Deployment
		in   Input
		want Problem
		says string
	}{
		"2.8.2 reads no env":      {deployment("v2.8.2"), Input{Triple: opted, OK: true}, ProblemUnsupported, "wrangler v1"},
		"2.7 reads no env":        {deployment("v2.7.10"), Input{Triple: opted, OK: true}, ProblemUnsupported, "Rancher 2.8.3 and later"},
		"no release tag":          {deployment("head"), Input{Triple: opted, OK: true}, ProblemVersionUnknown, "--rancher-version"},
		"helm extraEnv":           {deployment("v2.11.3", helmEntry), Input{Triple: opted, OK: true}, ProblemForeign, "CATTLE_ELECTION_RETRY_PERIOD=4s"},
		"helm extraEnv, defaults": {deployment("v2.11.3", helmEntry), Input{Triple: election.WranglerDefaults, OK: true}, ProblemForeign, "not leasetune's"},
		"edited after leasetune":  {edited, Input{Triple: opted, OK: true}, ProblemForeign, "CATTLE_ELECTION_RETRY_PERIOD=3s"},
		"a duplicate":             {dup, Input{Triple: opted, OK: true}, ProblemForeign, "CATTLE_ELECTION_RETRY_PERIOD=5s"},
		"valueFrom":               {fromSecret, Input{Triple: opted, OK: true}, ProblemForeign, "(valueFrom)"},
		"no rancher container":    {noContainer, Input{Triple: opted, OK: true}, ProblemNoContainer, `no container "rancher"`},
	}
	for name, c := range cases {
		dec := Decide(c.d, c.in)
		if dec.Write || dec.Problem != c.want || !strings.Contains(dec.Reason, c.says) {
			t.Errorf("%s: %+v, want %s saying %q", name, dec, c.want, c.says)
		}
	}
	// --rancher-version replaces the image.
	if dec := Decide(deployment("head"), Input{Triple: opted, OK: true, Version: mustVersion(t, "v2.9.2")}); !dec.Write {
		t.Errorf("--rancher-version v2.9.2 on a head image: %+v", dec)
	}
}

func mustVersion(t *testing.T, s string) rancher.Version {
	t.Helper()
	v, ok := rancher.Parse(s)
	if !ok {
		t.Fatal(s)
	}
	return v
}

func TestDecideWaitsForSettled(t *testing.T) {
	paused := deployment("v2.11.3")
	paused.Spec.Paused = true
	unseen := deployment("v2.11.3")
	unseen.Generation = 2
	rolling := deployment("v2.11.3")
	rolling.Status.UpdatedReplicas, rolling.Status.Replicas = 1, 4
	short := deployment("v2.11.3")
	short.Status.AvailableReplicas, short.Status.UnavailableReplicas = 2, 1
	unavailable := deployment("v2.11.3")
	unavailable.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Message: "Deployment does not have minimum availability."}}
	for name, d := range map[string]*appsv1.Deployment{"paused": paused, "unseen generation": unseen, "rolling": rolling, "short": short, "unavailable": unavailable} {
		dec := Decide(d, Input{Triple: opted, OK: true})
		if dec.Write || dec.Problem != ProblemNotReady || dec.Reason == "" {
			t.Errorf("%s: %+v", name, dec)
		}
		// Nothing due: not reported as waiting.
		if dec := Decide(d, Input{Triple: election.WranglerDefaults, OK: true}); dec.Problem != "" {
			t.Errorf("%s with nothing due: %+v", name, dec)
		}
	}
}

func TestPatchBodyTestsTheList(t *testing.T) {
	d := deployment("v2.11.3")
	dec := Decide(d, Input{Triple: opted, OK: true})
	body, err := PatchBody(d, dec)
	if err != nil {
		t.Fatal(err)
	}
	// Someone added an entry since: the test op fails, nothing is applied.
	changed := d.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Env = append(changed.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "X", Value: "1"})
	raw, _ := json.Marshal(changed)
	p, _ := jsonpatch.DecodePatch(body)
	if _, err := p.Apply(raw); err == nil {
		t.Fatal("the patch applied over an env list it was not computed from")
	}
	// A container without env gets the list.
	bare := deployment("v2.11.3")
	bare.Spec.Template.Spec.Containers[0].Env = nil
	got, _ := apply(t, bare, Input{Triple: opted, OK: true})
	if len(names(got)) != 3 {
		t.Fatalf("env %v", names(got))
	}
}

func TestManagers(t *testing.T) {
	d := deployment("v2.11.3", corev1.EnvVar{Name: "CATTLE_ELECTION_RETRY_PERIOD", Value: "4s"})
	d.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"rancher\"}":{"f:env":{"k:{\"name\":\"CATTLE_ELECTION_RETRY_PERIOD\"}":{".":{},"f:name":{},"f:value":{}}}}}}}}}`)}},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:spec":{"f:replicas":{}}}`)}},
		{Manager: own.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(
			`{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"rancher\"}":{"f:env":{"k:{\"name\":\"CATTLE_ELECTION_RETRY_PERIOD\"}":{"f:value":{}}}}}}}}}`)}},
	}
	if got := Managers(d, "CATTLE_ELECTION_RETRY_PERIOD"); !reflect.DeepEqual(got, []string{"helm"}) {
		t.Errorf("managers %v, want [helm]", got)
	}
	if got := Managers(d, "CATTLE_ELECTION_LEASE_DURATION"); len(got) != 0 {
		t.Errorf("managers of an absent name: %v", got)
	}
}

// TestDecideRefusesStrategiesThatStopEveryReplica: a write under Recreate,
// or with maxUnavailable covering every replica, would take Rancher down.
func TestDecideRefusesStrategiesThatStopEveryReplica(t *testing.T) {
	recreate := deployment("v2.11.3")
	recreate.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	all := deployment("v2.11.3")
	three := intstr.FromInt32(3)
	all.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &three}}
	pct := deployment("v2.11.3")
	hundred := intstr.FromString("100%")
	pct.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &hundred}}
	for name, d := range map[string]*appsv1.Deployment{"Recreate": recreate, "maxUnavailable 3 of 3": all, "maxUnavailable 100%": pct} {
		if dec := Decide(d, Input{Triple: opted, OK: true}); dec.Write || dec.Problem != ProblemUnsafeStrategy {
			t.Errorf("%s: %+v", name, dec)
		}
	}
	// The chart's 1 of 3, and the API's default 25%: written.
	chart := deployment("v2.11.3")
	one := intstr.FromInt32(1)
	chart.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &one}}
	quarter := deployment("v2.11.3")
	q := intstr.FromString("25%")
	quarter.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &q}}
	for name, d := range map[string]*appsv1.Deployment{"chart": chart, "25%": quarter} {
		if dec := Decide(d, Input{Triple: opted, OK: true}); !dec.Write {
			t.Errorf("%s: %+v", name, dec)
		}
	}
}
