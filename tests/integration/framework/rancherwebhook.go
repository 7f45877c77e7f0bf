package framework

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/tests/rancher"
)

// RancherWebhook is the double of rancher-webhook v0.11.0's Setting rules
// (tests/rancher SettingWebhook) served on loopback and registered with
// the kube-apiserver as Rancher v2.15.0 registers it; it keeps every answer
// it gave.
type RancherWebhook struct {
	mu      sync.Mutex
	answers []WebhookAnswer
}

// WebhookAnswer is one admission request and its answer.
type WebhookAnswer struct {
	Operation, Name, User string
	Allowed               bool
	Message               string
}

// Refused returns the answers that refused a request.
func (w *RancherWebhook) Refused() []WebhookAnswer {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []WebhookAnswer
	for _, a := range w.answers {
		if !a.Allowed {
			out = append(out, a)
		}
	}
	return out
}

// Answers returns every answer so far.
func (w *RancherWebhook) Answers() []WebhookAnswer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]WebhookAnswer(nil), w.answers...)
}

// StartRancherWebhook serves the double and registers it until t ends; it
// returns once the kube-apiserver calls it.
func (c *ControlPlane) StartRancherWebhook(t testing.TB) *RancherWebhook {
	t.Helper()
	w := &RancherWebhook{}
	c.ServeSettingWebhook(t, rancher.SettingWebhookConfiguration, func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		resp := rancher.SettingWebhook{}.Admit(req)
		a := WebhookAnswer{Operation: string(req.Operation), Name: req.Name, User: req.UserInfo.Username, Allowed: resp == nil || resp.Allowed}
		if resp != nil && resp.Result != nil {
			a.Message = resp.Result.Message
		}
		w.mu.Lock()
		w.answers = append(w.answers, a)
		w.mu.Unlock()
		return resp
	})
	w.mu.Lock()
	w.answers = nil // the probe's
	w.mu.Unlock()
	return w
}

// ServeSettingWebhook serves admit on loopback (TLS) as a validating
// webhook of Settings, registers the configuration config makes for it
// until t ends, and returns once the kube-apiserver calls it (a dry-run
// create of a Setting, which stores nothing; admit sees it). An admit that
// returns nil answers HTTP 500, as a webhook that fails does.
func (c *ControlPlane) ServeSettingWebhook(t testing.TB, config func(admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.ValidatingWebhookConfiguration,
	admit func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) {
	t.Helper()
	var called sync.Once
	seen := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(rw, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		called.Do(func() { close(seen) })
		resp := admit(review.Request)
		if resp == nil {
			http.Error(rw, "the webhook failed", http.StatusInternalServerError)
			return
		}
		resp.UID = review.Request.UID
		review.Request, review.Response = nil, resp
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := srv.URL + "/v1/webhook/validation/settings.management.cattle.io"
	vwc := config(admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca})
	vwcs := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	ctx := context.Background()
	_ = vwcs.Delete(ctx, vwc.Name, metav1.DeleteOptions{})
	if _, err := vwcs.Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vwcs.Delete(context.Background(), vwc.Name, metav1.DeleteOptions{}) })
	probe := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "management.cattle.io/v3", "kind": "Setting", "metadata": map[string]interface{}{"name": "webhook-probe"}}}
	res := dynamic.NewForConfigOrDie(c.Config).Resource(SettingsGVR)
	Eventually(t, "the kube-apiserver calls the webhook "+vwc.Name, func() bool {
		_, _ = res.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		select {
		case <-seen:
			return true
		default:
			return false
		}
	})
}
