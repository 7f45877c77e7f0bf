package settings_test

import (
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"leasetune.io/leasetune/pkg/settings"
	"leasetune.io/leasetune/tests/integration/framework"
	"leasetune.io/leasetune/tests/kit"
)

// rancherStores is the Setting, as stored JSON fields, that Rancher's
// settings provider makes for a setting with default def that does not
// exist yet (rancher/rancher v2.11.3 pkg/controllers/dashboardapi/settings/
// settings.go, SetAll: Default set; with the env var, Source "env" and Value
// the env value; Customized never set; its type, pkg/apis/management.cattle.io/
// v3/global_types.go, has no omitempty, so all four are stored).
func rancherStores(def, env string, envOk bool) map[string]interface{} {
	m := map[string]interface{}{"value": "", "default": def, "customized": false, "source": ""}
	if envOk {
		m["value"], m["source"] = env, "env"
	}
	return m
}

// stored returns the Setting's stored fields besides apiVersion, kind and
// metadata, as the apiserver answers them.
func stored(t *testing.T, name string) map[string]interface{} {
	t.Helper()
	u, err := dynamic.NewForConfigOrDie(cp.Config).Resource(framework.SettingsGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get setting %s: %v", name, err)
	}
	out := map[string]interface{}{}
	for k, v := range u.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// TestStoredAsRancherStoresThem: the Settings leasetune creates hold
// exactly the fields Rancher's own provider stores (value, default,
// customized false, source "env" or empty); a value a user sets leaves
// customized false and source empty, as Rancher's provider leaves them (only
// its /v3 API shows customized true and source "db", computed on read, as
// pkg/settingsapi does); a deleted Setting is restored the same way with the
// user's value; customized true, as an earlier leasetune stored it, is put
// back to false. A divergence from Rancher's stored shape fails here.
func TestStoredAsRancherStoresThem(t *testing.T) {
	cp.ResetSettings(t)
	const envSetting, emptyEnvSetting = "fleet-agent-leader-election-retry-period", "fleet-agent-leader-election-renew-deadline"
	envDef, _ := settings.Lookup(envSetting)
	emptyDef, _ := settings.Lookup(emptyEnvSetting)
	r := startProvider(t, cp.Namespace(t), map[string]string{envDef.EnvVar(): "4s", emptyDef.EnvVar(): ""})
	for _, d := range settings.Registry {
		env, envOk := map[string]string{envSetting: "4s", emptyEnvSetting: ""}[d.Name]
		if got, want := stored(t, d.Name), rancherStores(d.Default, env, envOk); !reflect.DeepEqual(got, want) {
			t.Errorf("%s created as %v; Rancher stores %v", d.Name, got, want)
		}
	}

	// A user's value: stored as it is; Rancher's provider leaves customized
	// and source alone.
	setValue(t, retry, "5s")
	framework.Eventually(t, "5s in effect", func() bool { return r.effectiveIs(settings.FleetController, kit.Timings("30s", "25s", "5s")) })
	want := map[string]interface{}{"value": "5s", "default": "10s", "customized": false, "source": ""}
	if !framework.Consistently(t, "a set value stored as Rancher stores it", framework.ConsistentlyMin, func() bool { return reflect.DeepEqual(stored(t, retry), want) }) {
		t.FailNow()
	}

	// Deleted: restored with the user's value, in the same shape.
	if err := settingClient(t).Delete(retry, &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "restored", func() bool {
		s, err := settingClient(t).Get(retry, metav1.GetOptions{})
		return err == nil && s.Value == "5s"
	})
	if got := stored(t, retry); !reflect.DeepEqual(got, want) {
		t.Errorf("%s restored as %v, want %v", retry, got, want)
	}

	// customized true, as leasetune before this change stored a set value.
	if _, err := settingClient(t).Patch(retry, types.MergePatchType, []byte(`{"customized":true}`)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "customized back to false", func() bool { return reflect.DeepEqual(stored(t, retry), want) })
}
