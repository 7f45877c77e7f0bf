package stayingup_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/pkg/manager"
	"leasetune.io/leasetune/tests/integration/framework"
)

// userValue is the setting a user sets before the CRD is deleted; the
// Settings leasetune restores afterwards must carry it.
const userValue, userSetting = "5s", "fleet-leader-election-retry-period"

// runningWithUserValue installs the Setting CRD, runs the controller with
// installCRDs, waits until it is ready with the nine Settings made, and
// sets userSetting to userValue, waiting until the provider remembers it.
func runningWithUserValue(t *testing.T, installCRDs bool) *running {
	t.Helper()
	installSettingCRD(t)
	r := start(t, cp.Config, manager.Config{InstallCRDs: installCRDs})
	r.waitFor(t, time.Minute, "/readyz", http.StatusOK)
	framework.Eventually(t, "the Settings made", allSettingsExist)
	if _, err := dynamic.NewForConfigOrDie(cp.Config).Resource(framework.SettingsGVR).Patch(context.Background(), userSetting, types.MergePatchType,
		[]byte(`{"value":"`+userValue+`"}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the user's value remembered", func() bool { return remembered(r.cfg.Namespace, userSetting, userValue) })
	return r
}

// TestSettingCRDDeletedWhileRunning: the Setting CRD is deleted (and with
// it every Setting) while the leader's controllers run.
//
// With --install-crds=false leasetune may not make it: the leader stops its
// controllers, /readyz answers 503 saying the CRD was deleted and how to
// fix it, a log line says so, /healthz stays ok and the process does not
// exit; once someone installs the CRD again the controllers start afresh,
// restore the nine Settings with the user's value, and the replica is
// ready again.
//
// With --install-crds the leader makes the CRD again itself, and the
// Settings come back the same way.
func TestSettingCRDDeletedWhileRunning(t *testing.T) {
	t.Run("install-crds=false", func(t *testing.T) {
		r := runningWithUserValue(t, false)
		deleteSettingCRD(t)
		body := r.waitFor(t, time.Minute, "/readyz", http.StatusServiceUnavailable,
			"Setting CRD: settings.management.cattle.io was deleted while the controllers ran", "--install-crds")
		t.Logf("readyz: %q", body)
		if code, b := get("http://" + r.health + "/healthz"); code != http.StatusOK {
			t.Errorf("healthz %d %q while only waiting", code, b)
		}
		logs := r.logs.String()
		if !strings.Contains(logs, "the Setting CRD settings.management.cattle.io was deleted; the controllers are stopped until it is back") ||
			!strings.Contains(logs, "waiting for the Setting CRD") {
			t.Errorf("no log line says the CRD was deleted and is awaited")
		}
		time.Sleep(3 * time.Second)
		r.alive(t)
		if settingCRDServed() {
			t.Fatal("the CRD came back with --install-crds=false")
		}

		installSettingCRD(t)
		r.waitFor(t, 90*time.Second, "/readyz", http.StatusOK) // polled every 10s, then the components start
		framework.Eventually(t, "the Settings restored", allSettingsExist)
		if v, _ := settingValue(userSetting); v != userValue {
			t.Errorf("%s restored with %q, want the user's %q", userSetting, v, userValue)
		}
		if !strings.Contains(r.logs.String(), "the Setting CRD is back; starting the controllers again") {
			t.Errorf("no log line says the controllers start again")
		}
		r.alive(t)
	})

	t.Run("install-crds=true", func(t *testing.T) {
		r := runningWithUserValue(t, true)
		old := settingCRDUID()
		deleteSettingCRD(t)
		framework.Eventually(t, "the CRD made again by leasetune", func() bool {
			uid := settingCRDUID()
			return uid != "" && uid != old && settingCRDServed()
		})
		framework.Eventually(t, "the Settings restored", func() bool {
			v, _ := settingValue(userSetting)
			return allSettingsExist() && v == userValue
		})
		r.waitFor(t, time.Minute, "/readyz", http.StatusOK)
		if logs := r.logs.String(); !strings.Contains(logs, "was deleted; the controllers are stopped until it is back") ||
			!strings.Contains(logs, `msg="installed the Setting CRD" again=true`) {
			t.Errorf("no log line says the CRD was deleted and made again")
		}
		r.alive(t)
	})
}
