package settings_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

func TestCreatesMissingSettingsWithDefaults(t *testing.T) {
	cp.ResetSettings(t)
	r := startProvider(t, cp.Namespace(t), nil)
	for _, d := range settings.Registry {
		s := getSetting(t, d.Name)
		if s.Value != "" || s.Default != d.Default || s.Source != "" || s.Customized {
			t.Errorf("%s = value %q default %q source %q customized %v; want empty value, default %q",
				d.Name, s.Value, s.Default, s.Source, s.Customized, d.Default)
		}
	}
	for _, c := range settings.Components {
		want := election.FleetDefaults
		if c == settings.Rancher {
			want = election.WranglerDefaults // what Rancher runs with none set
		}
		framework.Eventually(t, "defaults in effect", func() bool { return r.effectiveIs(c, want) })
	}
}

func TestKeepsExistingValueAndFixesDefault(t *testing.T) {
	cp.ResetSettings(t)
	// Rancher's SetIfUnset semantics: an existing value is kept.
	c := settingClient(t)
	if _, err := c.Create(&v3.Setting{ObjectMeta: metav1.ObjectMeta{Name: retry}, Value: "5s", Default: "99s"}); err != nil {
		t.Fatal(err)
	}
	r := startProvider(t, cp.Namespace(t), nil)
	framework.Eventually(t, "default corrected", func() bool {
		s := getSetting(t, retry)
		return s.Default == "10s" && s.Value == "5s" && !s.Customized // stored as Rancher stores it (see stored_test.go)
	})
	framework.Eventually(t, "5s in effect", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "5s")) })

	// Someone edits default: the provider puts it back and never touches value.
	s := getSetting(t, retry)
	s.Default = "1s"
	if _, err := c.Update(s); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "default restored", func() bool { return getSetting(t, retry).Default == "10s" })
	if v := getSetting(t, retry).Value; v != "5s" {
		t.Errorf("value = %q, want 5s untouched", v)
	}
}

func TestUpdateTakesEffect(t *testing.T) {
	cp.ResetSettings(t)
	r := startProvider(t, cp.Namespace(t), nil)
	setValue(t, "fleet-agent-leader-election-retry-period", "4s")
	framework.Eventually(t, "agent retry 4s", func() bool { return r.effectiveIs(settings.FleetAgent, kit.Timings("30s", "25s", "4s")) })
	if got, _ := r.Effective(settings.FleetController); got != election.FleetDefaults {
		t.Errorf("controller triple changed to %s", got)
	}
	waitEvent(t, "fleet-agent-leader-election-retry-period", settings.ReasonApplied, "retryPeriod=4s")
	r.assertNotifiedValid(t)
}

func TestDeletedSettingIsRestoredWithUserValue(t *testing.T) {
	cp.ResetSettings(t)
	ns := cp.Namespace(t)
	r := startProvider(t, ns, nil)
	setValue(t, retry, "5s")
	want := kit.Timings("30s", "25s", "5s")
	framework.Eventually(t, "5s in effect", func() bool { return r.effectiveIs(settings.FleetController, want) })

	if err := settingClient(t).Delete(retry, &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The deletion must not push the default anywhere, not even briefly.
	done := make(chan struct{})
	go func() {
		defer close(done)
		framework.Consistently(t, "triple unchanged during delete and restore", framework.ConsistentlyMin,
			func() bool { return r.effectiveIs(settings.FleetController, want) })
	}()
	framework.Eventually(t, "restored with 5s", func() bool {
		s, err := settingClient(t).Get(retry, metav1.GetOptions{})
		return err == nil && s.Value == "5s"
	})
	<-done
	waitEvent(t, retry, settings.ReasonRestored, `"5s"`)
	r.assertNotifiedValid(t)
}

func TestDeletionAcrossRestartLosesNothing(t *testing.T) {
	cp.ResetSettings(t)
	ns := cp.Namespace(t)
	r := startProvider(t, ns, nil)
	setValue(t, lease, "60s")
	setValue(t, renew, "50s")
	setValue(t, retry, "20s")
	want := kit.Timings("60s", "50s", "20s")
	framework.Eventually(t, "60/50/20 in effect", func() bool { return r.effectiveIs(settings.FleetController, want) })
	r.stop()

	// While the project is down, Rancher (2.9+, at its start) deletes settings it does not know.
	cp.ResetSettings(t)

	r2 := startProvider(t, ns, nil)
	if !r2.effectiveIs(settings.FleetController, want) {
		got, ok := r2.Effective(settings.FleetController)
		t.Errorf("after restart effective = %s (%v), want %s", got, ok, want)
	}
	for name, v := range map[string]string{lease: "60s", renew: "50s", retry: "20s"} {
		if s := getSetting(t, name); s.Value != v {
			t.Errorf("%s restored with %q, want %q", name, s.Value, v)
		}
	}
	r2.assertNotifiedValid(t)
}

// TestEnvOverride runs beside the double of rancher-webhook v0.11.0's
// Setting rules (Rancher v2.15.0), which refuses an update that moves a
// Setting off source env: every write leasetune makes passes them.
func TestEnvOverride(t *testing.T) {
	cp.ResetSettings(t)
	wh := cp.StartRancherWebhook(t)
	ns := cp.Namespace(t)
	r := startProvider(t, ns, nil)
	setValue(t, retry, "5s")
	framework.Eventually(t, "user value 5s", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "5s")) })
	r.stop()

	d, _ := settings.Lookup(retry)
	if d.EnvVar() != "CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD" {
		t.Fatalf("env var name %s", d.EnvVar())
	}
	r2 := startProvider(t, ns, map[string]string{d.EnvVar(): "4s"})
	framework.Eventually(t, "env value in effect", func() bool { return r2.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "4s")) })
	framework.Eventually(t, "source env", func() bool { s := getSetting(t, retry); return s.Source == v3.SourceEnv && s.Value == "4s" })
	if err := r2.Set(context.Background(), retry, "3s"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Set on an env-sourced setting: %v, want read-only error", err)
	}
	// A direct edit of an env-sourced value is put back; it never takes effect.
	setValue(t, retry, "3s")
	framework.Eventually(t, "env value put back", func() bool { return getSetting(t, retry).Value == "4s" })
	if !r2.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "4s")) {
		t.Error("a direct edit of an env-sourced setting took effect")
	}
	r2.stop()

	// Without the env var the user's own value comes back.
	r3 := startProvider(t, ns, nil)
	framework.Eventually(t, "user value back", func() bool {
		s := getSetting(t, retry)
		return s.Source == "" && s.Value == "5s" && r3.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "5s"))
	})
	for _, a := range wh.Refused() {
		t.Errorf("rancher-webhook refused the %s of %s: %s", a.Operation, a.Name, a.Message)
	}
}

func TestInvalidValuesAreRefused(t *testing.T) {
	cp.ResetSettings(t)
	r := startProvider(t, cp.Namespace(t), nil)
	good := election.FleetDefaults
	cases := []struct {
		name, setting, value string
		parts                []string // in the Event message
	}{
		{"unparsable", retry, "10", []string{`retryPeriod "10" is not a duration`}},
		{"zero", retry, "0s", []string{"retryPeriod 0s must be greater than 0"}},
		{"negative", renew, "-5s", []string{"renewDeadline -5s must be greater than 0"}},
		{"sub-second lease", lease, "500ms", []string{"leaseDuration 500ms must be at least 1s"}},
		{"fractional lease", lease, "30.5s", []string{"leaseDuration 30.5s must be a whole number of seconds"}},
		{"retry above renew", retry, "30s", []string{"renewDeadline 25s must exceed 1.2 × retryPeriod 30s = 36s"}},
		{"renew equal to lease", renew, "30s", []string{"leaseDuration 30s must exceed renewDeadline 30s"}},
		{"over the upper bound", lease, "2h", []string{"leaseDuration 2h0m0s must be at most 1h0m0s"}},
		{"retry below the floor", retry, "999ms", []string{"retryPeriod 999ms must be at least 1s"}},
		{"10ms typed for 10s", retry, "10ms", []string{"retryPeriod 10ms must be at least 1s"}},
		{"renew below two retry periods", renew, "19.999s", []string{"renewDeadline 19.999s must be at least 2 × retryPeriod 10s = 20s, so the leader gets a second renewal attempt"}},
		{"leading space", retry, " 10s", []string{`retryPeriod " 10s" is not a duration: leading or trailing white space`}},
		{"trailing space", retry, "5s ", []string{`retryPeriod "5s " is not a duration: leading or trailing white space`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clearEvents(t)
			setValue(t, c.setting, c.value)
			msg := waitEvent(t, c.setting, settings.ReasonRefused, append(c.parts, "still in effect: "+good.String())...)
			t.Logf("event: %s", msg)
			if !r.effectiveIs(settings.FleetController, good) {
				t.Errorf("effective triple changed after %s=%q", c.setting, c.value)
			}
			if got := r.Status(settings.FleetController).Refused; got == nil {
				t.Error("status shows no refusal")
			}
			// Not trimmed, not defaulted: the stored value stays as the user wrote it.
			if s := getSetting(t, c.setting); s.Value != c.value {
				t.Errorf("value rewritten to %q", s.Value)
			}
			setValue(t, c.setting, "")
			framework.Eventually(t, "refusal cleared", func() bool { return r.Status(settings.FleetController).Refused == nil })
		})
	}
	r.assertNotifiedValid(t)
}

func TestEmptyValueMeansDefault(t *testing.T) {
	cp.ResetSettings(t)
	r := startProvider(t, cp.Namespace(t), nil)
	setValue(t, lease, "60s")
	setValue(t, renew, "50s")
	setValue(t, retry, "20s")
	framework.Eventually(t, "60/50/20", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("60s", "50s", "20s")) })

	// Empty retry: its default 10s with 60s/50s is valid.
	setValue(t, retry, "")
	framework.Eventually(t, "60/50/10", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("60s", "50s", "10s")) })

	// Empty lease: its default 30s is not above renew 50s: refused like any invalid value.
	clearEvents(t)
	setValue(t, lease, "")
	waitEvent(t, lease, settings.ReasonRefused, "leaseDuration 30s must exceed renewDeadline 50s")
	if !r.effectiveIs(settings.FleetController, kit.Timings("60s", "50s", "10s")) {
		t.Error("refused default took effect")
	}
}

func TestNoValidTripleAtStartWritesNothing(t *testing.T) {
	cp.ResetSettings(t)
	c := settingClient(t)
	// renew deadline 40s with the default lease 30s: never valid.
	if _, err := c.Create(&v3.Setting{ObjectMeta: metav1.ObjectMeta{Name: renew}, Value: "40s"}); err != nil {
		t.Fatal(err)
	}
	clearEvents(t)
	ns := cp.Namespace(t)
	r := startProvider(t, ns, nil)
	framework.Eventually(t, "refused", func() bool { return r.Status(settings.FleetController).Refused != nil })
	if got, ok := r.Effective(settings.FleetController); ok {
		t.Errorf("effective triple %s with invalid settings and no state", got)
	}
	waitEvent(t, renew, settings.ReasonRefused, "no valid triple is known")
	if _, ok := r.Effective(settings.FleetAgent); !ok {
		t.Error("the other component must not be affected")
	}
	if strings.Contains(stateConfigMap(t, ns).Data["effective"], string(settings.FleetController)) {
		t.Error("state records a triple for the controller component")
	}
}

// TestRandomEditsNeverPublishInvalidTriple applies random edits (valid,
// invalid, empty and deletions) one at a time and checks after each that
// the effective triple is the model's: the new one if it validates, else
// the last good one; and that no invalid triple was ever published.
func TestRandomEditsNeverPublishInvalidTriple(t *testing.T) {
	cp.ResetSettings(t)
	r := startProvider(t, cp.Namespace(t), nil)
	rng := kit.Rand(t, 1)

	pool := map[string][]string{
		lease: {"", "10s", "30s", "45s", "60s", "61s", "1.5s", "0s", "2h", " 30s", "x"},
		renew: {"", "8s", "25s", "30s", "40s", "50s", "-1s", "25"},
		retry: {"", "1s", "2s", "5s", "10s", "20s", "30s", "0s", "10s\t"},
	}
	names := []string{lease, renew, retry}
	defs := settings.Of(settings.FleetController)
	current := map[string]string{lease: "", renew: "", retry: ""}
	model := election.FleetDefaults

	for step := 0; step < 40; step++ {
		name := names[rng.Intn(3)]
		if rng.Intn(8) == 0 {
			// A deletion: restored with the same value, nothing changes.
			if err := settingClient(t).Delete(name, &metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, "restored", func() bool {
				s, err := settingClient(t).Get(name, metav1.GetOptions{})
				return err == nil && s.Value == current[name]
			})
		} else {
			v := pool[name][rng.Intn(len(pool[name]))]
			current[name] = v
			setValue(t, name, v)
		}
		var want [3]settings.Resolved
		for i, d := range defs {
			want[i] = settings.Resolve(d, settings.Input{Object: &v3.Setting{Value: current[d.Name]}})
		}
		if tmv, err := settings.Evaluate(settings.FleetController, want); err == nil {
			model = tmv
		}
		framework.Eventually(t, "edit evaluated", func() bool {
			return r.inputsAre(settings.FleetController, want[0].Value, want[1].Value, want[2].Value)
		})
		if got, ok := r.Effective(settings.FleetController); !ok || got != model {
			t.Fatalf("step %d (%s): effective %s, model %s", step, strings.Join([]string{current[lease], current[renew], current[retry]}, "|"), got, model)
		}
	}
	r.assertNotifiedValid(t)
}

func TestSetWritesOnlyValueAndValidates(t *testing.T) {
	cp.ResetSettings(t)
	r := startProvider(t, cp.Namespace(t), nil)
	ctx := context.Background()
	for _, bad := range []struct{ name, value, part string }{
		{retry, "30s", "renewDeadline 25s must exceed 1.2 × retryPeriod 30s = 36s"},
		{retry, "ten", `retryPeriod "ten" is not a duration`},
		{"no-such-setting", "1s", `unknown setting "no-such-setting"`},
		{retry, "999ms", "retryPeriod 999ms must be at least 1s"},
		{renew, "19s", "renewDeadline 19s must be at least 2 × retryPeriod 10s = 20s"},
	} {
		if err := r.Set(ctx, bad.name, bad.value); err == nil || !strings.Contains(err.Error(), bad.part) {
			t.Errorf("Set(%s, %q) = %v, want error containing %q", bad.name, bad.value, err, bad.part)
		}
	}
	if v := getSetting(t, retry).Value; v != "" {
		t.Errorf("a refused Set wrote %q", v)
	}
	// Labels and annotations others put on the object survive a Set.
	s := getSetting(t, retry)
	s.Labels = map[string]string{"cattle.io/creator": "norman"}
	if _, err := settingClient(t).Update(s); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, retry, "5s"); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "5s in effect", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "5s")) })
	if got := getSetting(t, retry); got.Labels["cattle.io/creator"] != "norman" || got.Value != "5s" {
		t.Errorf("after Set: labels %v value %q", got.Labels, got.Value)
	}
}

// TestFloorOnEveryEntry: both sides of the floor (retryPeriod ≥ 1s,
// renewDeadline ≥ 2 × retryPeriod) through a direct write (the Provider
// refuses it with an Event), Provider.Set and the env overrides.
func TestFloorOnEveryEntry(t *testing.T) {
	cp.ResetSettings(t)
	ns := cp.Namespace(t)
	r := startProvider(t, ns, nil)
	ctx := context.Background()
	good := election.FleetDefaults

	// A direct write below the floor is refused; the floor itself takes effect.
	clearEvents(t)
	setValue(t, retry, "999ms")
	waitEvent(t, retry, settings.ReasonRefused, "retryPeriod 999ms must be at least 1s", "still in effect: "+good.String())
	if !r.effectiveIs(settings.FleetController, good) {
		t.Error("retry 999ms took effect")
	}
	setValue(t, retry, "1s")
	framework.Eventually(t, "retry 1s in effect", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "1s")) })
	setValue(t, retry, "")
	framework.Eventually(t, "defaults again", func() bool { return r.effectiveIs(settings.FleetController, good) })
	clearEvents(t)
	setValue(t, renew, "19.999s")
	waitEvent(t, renew, settings.ReasonRefused, "renewDeadline 19.999s must be at least 2 × retryPeriod 10s = 20s")
	setValue(t, renew, "20s")
	framework.Eventually(t, "renew 20s in effect", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("30s", "20s", "10s")) })
	setValue(t, renew, "")
	framework.Eventually(t, "defaults again", func() bool { return r.effectiveIs(settings.FleetController, good) })

	// Provider.Set.
	if err := r.Set(ctx, retry, "999ms"); err == nil || !strings.Contains(err.Error(), "retryPeriod 999ms must be at least 1s") {
		t.Errorf("Set retry 999ms: %v", err)
	}
	if err := r.Set(ctx, retry, "1s"); err != nil {
		t.Errorf("Set retry 1s refused: %v", err)
	}
	framework.Eventually(t, "retry 1s in effect", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "1s")) })
	if err := r.Set(ctx, retry, ""); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "defaults again", func() bool { return r.effectiveIs(settings.FleetController, good) })
	r.assertNotifiedValid(t)
	r.stop()

	// The env overrides: below the floor refused (the last good triple
	// stays, the Event names the floor), the floor itself in effect.
	d, _ := settings.Lookup(retry)
	clearEvents(t)
	r2 := startProvider(t, ns, map[string]string{d.EnvVar(): "999ms"})
	waitEvent(t, retry, settings.ReasonRefused, "retryPeriod 999ms must be at least 1s", "still in effect: "+good.String())
	if !r2.effectiveIs(settings.FleetController, good) {
		got, _ := r2.Effective(settings.FleetController)
		t.Errorf("env retry 999ms: effective %s, want %s", got, good)
	}
	r2.assertNotifiedValid(t)
	r2.stop()
	ad, _ := settings.Lookup("fleet-agent-leader-election-renew-deadline")
	clearEvents(t)
	r3 := startProvider(t, ns, map[string]string{ad.EnvVar(): "19s"})
	waitEvent(t, ad.Name, settings.ReasonRefused, "renewDeadline 19s must be at least 2 × retryPeriod 10s = 20s")
	if !r3.effectiveIs(settings.FleetAgent, good) {
		t.Error("env agent renew 19s took effect")
	}
	r3.stop()
	r4 := startProvider(t, ns, map[string]string{d.EnvVar(): "1s", ad.EnvVar(): "20s"})
	framework.Eventually(t, "env retry 1s in effect", func() bool { return r4.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "1s")) })
	framework.Eventually(t, "env agent renew 20s in effect", func() bool { return r4.effectiveIs(settings.FleetAgent, kit.Timings("30s", "20s", "10s")) })
	r4.assertNotifiedValid(t)
}
