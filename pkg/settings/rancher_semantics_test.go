package settings

import (
	"encoding/json"
	"reflect"
	"testing"

	jsonpatch "github.com/evanphx/json-patch"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
)

// rancherSetAll is what Rancher's settings provider does to one setting
// with default def at its start, transcribed from rancher/rancher v2.11.3
// pkg/controllers/dashboardapi/settings/settings.go, SetAll (without
// DefaultOnUpgrade, which these settings do not have): obj nil is a setting
// that does not exist. It returns the object as Rancher stores it.
func rancherSetAll(obj *v3.Setting, name, def, envValue string, envOk bool) *v3.Setting {
	if obj == nil {
		s := &v3.Setting{Default: def}
		s.Name = name
		if envOk {
			s.Source = "env"
			s.Value = envValue
		}
		return s
	}
	obj = obj.DeepCopy()
	if obj.Default != def {
		obj.Default = def
	}
	if envOk && obj.Source != "env" {
		obj.Source = "env"
	}
	if !envOk && obj.Source == "env" {
		obj.Source = ""
	}
	if envOk && obj.Value != envValue {
		obj.Value = envValue
	}
	return obj
}

// apply returns obj with the JSON merge patch p applied, as the apiserver
// would store it.
func apply(t *testing.T, obj *v3.Setting, p map[string]interface{}) *v3.Setting {
	t.Helper()
	if len(p) == 0 {
		return obj
	}
	doc, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jsonpatch.MergePatch(doc, pb)
	if err != nil {
		t.Fatal(err)
	}
	var s v3.Setting
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestDesiredStoresWhatRancherStores: wherever Rancher's provider has the
// same information (no remembered user value: Rancher keeps none), the
// Setting leasetune creates, or patches an existing one into, is the one
// Rancher's SetAll stores: default, source "env" or empty, the env value,
// customized false (Rancher never sets it). And the stored JSON has all four
// fields, as Rancher's type (no omitempty) writes them.
func TestDesiredStoresWhatRancherStores(t *testing.T) {
	d := retryDef
	existing := []*v3.Setting{
		nil,
		obj("", "10s", "", false),
		obj("5s", "10s", "", false),
		obj("10s", "10s", "", false),
		obj("5s", "9s", "", false),
		obj("4s", "10s", "env", false),
		obj("", "10s", "env", false),
	}
	envs := []struct {
		v  string
		ok bool
	}{{"", false}, {"", true}, {"4s", true}, {"7s", true}}
	for _, o := range existing {
		for _, e := range envs {
			in := Input{Object: o, Env: e.v, EnvSet: e.ok}
			create, patch := Desired(d, in)
			var got *v3.Setting
			if o == nil {
				got = create
			} else {
				got = apply(t, o, patch)
			}
			want := rancherSetAll(o, d.Name, d.Default, e.v, e.ok)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("object %+v, env %q (set %v): leasetune stores %+v, Rancher %+v", o, e.v, e.ok, got, want)
			}
		}
	}

	create, _ := Desired(d, Input{})
	b, err := json.Marshal(create)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]interface{}
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	delete(fields, "metadata")
	if want := map[string]interface{}{"value": "", "default": "10s", "customized": false, "source": ""}; !reflect.DeepEqual(fields, want) {
		t.Errorf("stored JSON %v, want %v (Rancher's shape)", fields, want)
	}
}
