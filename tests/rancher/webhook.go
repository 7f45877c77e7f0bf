package rancher

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SettingWebhook is a double of rancher-webhook v0.11.0's validation of
// management.cattle.io/v3 Settings, the webhook Rancher v2.15.0 installs
// (rancher/rancher v2.15.0 build.yaml: webhookVersion 110.0.0+up0.11.0), reduced to the rules
// that apply to every Setting name; the others check Settings of other
// names (agent-tls-mode, the auth-user-* and *-inactive-user-after ones,
// the agent priority class and PDB ones) and never leasetune's.
//
// rancher/webhook v0.11.0 pkg/resources/management.cattle.io/v3/setting/validator.go:
//   - Operations: Update and Create (not Delete).
//   - ValidatingWebhook: FailurePolicy Ignore.
//   - admitCreate: admitCommonCreateUpdate only, which checks other names.
//   - admitUpdate, first: old.Source == "env" && new.Source != "env" is
//     refused, ResponseBadRequest(`setting with source "<new source>"
//     cannot update setting with source "env"`).
//   - admitUpdate, then: a Setting named in ReadOnlySettings ("cacerts") is
//     refused, "setting is read only".
//
// pkg/admission/admission.go: ResponseBadRequest (Status Failure, reason
// BadRequest, code 400); bypassValidation lets the ServiceAccount
// cattle-system:rancher-webhook-sudo through when it is in system:masters;
// NewDefaultValidatingWebhook and CreateWebhookName (the webhook
// "rancher.cattle.io.settings.management.cattle.io": MatchPolicy
// Equivalent, SideEffects None, cluster scope); pkg/server/server.go: the
// ValidatingWebhookConfiguration "rancher.cattle.io".
type SettingWebhook struct{}

// SettingWebhookName and SettingWebhookConfig are the names Rancher's
// webhook registers.
const (
	SettingWebhookConfig = "rancher.cattle.io"
	SettingWebhookName   = "rancher.cattle.io.settings.management.cattle.io"
	webhookSudo          = "system:serviceaccount:cattle-system:rancher-webhook-sudo"
)

// setting is what the rules read of a Setting.
type setting struct {
	metav1.ObjectMeta `json:"metadata"`
	Source            string `json:"source"`
}

// Admit answers one admission request as rancher-webhook v0.11.0 does; nil
// where it fails (see below).
func (SettingWebhook) Admit(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allowed := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.UserInfo.Username == webhookSudo && slices.Contains(req.UserInfo.Groups, "system:masters") {
		return allowed
	}
	if req.Operation != admissionv1.Update {
		return allowed
	}
	// Admit returns an error for a request it cannot decode ("failed to get
	// Setting from request"), which the webhook serves as a failure and the
	// kube-apiserver, with FailurePolicy Ignore, lets through: nil here.
	var oldS, newS setting
	if json.Unmarshal(req.OldObject.Raw, &oldS) != nil || json.Unmarshal(req.Object.Raw, &newS) != nil {
		return nil
	}
	if oldS.Source == "env" && newS.Source != "env" {
		return badRequest(req, fmt.Sprintf("setting with source \"%s\" cannot update setting with source \"env\"", newS.Source))
	}
	if oldS.Name == "cacerts" {
		return badRequest(req, "setting is read only")
	}
	return allowed
}

func badRequest(req *admissionv1.AdmissionRequest, msg string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{UID: req.UID, Allowed: false, Result: &metav1.Status{
		Status: "Failure", Message: msg, Reason: metav1.StatusReasonBadRequest, Code: http.StatusBadRequest,
	}}
}

// SettingWebhookConfiguration is the ValidatingWebhookConfiguration
// rancher-webhook registers for Settings, with clientConfig.
func SettingWebhookConfiguration(clientConfig admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.ValidatingWebhookConfiguration {
	scope := admissionregistrationv1.ClusterScope
	ignore, equivalent, none := admissionregistrationv1.Ignore, admissionregistrationv1.Equivalent, admissionregistrationv1.SideEffectClassNone
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: SettingWebhookConfig},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:         SettingWebhookName,
			ClientConfig: clientConfig,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update, admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"management.cattle.io"}, APIVersions: []string{"v3"},
					Resources: []string{"settings"}, Scope: &scope},
			}},
			FailurePolicy: &ignore, MatchPolicy: &equivalent, SideEffects: &none,
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
		}},
	}
}
