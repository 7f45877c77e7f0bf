package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/metrics"
)

// review posts an AdmissionReview of obj to path and returns whether it was allowed.
func review(t *testing.T, mux *http.ServeMux, path, group, kind, user string, obj interface{}) bool {
	t.Helper()
	return answer(t, mux, path, group, kind, user, obj).Allowed
}

// answer posts an AdmissionReview of obj to path and returns the answer.
func answer(t *testing.T, mux *http.ServeMux, path, group, kind, user string, obj interface{}) *admissionv1.AdmissionResponse {
	t.Helper()
	raw, _ := json.Marshal(obj)
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u1", Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Group: group, Kind: kind}, Object: runtime.RawExtension{Raw: raw}},
	}
	ar.Request.UserInfo.Username = user
	body, _ := json.Marshal(ar)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("answer %d %q: %v", rec.Code, rec.Body.String(), err)
	}
	return out.Response
}

// TestRefusalsAreCounted: every refusal counts in
// leasetune_admission_refused_total by kind; what is allowed does not.
func TestRefusalsAreCounted(t *testing.T) {
	w := &Webhook{
		Source:         func(context.Context) ([]v3.Setting, map[string]string, error) { return nil, nil, nil },
		ServiceAccount: "system:serviceaccount:leasetune-system:leasetune",
		Log:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	mux := http.NewServeMux()
	w.Register(mux)
	setting := func(value string) *v3.Setting {
		s := v3.NewSetting("", "fleet-leader-election-retry-period", v3.Setting{Value: value})
		return s
	}
	cluster := func(retry string) map[string]interface{} {
		return map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
			"metadata": map[string]interface{}{"name": "edge-1", "namespace": "fleet-default",
				"annotations": map[string]interface{}{"election.cattle.io/retry-period": retry}}}
	}
	count := func(kind string) float64 { return testutil.ToFloat64(metrics.AdmissionRefused.WithLabelValues(kind)) }
	s0, o0 := count(RefusedSetting), count(RefusedOverride)

	if review(t, mux, SettingsPath, "management.cattle.io", "Setting", "admin", setting("5s")) != true {
		t.Error("a valid value refused")
	}
	if review(t, mux, SettingsPath, "management.cattle.io", "Setting", "admin", setting("10 s")) {
		t.Error("an unparsable value allowed")
	}
	if review(t, mux, SettingsPath, "management.cattle.io", "Setting", "admin", setting("30s")) {
		t.Error("retry period 30s against renew deadline 25s allowed")
	}
	if !review(t, mux, SettingsPath, "management.cattle.io", "Setting", w.ServiceAccount, setting("10 s")) {
		t.Error("leasetune's own write refused")
	}
	if !review(t, mux, OverridesPath, "fleet.cattle.io", "Cluster", "admin", cluster("5s")) {
		t.Error("a valid override refused")
	}
	if review(t, mux, OverridesPath, "fleet.cattle.io", "Cluster", "admin", cluster("soon")) {
		t.Error("an unparsable override allowed")
	}
	if got := count(RefusedSetting) - s0; got != 2 {
		t.Errorf("setting refusals counted %v, want 2", got)
	}
	if got := count(RefusedOverride) - o0; got != 1 {
		t.Errorf("override refusals counted %v, want 1", got)
	}
}

// TestOverrideRefusalNamesWhat: overrides no agent reads are refused with
// the object, each annotation and its value, and the rule.
func TestOverrideRefusalNamesWhat(t *testing.T) {
	w := &Webhook{
		Source: func(context.Context) ([]v3.Setting, map[string]string, error) { return nil, nil, nil },
		Channel: func(context.Context) (fleet.AgentChannel, bool, error) {
			return fleet.ChannelAgentManagement, true, nil
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	mux := http.NewServeMux()
	w.Register(mux)
	obj := map[string]interface{}{"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": "edge-1", "namespace": "fleet-default",
			"annotations": map[string]interface{}{"election.cattle.io/retry-period": "20s"}}}
	a := answer(t, mux, OverridesPath, "fleet.cattle.io", "Cluster", "admin", obj)
	msg := ""
	if a.Result != nil {
		msg = a.Result.Message
	}
	for _, want := range []string{`Cluster fleet-default/edge-1: election.cattle.io/retry-period="20s": `, "cannot be applied on agentmanagement"} {
		if a.Allowed || !strings.Contains(msg, want) {
			t.Errorf("allowed %t, message %q: want refused, with %q", a.Allowed, msg, want)
		}
	}
}
