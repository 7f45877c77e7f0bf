package settings_test

import (
	"strings"
	"testing"
	"time"

	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// TestThreeEditsInARowTakeEffectOnce: the three agent settings edited one
// after another within the settle time (the webhook's own hint gives such
// an order) make one change in effect, not three: one notification, one
// TimingsApplied per setting, a TimingsPending first; the intermediate
// triples never take effect.
func TestThreeEditsInARowTakeEffectOnce(t *testing.T) {
	cp.ResetSettings(t)
	clearEvents(t)
	ns := cp.Namespace(t)
	const settle = 4 * time.Second
	r := startProviderWith(t, ns, nil, settle)
	framework.Eventually(t, "defaults in effect", func() bool { return r.effectiveIs(settings.FleetAgent, kit.Timings("30s", "25s", "10s")) })
	r.mu.Lock()
	r.notified = nil
	r.mu.Unlock()

	began := time.Now()
	setValue(t, "fleet-agent-leader-election-lease-duration", "60s")
	time.Sleep(time.Second)
	setValue(t, "fleet-agent-leader-election-renew-deadline", "50s")
	time.Sleep(time.Second)
	setValue(t, "fleet-agent-leader-election-retry-period", "20s")
	want := kit.Timings("60s", "50s", "20s")
	waitEvent(t, "fleet-agent-leader-election-retry-period", settings.ReasonPending, want.String(), "once the settings have been unchanged for 4s")
	if st := r.Status(settings.FleetAgent); st.Pending == nil || *st.Pending != want {
		t.Errorf("status while pending: %+v", st)
	}
	if !framework.Consistently(t, "the old triple stays until the settle time has passed", settle-time.Second, func() bool {
		return r.effectiveIs(settings.FleetAgent, kit.Timings("30s", "25s", "10s"))
	}) {
		t.FailNow()
	}
	framework.Eventually(t, "the whole triple in effect", func() bool { return r.effectiveIs(settings.FleetAgent, want) })
	if took := time.Since(began); took < 2*time.Second+settle {
		t.Errorf("took effect after %s, before the settings had been unchanged for %s", took, settle)
	}
	time.Sleep(time.Second)
	r.mu.Lock()
	notified := append([]interface{}{}, func() []interface{} {
		var out []interface{}
		for _, n := range r.notified {
			out = append(out, n)
		}
		return out
	}()...)
	r.mu.Unlock()
	// Each notification lists the triples in effect of both components.
	changes := 0
	for _, n := range notified {
		if strings.Contains(n.(interface{ String() string }).String(), "1m0s") {
			changes++
		}
	}
	if len(notified) != 2 || changes != 1 {
		t.Errorf("notified %v: want one change (both components listed once)", notified)
	}
	for _, name := range []string{"fleet-agent-leader-election-lease-duration", "fleet-agent-leader-election-renew-deadline", "fleet-agent-leader-election-retry-period"} {
		var applied []string
		for _, m := range events(t, name, settings.ReasonApplied) {
			if strings.Contains(m, "1m0s") {
				applied = append(applied, m)
			}
		}
		if len(applied) != 1 || !strings.Contains(applied[0], want.String()) {
			t.Errorf("%s: applied events %v, want one for %s", name, applied, want)
		}
	}
	r.assertNotifiedValid(t)
}

// TestInvalidStoredTripleKeepsTheLastGoodWhole: two edits that are each
// valid against the triple in effect but together invalid (renew 13s and
// retry 11s against 30s/25s/10s: 13s < 2 × 11s) leave the last good triple
// whole in effect, not a mix nobody chose, and nothing pending.
func TestInvalidStoredTripleKeepsTheLastGoodWhole(t *testing.T) {
	cp.ResetSettings(t)
	ns := cp.Namespace(t)
	r := startProviderWith(t, ns, nil, 2*time.Second)
	framework.Eventually(t, "defaults in effect", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "10s")) })
	setValue(t, "fleet-leader-election-renew-deadline", "13s")
	setValue(t, "fleet-leader-election-retry-period", "11s")
	framework.Eventually(t, "inputs seen", func() bool { return r.inputsAre(settings.FleetController, "30s", "13s", "11s") })
	if !framework.Consistently(t, "the last good triple stays whole", 4*time.Second, func() bool {
		st := r.Status(settings.FleetController)
		return r.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "10s")) && st.Pending == nil
	}) {
		t.FailNow()
	}
	r.assertNotifiedValid(t)
}

// TestBothComponentsInOneChangeTakeEffectTogether: one intended change that
// spans both components (a controller and an agent setting, a second
// apart) takes effect in one step, so the fleet-controller Deployment,
// which carries both triples, and rancher-config roll once, not twice (an
// e2e test found two writes when each component settled on its own).
func TestBothComponentsInOneChangeTakeEffectTogether(t *testing.T) {
	cp.ResetSettings(t)
	ns := cp.Namespace(t)
	r := startProviderWith(t, ns, nil, 3*time.Second)
	framework.Eventually(t, "defaults in effect", func() bool { return r.effectiveIs(settings.FleetAgent, kit.Timings("30s", "25s", "10s")) })
	r.mu.Lock()
	r.notified = nil
	r.mu.Unlock()
	setValue(t, "fleet-leader-election-lease-duration", "40s")
	time.Sleep(time.Second)
	setValue(t, "fleet-agent-leader-election-lease-duration", "40s")
	framework.Eventually(t, "both in effect", func() bool {
		return r.effectiveIs(settings.FleetController, kit.Timings("40s", "25s", "10s")) && r.effectiveIs(settings.FleetAgent, kit.Timings("40s", "25s", "10s"))
	})
	time.Sleep(time.Second)
	r.mu.Lock()
	n := len(r.notified)
	r.mu.Unlock()
	if n != 2 { // one notification lists both components
		t.Errorf("%d triples notified, want 2 (one notification for both)", n)
	}
}
