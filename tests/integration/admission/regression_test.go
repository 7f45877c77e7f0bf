package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"leasetune.io/leasetune/pkg/admission"
	"leasetune.io/leasetune/pkg/agentenv"
	"leasetune.io/leasetune/pkg/fleet"
	"leasetune.io/leasetune/pkg/own"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// asLeasetune writes as the project's own (exempt) service account.
func asLeasetune(t *testing.T, s *server) dynamic.Interface {
	cfg := rest.CopyConfig(cp.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + s.ns + ":leasetune", Groups: []string{"system:masters"}}
	return dynamic.NewForConfigOrDie(cfg)
}

func setAs(t *testing.T, c dynamic.Interface, name, value string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"value": value})
	if _, err := c.Resource(framework.SettingsGVR).Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestQuickSuccessiveEditsAreJudgedOnCurrentValues: the webhook reads the
// settings live (a review found a cache lagging the previous write made it
// refuse the documented order, and accept an invalid pair, now and then).
func TestQuickSuccessiveEditsAreJudgedOnCurrentValues(t *testing.T) {
	s := startServer(t, nil)
	own := asLeasetune(t, s)
	for i := 0; i < 20; i++ {
		setAs(t, own, lease, "60s")
		setAs(t, own, renew, "50s")
		setAs(t, own, retry, "20s")
		for _, step := range []struct{ name, value string }{{retry, "10s"}, {renew, "25s"}, {lease, "30s"}} {
			if err := patchValue(step.name, step.value); err != nil {
				t.Fatalf("round %d: the documented order was refused at %s=%s: %v", i, step.name, step.value, err)
			}
		}
		setAs(t, own, lease, "60s")
		setAs(t, own, renew, "30s")
		setAs(t, own, retry, "10s")
		if err := patchValue(lease, "40s"); err != nil {
			t.Fatal(err)
		}
		if err := patchValue(renew, "50s"); err == nil {
			t.Fatalf("round %d: renew 50s accepted right after lease 40s", i)
		}
	}
}

// TestOverridesAreCheckedAgainstTheTripleInEffect: with invalid global
// agent settings, the Provider keeps its last good triple; overrides are
// checked against it, and unparsable ones are always refused.
func TestOverridesAreCheckedAgainstTheTripleInEffect(t *testing.T) {
	s := startServer(t, nil)
	framework.Eventually(t, "state written", func() bool {
		cm, err := cp.Client.CoreV1().ConfigMaps(s.ns).Get(context.Background(), "leasetune-state", metav1.GetOptions{})
		return err == nil && strings.Contains(cm.Data["effective"], "fleet-agent")
	})
	setAs(t, asLeasetune(t, s), "fleet-agent-leader-election-lease-duration", "10s") // invalid with 25s: refused by the Provider
	ns := cp.Namespace(t)
	r := dyn().Resource(fleet.ClusterGVR).Namespace(ns)
	for i, v := range []string{"ten", "30s", " 5s"} {
		fc := kit.FleetCluster(ns, fmt.Sprintf("c%d", i), kit.WithAnnotations(map[string]string{agentenv.RetryPeriodAnnotation: v}))
		if _, err := r.Create(context.Background(), fc, metav1.CreateOptions{}); err == nil {
			t.Errorf("override retry-period=%q accepted", v)
		}
	}
}

// TestPutNeedsOnlyGetAndPatch: the API reads the component's settings by
// name, so a user allowed get and patch (no list) can PUT.
func TestPutNeedsOnlyGetAndPatch(t *testing.T) {
	s := startServer(t, nil)
	tok := token(t, s.ns, "patcher", "get", "patch")
	if code, body := call(t, s, http.MethodPut, "/v3/settings/"+retry, tok, `{"value":"5s"}`); code != http.StatusOK {
		t.Errorf("valid PUT: %d %v", code, body)
	}
	if code, body := call(t, s, http.MethodPut, "/v3/settings/"+retry, tok, `{"value":"30s"}`); code != http.StatusUnprocessableEntity {
		t.Errorf("invalid PUT: %d %v", code, body)
	}
	for _, body := range []string{`{"value":"9s"} trailing`, `{"Value":"12s"}`, `{"value":null}`, `not json`} {
		if code, resp := call(t, s, http.MethodPut, "/v3/settings/"+retry, tok, body); code != http.StatusUnprocessableEntity {
			t.Errorf("body %q: %d %v", body, code, resp)
		}
	}
	if code, _ := call(t, s, http.MethodGet, "/v3/settings/server-url", "garbage", ""); code != http.StatusUnauthorized {
		t.Errorf("a bad token on an unknown name: %d, want 401", code)
	}
}

// TestEnvSettingCannotBeChangedInTwoSteps: clearing source first does not
// make an env-set setting writable (the env var is on the pod).
func TestEnvSettingCannotBeChangedInTwoSteps(t *testing.T) {
	startServer(t, map[string]string{"CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD": "4s"})
	framework.Eventually(t, "source env", func() bool {
		u, err := dyn().Resource(framework.SettingsGVR).Get(context.Background(), retry, metav1.GetOptions{})
		return err == nil && u.Object["source"] == "env"
	})
	body := []byte(`{"source":""}`)
	_, _ = dyn().Resource(framework.SettingsGVR).Patch(context.Background(), retry, types.MergePatchType, body, metav1.PatchOptions{})
	if err := patchValue(retry, "5s"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("second step: %v", err)
	}
}

// TestReplicasFollowARotatedSecret: the Secret is replaced (another replica
// made a new one after a deletion); a running replica serves the new
// certificate within its check interval, so writes pass again.
func TestReplicasFollowARotatedSecret(t *testing.T) {
	s := startServer(t, nil)
	ctx := context.Background()
	if err := cp.Client.CoreV1().Secrets(s.ns).Delete(ctx, own.WebhookSecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	_, ca, err := admission.EnsureCerts(ctx, cp.Client, s.ns, own.WebhookSecret, []string{"127.0.0.1"}) // the other replica
	if err != nil {
		t.Fatal(err)
	}
	if err := admission.PatchCABundle(ctx, cp.Client, "leasetune", ca); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "writes pass through the webhook again", func() bool { return patchValue(retry, "5s") == nil })

	// A Secret without ca.crt is an error, never an empty caBundle.
	bad := cp.Namespace(t)
	if _, _, err := admission.EnsureCerts(ctx, cp.Client, bad, "tls", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	sec, _ := cp.Client.CoreV1().Secrets(bad).Get(ctx, "tls", metav1.GetOptions{})
	delete(sec.Data, admission.CAKey)
	if _, err := cp.Client.CoreV1().Secrets(bad).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admission.EnsureCerts(ctx, cp.Client, bad, "tls", []string{"x"}); err == nil {
		t.Error("a Secret without ca.crt was accepted")
	}
}
