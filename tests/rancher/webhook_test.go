package rancher

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestSettingWebhook: the rules of rancher-webhook v0.11.0 the double
// keeps, each as validator.go and admission.go answer it.
func TestSettingWebhook(t *testing.T) {
	obj := func(name, source string) runtime.RawExtension {
		return runtime.RawExtension{Raw: []byte(`{"metadata":{"name":"` + name + `"},"value":"5s","source":"` + source + `"}`)}
	}
	user := authenticationv1.UserInfo{Username: "system:serviceaccount:leasetune-system:leasetune"}
	sudo := authenticationv1.UserInfo{Username: webhookSudo, Groups: []string{"system:masters"}}
	for name, c := range map[string]struct {
		op       admissionv1.Operation
		old, new runtime.RawExtension
		user     authenticationv1.UserInfo
		allowed  bool
		message  string
	}{
		"update off env": {admissionv1.Update, obj("fleet-leader-election-retry-period", "env"), obj("fleet-leader-election-retry-period", ""), user, false,
			`setting with source "" cannot update setting with source "env"`},
		"update staying env":       {admissionv1.Update, obj("fleet-leader-election-retry-period", "env"), obj("fleet-leader-election-retry-period", "env"), user, true, ""},
		"update onto env":          {admissionv1.Update, obj("fleet-leader-election-retry-period", ""), obj("fleet-leader-election-retry-period", "env"), user, true, ""},
		"create with source empty": {admissionv1.Create, runtime.RawExtension{}, obj("fleet-leader-election-retry-period", ""), user, true, ""},
		"cacerts is read only":     {admissionv1.Update, obj("cacerts", ""), obj("cacerts", ""), user, false, "setting is read only"},
		"the sudo account passes":  {admissionv1.Update, obj("fleet-leader-election-retry-period", "env"), obj("fleet-leader-election-retry-period", ""), sudo, true, ""},
		"the sudo name outside system:masters does not": {admissionv1.Update, obj("x", "env"), obj("x", "db"),
			authenticationv1.UserInfo{Username: webhookSudo}, false, `setting with source "db" cannot update setting with source "env"`},
	} {
		resp := SettingWebhook{}.Admit(&admissionv1.AdmissionRequest{Operation: c.op, OldObject: c.old, Object: c.new, UserInfo: c.user})
		if resp == nil || resp.Allowed != c.allowed {
			t.Errorf("%s: %+v, want allowed %v", name, resp, c.allowed)
			continue
		}
		if !c.allowed && (resp.Result == nil || resp.Result.Message != c.message || resp.Result.Code != 400) {
			t.Errorf("%s: result %+v, want 400 %q", name, resp.Result, c.message)
		}
	}
	if resp := (SettingWebhook{}).Admit(&admissionv1.AdmissionRequest{Operation: admissionv1.Update, Object: runtime.RawExtension{Raw: []byte("{")}}); resp != nil {
		t.Errorf("an undecodable update: %+v, want nil (a failure, which FailurePolicy Ignore lets through)", resp)
	}
}
