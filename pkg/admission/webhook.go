package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/agentenv"
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/metrics"
	"leasetune.io/leasetune/pkg/rancher"
	"leasetune.io/leasetune/pkg/settings"
)

// Paths the webhook serves (the ValidatingWebhookConfiguration's paths).
const (
	SettingsPath  = "/validate-settings"
	OverridesPath = "/validate-cluster-overrides"
)

// Source reads, live from the kube-apiserver (a cache may lag behind the
// very write before this one), the Setting objects and the data of the
// Provider's state ConfigMap (nil when there is none).
type Source func(ctx context.Context) ([]v3.Setting, map[string]string, error)

// Webhook validates Setting values and cluster override annotations.
type Webhook struct {
	// Source gives the current values the checks are made against.
	Source Source
	// EnvSet reports whether a setting's env var is set on this pod (the
	// project's pod): such a setting is read-only, whatever its source says.
	EnvSet func(settings.Definition) bool
	// Channel reads, live, the Fleet agent channel in effect (the flag, else
	// the channel the leader recorded); false when none is known yet.
	// Nil: the channel is not checked.
	Channel func(ctx context.Context) (fleet.AgentChannel, bool, error)
	// JudgeAgentTriple, when set, judges a change of the global agent
	// triple by its effect on every agent (index.Index.Judge): an error
	// refuses the change. Nil: not judged.
	JudgeAgentTriple func(ctx context.Context, cur, next election.Timings, ch fleet.AgentChannel) error
	// ServiceAccount is the project's own user name
	// (system:serviceaccount:<ns>:<name>), whose writes are never refused.
	ServiceAccount string
	Log            *slog.Logger
}

// Register adds the webhook's handlers to mux.
func (w *Webhook) Register(mux *http.ServeMux) {
	mux.HandleFunc(SettingsPath, w.serve(RefusedSetting, w.reviewSetting))
	mux.HandleFunc(OverridesPath, w.serve(RefusedOverride, w.reviewOverrides))
}

// The kinds of refusal, the label of metrics.AdmissionRefused.
const (
	RefusedSetting  = "setting"
	RefusedOverride = "override"
)

// serve decodes an AdmissionReview, runs review, and answers; a refusal
// counts in metrics.AdmissionRefused as kind.
func (w *Webhook) serve(kind string, review func(context.Context, *admissionv1.AdmissionRequest) error) http.HandlerFunc {
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
			if err := review(r.Context(), ar.Request); err != nil {
				resp.Allowed = false
				metrics.AdmissionRefused.WithLabelValues(kind).Inc()
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
// its default), or changes a setting set by env (settings.CheckChange).
func (w *Webhook) reviewSetting(ctx context.Context, req *admissionv1.AdmissionRequest) error {
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
	objs, state, err := w.Source(ctx)
	if err != nil {
		return fmt.Errorf("read current settings: %w", err)
	}
	v := settings.View{Objects: objs, Remembered: settings.RememberedValues(state), EnvSet: w.EnvSet}
	if req.Operation == admissionv1.Create {
		// The object being created is not there yet: its own source counts.
		for i := range v.Objects {
			if v.Objects[i].Name == s.Name {
				v.Objects[i].Source = s.Source
			}
		}
	}
	if err := settings.CheckChange(v, s.Name, s.Value); err != nil {
		return err
	}
	return w.judgeAgents(ctx, v, s.Name, s.Value)
}

// judgeAgents refuses a change of an agent setting that would leave a
// fleet-agent with an invalid triple: on Fleet v0.13+ the global triple
// combines with the clusters' own CATTLE_ELECTION_* entries.
func (w *Webhook) judgeAgents(ctx context.Context, v settings.View, name, value string) error {
	d, _ := settings.Lookup(name)
	if d.Component != settings.FleetAgent || w.JudgeAgentTriple == nil || w.Channel == nil {
		return nil
	}
	ch, known, err := w.Channel(ctx)
	if err != nil || !known {
		return err
	}
	cur, curOK, next, nextOK, err := settings.Proposed(v, name, value)
	if err != nil || !curOK || !nextOK {
		return err
	}
	if err := w.JudgeAgentTriple(ctx, cur, next, ch); err != nil {
		return fmt.Errorf("setting %s %q refused: %w", name, value, err)
	}
	return nil
}

// reviewOverrides refuses override annotations that do not parse, that
// make an invalid triple with the global agent triple in effect (the
// Provider's, so the last good one when the current settings are refused),
// or that no agent of this Fleet could read without a duplicate env name
// (overrideReaches). Removing all of them is always allowed.
func (w *Webhook) reviewOverrides(ctx context.Context, req *admissionv1.AdmissionRequest) error {
	var u unstructured.Unstructured
	if err := json.Unmarshal(req.Object.Raw, &u.Object); err != nil {
		return fmt.Errorf("decode object: %w", err)
	}
	vals, set := agentenv.OverridesOf(&u)
	if !set[0] && !set[1] && !set[2] {
		return nil
	}
	if w.Channel != nil {
		ch, known, err := w.Channel(ctx)
		if err != nil {
			return fmt.Errorf("read the Fleet agent channel: %w", err)
		}
		if known {
			if err := overrideReaches(req.Kind.Group, &u, ch); err != nil {
				// Name the object and what was set, as a Setting's refusal does.
				var parts []string
				for i, a := range agentenv.OverrideAnnotations {
					if set[i] {
						parts = append(parts, fmt.Sprintf("%s=%q", a, vals[i]))
					}
				}
				ref := u.GetName()
				if u.GetNamespace() != "" {
					ref = u.GetNamespace() + "/" + ref
				}
				return fmt.Errorf("%s %s: %s: %w", req.Kind.Kind, ref, strings.Join(parts, " "), err)
			}
		}
	}
	objs, state, err := w.Source(ctx)
	if err != nil {
		return fmt.Errorf("read current settings: %w", err)
	}
	snap, _ := settings.Snapshot(objs, state)
	global := snap[settings.FleetAgent]
	if !global.HasEffective {
		// No triple in effect to check against: the values must still parse.
		for i, f := range election.Fields {
			if _, err := election.ParseDuration(f, vals[i]); set[i] && err != nil {
				return fmt.Errorf("annotation %s: %w", agentenv.OverrideAnnotations[i], err)
			}
		}
		return nil
	}
	checked, err := agentenv.Effective(global.Effective, vals, set)
	if err != nil {
		return fmt.Errorf("election override annotations refused: %w (the global agent triple %s with this cluster's overrides)%s",
			err, global.Effective, overrideHint(checked, set))
	}
	return nil
}

// overrideHint proposes override values that make a valid triple around the
// override last in the field order that is set (the one most likely just
// edited), by the same fit the settings' hints use; "" when none helps.
func overrideHint(checked election.Timings, set [3]bool) string {
	for i := len(election.Fields) - 1; i >= 0; i-- {
		if !set[i] {
			continue
		}
		f := election.Fields[i]
		fit := settings.FitAround(checked, f, checked.Get(f))
		if fit.Validate() != nil {
			return ""
		}
		var parts []string
		for j, g := range election.Fields {
			if fit.Get(g) != checked.Get(g) {
				parts = append(parts, agentenv.OverrideAnnotations[j]+"="+election.FormatDuration(fit.Get(g)))
			}
		}
		if len(parts) == 0 {
			return ""
		}
		return ". An order that works: set " + strings.Join(parts, " and ") + " on this cluster as well (one write), or choose another " + agentenv.OverrideAnnotations[i]
	}
	return ""
}

// overrideReaches says why override annotations on u cannot take effect on
// channel ch, or nil: the rule of agentenv.Decide (agentenv.OverridesUnread),
// with cattle-cluster-agent taken to read them on every cluster Rancher
// manages (the webhook does not know the Rancher version; the controller
// then reports what it cannot apply). A management Cluster with a name
// that is not legacy is skipped: its annotations are Rancher's copies of
// its provisioning Cluster's (rancher/rancher
// provisioningv2/cluster/controller.go, createNewCluster), and refusing
// Rancher's write would make its handler retry without end.
func overrideReaches(group string, u *unstructured.Unstructured, ch fleet.AgentChannel) error {
	if group == rancher.ManagementClusterGVR.Group && !rancher.IsLegacyName(u.GetName()) {
		return nil
	}
	standalone := group == fleet.ClusterGVR.Group
	if standalone {
		_, managed := u.GetLabels()[rancher.ClusterNameLabel]
		standalone = !managed
	}
	return agentenv.OverridesUnread(ch, !standalone)
}
