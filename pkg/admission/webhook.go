package admission

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/controllers/agentenv"
	"leasetune.io/leasetune/pkg/settings"
)

// Paths the webhook serves (the ValidatingWebhookConfiguration's paths).
const (
	SettingsPath  = "/validate-settings"
	OverridesPath = "/validate-cluster-overrides"
)

// Settings lists the current Setting objects (from a cache).
type Settings func() ([]v3.Setting, error)

// Webhook validates Setting values and cluster override annotations.
type Webhook struct {
	// Settings gives the current values the checks are made against.
	Settings Settings
	// ServiceAccount is the project's own user name
	// (system:serviceaccount:<ns>:<name>), whose writes are never refused.
	ServiceAccount string
	Log            *slog.Logger
}

// Register adds the webhook's handlers to mux.
func (w *Webhook) Register(mux *http.ServeMux) {
	mux.HandleFunc(SettingsPath, w.serve(w.reviewSetting))
	mux.HandleFunc(OverridesPath, w.serve(w.reviewOverrides))
}

// serve decodes an AdmissionReview, runs review, and answers.
func (w *Webhook) serve(review func(*admissionv1.AdmissionRequest) error) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 3<<20))
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		var ar admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &ar); err != nil || ar.Request == nil {
			http.Error(rw, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: ar.Request.UID, Allowed: true}
		if ar.Request.UserInfo.Username != w.ServiceAccount {
			if err := review(ar.Request); err != nil {
				resp.Allowed = false
				resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
					Reason: metav1.StatusReasonInvalid, Message: err.Error()}
				w.Log.Info("admission refused", "kind", ar.Request.Kind.Kind, "name", ar.Request.Name,
					"namespace", ar.Request.Namespace, "user", ar.Request.UserInfo.Username, "reason", err.Error())
			}
		}
		out, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: ar.TypeMeta, Response: resp})
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(out)
	}
}

// reviewSetting refuses a value of one of the project's settings that does
// not parse, has surrounding white space, makes its component's triple
// invalid with the other two current values (an empty value is checked as
// its default), or changes a setting set by env.
func (w *Webhook) reviewSetting(req *admissionv1.AdmissionRequest) error {
	var s v3.Setting
	if err := json.Unmarshal(req.Object.Raw, &s); err != nil {
		return fmt.Errorf("decode Setting: %w", err)
	}
	if _, ours := settings.Lookup(s.Name); !ours {
		return nil
	}
	if req.Operation == admissionv1.Update {
		var old v3.Setting
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return fmt.Errorf("decode old Setting: %w", err)
		}
		if old.Value == s.Value {
			return nil
		}
		if old.Source == v3.SourceEnv {
			d, _ := settings.Lookup(s.Name)
			return fmt.Errorf("setting %s is %w (%s): its value cannot be changed here", s.Name, settings.ErrReadOnly, d.EnvVar())
		}
	}
	objs, err := w.Settings()
	if err != nil {
		return fmt.Errorf("read current settings: %w", err)
	}
	// On create, the object's own source is what counts.
	for i := range objs {
		if objs[i].Name == s.Name && req.Operation == admissionv1.Create {
			objs[i].Source = s.Source
		}
	}
	return settings.CheckChange(objs, s.Name, s.Value)
}

// reviewOverrides refuses override annotations that do not parse or make
// an invalid triple with the current global agent triple. Removing them is
// always allowed.
func (w *Webhook) reviewOverrides(req *admissionv1.AdmissionRequest) error {
	var u unstructured.Unstructured
	if err := json.Unmarshal(req.Object.Raw, &u.Object); err != nil {
		return fmt.Errorf("decode object: %w", err)
	}
	ann := u.GetAnnotations()
	var vals [3]string
	var set [3]bool
	any := false
	for i, a := range agentenv.OverrideAnnotations {
		vals[i], set[i] = ann[a]
		any = any || set[i]
	}
	if !any {
		return nil
	}
	objs, err := w.Settings()
	if err != nil {
		return fmt.Errorf("read current settings: %w", err)
	}
	snap, _ := settings.Snapshot(objs, nil)
	agent := snap[settings.FleetAgent]
	if !agent.HasEffective {
		return nil // no valid global triple to check against: the controller reports it
	}
	if _, err := agentenv.Effective(agent.Effective, vals, set); err != nil {
		return fmt.Errorf("election override annotations refused with the global agent triple %s: %w", agent.Effective, err)
	}
	return nil
}
