package settings_test

import (
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
	"leasetune.io/leasetune/tests/rancher"
)

// envThenRemoved runs a provider with the retry period's env override 4s
// (no user value ever set), stops it, and returns the triple it put in
// effect; the next provider the test starts runs without the override.
func envThenRemoved(t *testing.T, ns string) election.Timings {
	t.Helper()
	d, _ := settings.Lookup(retry)
	r := startProvider(t, ns, map[string]string{d.EnvVar(): "4s"})
	want := kit.Timings("30s", "25s", "4s")
	framework.Eventually(t, "the env value in effect", func() bool {
		s := getSetting(t, retry)
		return s.Source == v3.SourceEnv && r.effectiveIs(settings.FleetController, want)
	})
	r.stop()
	return want
}

// offEnvWith waits until the retry period's object is off source env with
// value, and r quiet; r must have put nothing but want in effect.
func offEnvWith(t *testing.T, r *running, value string, want election.Timings) {
	t.Helper()
	framework.Eventually(t, "off env with "+value, func() bool {
		s := getSetting(t, retry)
		return s.Source == "" && s.Value == value
	})
	quiet(t, r)
	assertOnly(t, r, want)
}

// quiet waits until the provider has published nothing new for a while.
func quiet(t *testing.T, r *running) {
	t.Helper()
	count := func() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.notified) }
	for n := -1; n != count(); {
		n = count()
		framework.Consistently(t, "nothing more published", framework.ConsistentlyMin, func() bool { return count() == n })
	}
}

// assertOnly fails unless every triple the provider published for the
// Fleet controllers is want.
func assertOnly(t *testing.T, r *running, want election.Timings) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := 0; i < len(r.notified); i += 2 { // FleetController, then FleetAgent
		if r.notified[i] != want {
			t.Errorf("published %s for the Fleet controllers; only %s was in effect", r.notified[i], want)
		}
	}
}

// TestLeaveEnvWithoutUserValue: with no user value, the env value stays as
// the value when the override goes (as Rancher's provider did) and nothing
// else is ever put in effect, also while the object is replaced, beside
// Rancher v2.15.0's webhook.
func TestLeaveEnvWithoutUserValue(t *testing.T) {
	for i := 0; i < 3; i++ { // the replace's delete and create race the cache
		cp.ResetSettings(t)
		wh := cp.StartRancherWebhook(t)
		ns := cp.Namespace(t)
		want := envThenRemoved(t, ns)
		r := startProvider(t, ns, nil)
		offEnvWith(t, r, "4s", want)
		if got, _ := r.Effective(settings.FleetController); got != want {
			t.Errorf("in effect %s, want %s", got, want)
		}
		for _, a := range wh.Refused() {
			t.Errorf("rancher-webhook refused the %s of %s: %s", a.Operation, a.Name, a.Message)
		}
		r.stop()
	}
}

// TestLeaveEnvCreateFails: the create after the replace's delete fails,
// past the replace's own retries (here a webhook refuses the first five
// creates; in life a lost leadership, a timeout, a restarted
// kube-apiserver): a later sync creates the object with the env value, and
// nothing else is put in effect meanwhile.
func TestLeaveEnvCreateFails(t *testing.T) {
	cp.ResetSettings(t)
	ns := cp.Namespace(t)
	want := envThenRemoved(t, ns)
	var creates atomic.Int32
	cp.ServeSettingWebhook(t, func(cc admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.ValidatingWebhookConfiguration {
		vwc := rancher.SettingWebhookConfiguration(cc)
		vwc.Name, vwc.Webhooks[0].Name = "flaky", "flaky.leasetune.io"
		fail := admissionregistrationv1.Fail
		vwc.Webhooks[0].FailurePolicy = &fail
		return vwc
	}, func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if req.Operation == admissionv1.Create && req.Name == retry && creates.Add(1) <= 5 {
			return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: "a transient failure", Code: 500}}
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	})
	r := startProvider(t, ns, nil)
	offEnvWith(t, r, "4s", want)
	if n := creates.Load(); n < 6 {
		t.Errorf("%d creates of %s, want the five refused ones and one more", n, retry)
	}
}

// TestLeaveEnvKeepsAFinalizer: an object with a finalizer (another
// controller's) is not deleted to leave source env: it is patched, as on
// Rancher before v2.15, and keeps its finalizer.
func TestLeaveEnvKeepsAFinalizer(t *testing.T) {
	cp.ResetSettings(t)
	ns := cp.Namespace(t)
	r := startProvider(t, ns, nil)
	setValue(t, retry, "5s")
	framework.Eventually(t, "5s", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "5s")) })
	r.stop()
	c := settingClient(t)
	if _, err := c.Patch(retry, types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/keep"]},"source":"env","value":"4s"}`)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Patch(retry, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)) })
	uid := getSetting(t, retry).UID
	r2 := startProvider(t, ns, nil)
	framework.Eventually(t, "patched off env with the user's value", func() bool {
		s := getSetting(t, retry)
		return s.Source == "" && s.Value == "5s"
	})
	s := getSetting(t, retry)
	if s.UID != uid || s.DeletionTimestamp != nil || len(s.Finalizers) != 1 {
		t.Errorf("the object was replaced or is being deleted: uid %s (was %s), deletionTimestamp %v, finalizers %v", s.UID, uid, s.DeletionTimestamp, s.Finalizers)
	}
	assertOnly(t, r2, kit.Timings("30s", "25s", "5s"))
}
