//go:build upstream

package rancher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/upstream/framework"
)

// Test10RancherWebhook is case 10: rancher-webhook, which Rancher installs
// beside itself, and leasetune's webhook both judge every write of the
// nine Settings. rancher-webhook v0.11.0 (Rancher v2.15.0) refuses an
// update that moves a Setting off source "env" (rancher/webhook v0.11.0
// pkg/resources/management.cattle.io/v3/setting/validator.go admitUpdate)
// and nothing else of these names. Through it:
//   - an admin's PUT of a valid value through steve passes both webhooks;
//   - a value set through leasetune's env (chart value settingsEnv) makes
//     the object source "env"; a user's PUT through /v3/settings and
//     through steve is refused with a message that names the env var;
//   - removing the env var gives the Setting back the user's value: the
//     object leaves source "env" as rancher-webhook allows, deleted and
//     created again by leasetune, with no refused write;
//
// and each step writes each Fleet Deployment once, and only where the
// value in effect changed.
func Test10RancherWebhook(t *testing.T) {
	framework.Need(t, in)
	if in.Opts.Suite.Webhook == nil {
		t.Skipf("suite %s runs no rancher-webhook (package releases): the case is for rancher-webhook v0.11.0 beside Rancher v2.15.0", in.Opts.Suite.Name)
	}
	ctx := context.Background()
	const name = "fleet-leader-election-retry-period"
	var def settings.Definition
	for _, d := range settings.Registry {
		if d.Name == name {
			def = d
		}
	}
	vwc, err := in.CP.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "rancher.cattle.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	judged := false
	for _, w := range vwc.Webhooks {
		for _, r := range w.Rules {
			for _, res := range r.Resources {
				if res == "settings" {
					judged = true
					t.Logf("rancher-webhook judges settings: %s %v, failurePolicy %v", w.Name, r.Operations, *w.FailurePolicy)
				}
			}
		}
	}
	if !judged {
		t.Fatalf("rancher-webhook's ValidatingWebhookConfiguration has no rule for settings: %+v", vwc.Webhooks)
	}

	// A write rancher-webhook alone refuses shows it serving: its rule's
	// failurePolicy Ignore would let every write through unjudged were it
	// down. Each step starts with it.
	rancherWebhookJudges(t)

	// What earlier cases set takes effect first (a triple saved in the
	// dashboard waits for the settle time).
	in.Calm(t, 20*time.Second, 3*time.Minute)
	cur := in.SettingsTriple(t, "fleet-leader-election", election.FleetDefaults)
	userValue := cur.RetryPeriod + time.Second
	if err := cur.With(election.RetryPeriod, userValue).Validate(); err != nil {
		t.Fatalf("the step's value: %v", err)
	}
	fleetTriple := func(t *testing.T, want time.Duration) {
		t.Helper()
		for _, d := range framework.FleetDeployments {
			d := d
			framework.Within(t, 3*time.Minute, fmt.Sprintf("retry period %s on %s", want, d), func() bool {
				got, found := in.ContainerTriple(t, framework.FleetNamespace, d, d, election.CattlePrefix)
				return found && got.RetryPeriod == want
			})
		}
	}
	// oneRolloutEach: each Fleet Deployment once, leasetune as many
	// times as its chart's upgrades changed its pod template (settingsEnv).
	oneRolloutEach := func(t *testing.T, before map[string]int, leasetune int) {
		t.Helper()
		want := map[string]int{}
		for _, d := range framework.FleetDeployments {
			want[framework.FleetNamespace+"/"+d] = 1
		}
		if leasetune > 0 {
			want[framework.LeasetuneNamespace+"/leasetune"] = leasetune
		}
		in.WantRollouts(t, before, want)
	}
	// object is the Setting's value and source; "(absent)" between
	// leasetune's delete and create of it.
	object := func(t *testing.T) (value, source string) {
		u, err := in.Dyn.Resource(framework.SettingGVR).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", "(absent)"
		}
		if err != nil {
			t.Fatal(err)
		}
		v, _ := u.Object["value"].(string)
		s, _ := u.Object["source"].(string)
		return v, s
	}
	stevePut := func(t *testing.T, api *framework.RancherAPI, value string) (int, []byte) {
		t.Helper()
		code, body, err := api.Do(ctx, http.MethodGet, "/v1/management.cattle.io.settings/"+name, nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET the setting through steve: %d %v %s", code, err, body)
		}
		var s map[string]interface{}
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatal(err)
		}
		s["value"] = value
		code, body, err = api.Do(ctx, http.MethodPut, "/v1/management.cattle.io.settings/"+name, s)
		if err != nil {
			t.Fatal(err)
		}
		return code, body
	}
	refusedUpdates := func(rs []framework.Request) map[string]int {
		return framework.Count(rs, func(r framework.Request) bool {
			return r.Resource == "settings" && r.Code >= 400 && r.Verb != "get" && r.Verb != "list" && r.Verb != "watch"
		}, func(r framework.Request) string { return fmt.Sprintf("%s %s %s %d", r.User, r.Verb, r.Name, r.Code) })
	}

	t.Run("steve-put-passes-both", func(t *testing.T) {
		rancherWebhookJudges(t)
		before := in.Rollouts(t)
		mark, _ := in.Audit.Mark()
		if code, body := stevePut(t, in.Admin, election.FormatDuration(userValue)); code != http.StatusOK {
			t.Fatalf("an admin's PUT of %s through steve: %d %s", userValue, code, body)
		}
		fleetTriple(t, userValue)
		in.Calm(t, 20*time.Second, 3*time.Minute)
		if v, s := object(t); v != election.FormatDuration(userValue) || s != "" {
			t.Errorf("the Setting after the PUT: value %q source %q", v, s)
		}
		rs, _ := in.Audit.Since(mark)
		if r := refusedUpdates(rs); len(r) > 0 {
			t.Errorf("refused writes of settings: %v", r)
		}
		oneRolloutEach(t, before, 0)
	})

	envValue := userValue + time.Second
	t.Run("env-sets-the-setting", func(t *testing.T) {
		rancherWebhookJudges(t)
		before := in.Rollouts(t)
		mark, _ := in.Audit.Mark()
		upgradeLeasetune(t, "settingsEnv."+def.EnvVar()+"="+election.FormatDuration(envValue))
		framework.Within(t, 2*time.Minute, "the Setting set from env", func() bool {
			v, s := object(t)
			return v == election.FormatDuration(envValue) && s == "env"
		}, func() string { v, s := object(t); return fmt.Sprintf("value %q source %q", v, s) })
		fleetTriple(t, envValue)
		in.Calm(t, 20*time.Second, 3*time.Minute)
		rs, _ := in.Audit.Since(mark)
		if r := refusedUpdates(rs); len(r) > 0 {
			t.Errorf("refused writes of settings: %v", r)
		}
		oneRolloutEach(t, before, 1)
	})

	t.Run("users-refused-while-env-sets-it", func(t *testing.T) {
		rancherWebhookJudges(t)
		mark, _ := in.Audit.Mark()
		other := election.FormatDuration(envValue + time.Second)
		code, body, err := in.Admin.Do(ctx, http.MethodPut, "/v3/settings/"+name, map[string]string{"value": other})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("PUT /v3/settings/%s %s: %d %s", name, other, code, body)
		if code < 400 || !strings.Contains(string(body), def.EnvVar()) {
			t.Errorf("a PUT through /v3 of an env-set Setting: want a refusal naming %s, got %d %s", def.EnvVar(), code, body)
		}
		code, body = stevePut(t, in.Admin, other)
		t.Logf("PUT through steve %s: %d %s", other, code, body)
		if code < 400 || !strings.Contains(string(body), def.EnvVar()) {
			t.Errorf("a PUT through steve of an env-set Setting: want a refusal naming %s, got %d %s", def.EnvVar(), code, body)
		}
		time.Sleep(15 * time.Second)
		if v, s := object(t); v != election.FormatDuration(envValue) || s != "env" {
			t.Errorf("the refused PUTs changed the Setting: value %q source %q", v, s)
		}
		rs, _ := in.Audit.Since(mark)
		framework.LeasetuneWrites(t, rs, nil)
	})

	t.Run("env-removed-gives-the-users-value-back", func(t *testing.T) {
		rancherWebhookJudges(t)
		before := in.Rollouts(t)
		mark, _ := in.Audit.Mark()
		// As docs/install.md says: the release's values without the
		// entry, --reset-values (--reuse-values keeps an entry set to
		// null: seen here with helm v3.16.4).
		upgradeLeasetuneWithout(t, "settingsEnv", def.EnvVar())
		for _, c := range in.Deployment(t, framework.LeasetuneNamespace, "leasetune").Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == def.EnvVar() {
					t.Fatalf("helm upgrade left %s=%s on leasetune's container %s", e.Name, e.Value, c.Name)
				}
			}
		}
		framework.Within(t, 2*time.Minute, "the user's value back, off source env", func() bool {
			v, s := object(t)
			return v == election.FormatDuration(userValue) && s == ""
		}, func() string { v, s := object(t); return fmt.Sprintf("value %q source %q", v, s) })
		fleetTriple(t, userValue)
		in.Calm(t, 20*time.Second, 3*time.Minute)
		rs, _ := in.Audit.Since(mark)
		if r := refusedUpdates(rs); len(r) > 0 {
			t.Errorf("refused writes of settings (rancher-webhook refuses an update off source env): %v", r)
		}
		got := framework.Count(rs, func(r framework.Request) bool {
			return r.User == framework.Leasetune && r.Write() && r.Resource == "settings"
		}, func(r framework.Request) string { return r.Verb + " " + r.Name })
		if want := map[string]int{"delete " + name: 1, "create " + name: 1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("leasetune's Setting writes: %v, want %v (the object deleted and created again)", got, want)
		}
		oneRolloutEach(t, before, 1)
	})
	in.NoCrashes(t)
}

// rancherWebhookJudges writes a value of user-retention-cron that every
// rancher-webhook since v0.9 refuses and leasetune leaves alone (rancher/webhook
// v0.9.7 and v0.11.0 pkg/resources/management.cattle.io/v3/setting/validator.go
// validateUserRetentionCron: cron.ParseStandard), and wants the refusal from
// rancher-webhook. A write that passes is put back before the test fails.
func rancherWebhookJudges(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	const probe, bad = "user-retention-cron", "leasetune probe: not a cron spec"
	u, err := in.Dyn.Resource(framework.SettingGVR).Get(ctx, probe, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("rancher-webhook's probe: %v", err)
	}
	old := u.DeepCopy()
	u.Object["value"] = bad
	_, err = in.Dyn.Resource(framework.SettingGVR).Update(ctx, u, metav1.UpdateOptions{})
	if err == nil {
		if _, rerr := in.Dyn.Resource(framework.SettingGVR).Update(ctx, old, metav1.UpdateOptions{}); rerr != nil {
			t.Errorf("putting %s back: %v", probe, rerr)
		}
		t.Fatalf("rancher-webhook did not judge an update of Setting %s to %q: is it serving?", probe, bad)
	}
	if msg := err.Error(); !strings.Contains(msg, `admission webhook "rancher.cattle.io.`) || !strings.Contains(msg, bad) {
		t.Fatalf("an update of Setting %s to %q: want rancher-webhook's refusal, got %v", probe, bad, err)
	}
}

// upgradeLeasetuneWithout runs helm upgrade of leasetune's release with
// the values it has (helm get values) less the key path, and
// --reset-values, and waits for the new pod.
func upgradeLeasetuneWithout(t *testing.T, path ...string) {
	t.Helper()
	values := releaseValues(t)
	unstructured.RemoveNestedField(values, path...)
	b, _ := json.Marshal(values)
	file := filepath.Join(t.TempDir(), "values.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	chart, err := framework.LeasetuneChart()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Helm.Run("upgrade", "leasetune", chart, "--namespace", framework.LeasetuneNamespace, "--reset-values", "-f", file); err != nil {
		t.Fatal(err)
	}
	if err := in.WaitRunning(framework.LeasetuneNamespace, "leasetune", 3*time.Minute); err != nil {
		t.Fatalf("leasetune after helm upgrade: %v\n%s", err, in.Logs(framework.LeasetuneNamespace, "leasetune", 30))
	}
}

// releaseValues are the values leasetune's release was installed or last
// upgraded with (helm get values).
func releaseValues(t *testing.T) map[string]interface{} {
	t.Helper()
	out, err := in.Helm.Run("get", "values", "leasetune", "--namespace", framework.LeasetuneNamespace, "--output", "json")
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]interface{}
	if err := json.Unmarshal([]byte(out), &values); err != nil {
		t.Fatalf("helm get values: %v: %s", err, out)
	}
	return values
}
