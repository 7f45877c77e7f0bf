package settings

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
)

var retryDef, _ = Lookup("fleet-leader-election-retry-period")

func obj(value, def, source string, customized bool) *v3.Setting {
	s := &v3.Setting{Value: value, Default: def, Source: source, Customized: customized}
	s.Name = retryDef.Name
	return s
}

func TestResolve(t *testing.T) {
	cases := map[string]struct {
		in   Input
		want Resolved
	}{
		"nothing set":                 {Input{}, Resolved{"10s", OriginDefault}},
		"object empty value":          {Input{Object: obj("", "10s", "", false)}, Resolved{"10s", OriginDefault}},
		"object value":                {Input{Object: obj("5s", "10s", "", true)}, Resolved{"5s", OriginObject}},
		"object value not trimmed":    {Input{Object: obj(" 5s", "10s", "", true)}, Resolved{" 5s", OriginObject}},
		"env wins over object":        {Input{Object: obj("5s", "10s", "", true), Env: "4s", EnvSet: true}, Resolved{"4s", OriginEnv}},
		"empty env means default":     {Input{Object: obj("5s", "10s", "", true), EnvSet: true}, Resolved{"10s", OriginDefault}},
		"deleted: remembered value":   {Input{Remembered: "7s", RememberedSet: true}, Resolved{"7s", OriginRemembered}},
		"object wins over remembered": {Input{Object: obj("5s", "10s", "", true), Remembered: "7s", RememberedSet: true}, Resolved{"5s", OriginObject}},
		"stale env source: remembered": {Input{Object: obj("4s", "10s", "env", true), Remembered: "7s", RememberedSet: true},
			Resolved{"7s", OriginRemembered}},
		"stale env source, nothing remembered": {Input{Object: obj("4s", "10s", "env", true)}, Resolved{"4s", OriginObject}},
	}
	for name, c := range cases {
		if got := Resolve(retryDef, c.in); got != c.want {
			t.Errorf("%s: Resolve = %+v, want %+v", name, got, c.want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	r := func(l, rd, rp string) [3]Resolved { return [3]Resolved{{Value: l}, {Value: rd}, {Value: rp}} }
	if got, err := Evaluate(FleetAgent, r("45s", "30s", "2s")); err != nil || got != election.WranglerDefaults {
		t.Errorf("valid: %s, %v", got, err)
	}
	_, err := Evaluate(FleetAgent, r("30", "25s", "x"))
	var perr *election.ParseError
	if !errors.As(err, &perr) || !strings.Contains(err.Error(), `setting fleet-agent-leader-election-lease-duration: leaseDuration "30"`) ||
		!strings.Contains(err.Error(), `setting fleet-agent-leader-election-retry-period: retryPeriod "x"`) {
		t.Errorf("unparsable: %v", err)
	}
	_, err = Evaluate(FleetController, r("30s", "25s", "30s"))
	var verr *election.ValidationError
	if !errors.As(err, &verr) || !verr.Has(election.RuleRenewExceedsJitteredRetry) {
		t.Errorf("invalid: %v", err)
	}
}

func TestRemember(t *testing.T) {
	cases := map[string]struct {
		in     Input
		want   string
		wantOK bool
	}{
		"user value":       {Input{Object: obj("5s", "10s", "", true)}, "5s", true},
		"user empty value": {Input{Object: obj("", "10s", "", false)}, "", true},
		"env set":          {Input{Object: obj("4s", "10s", "env", true), Env: "4s", EnvSet: true}, "", false},
		"stale env source": {Input{Object: obj("4s", "10s", "env", true)}, "", false},
		"no object":        {Input{}, "", false},
	}
	for name, c := range cases {
		if got, ok := Remember(c.in); got != c.want || ok != c.wantOK {
			t.Errorf("%s: Remember = %q, %v; want %q, %v", name, got, ok, c.want, c.wantOK)
		}
	}
}

func TestDesired(t *testing.T) {
	type patch = map[string]interface{}
	cases := map[string]struct {
		in         Input
		wantCreate *v3.Setting
		wantPatch  patch
	}{
		// Stored as Rancher's provider stores them: customized false, source
		// "env" or empty (see Desired).
		"in place: nothing to do": {in: Input{Object: obj("5s", "10s", "", false)}},
		"default only":            {in: Input{Object: obj("", "10s", "", false)}},
		"stale default":           {in: Input{Object: obj("5s", "9s", "", false)}, wantPatch: patch{"default": "10s"}},
		"customized stored true (an earlier leasetune): false": {in: Input{Object: obj("5s", "10s", "", true)}, wantPatch: patch{"customized": false}},
		"env sets value and source": {in: Input{Object: obj("5s", "10s", "", false), Env: "4s", EnvSet: true},
			wantPatch: patch{"source": "env", "value": "4s"}},
		"empty env: source env, value empty": {in: Input{Object: obj("5s", "10s", "", false), EnvSet: true},
			wantPatch: patch{"source": "env", "value": ""}},
		"env already applied": {in: Input{Object: obj("4s", "10s", "env", false), Env: "4s", EnvSet: true}},
		"user edits env-sourced value: reverted": {in: Input{Object: obj("3s", "10s", "env", false), Env: "4s", EnvSet: true},
			wantPatch: patch{"value": "4s"}},
		"env removed: user value back": {in: Input{Object: obj("4s", "10s", "env", false), Remembered: "5s", RememberedSet: true},
			wantPatch: patch{"source": "", "value": "5s"}},
		"env removed, nothing remembered": {in: Input{Object: obj("4s", "10s", "env", false)}, wantPatch: patch{"source": ""}},
		"missing: create empty":           {in: Input{}, wantCreate: obj("", "10s", "", false)},
		"missing: restore remembered": {in: Input{Remembered: "5s", RememberedSet: true},
			wantCreate: obj("5s", "10s", "", false)},
		"missing: create from env": {in: Input{Env: "4s", EnvSet: true, Remembered: "5s", RememberedSet: true},
			wantCreate: obj("4s", "10s", "env", false)},
		"missing: create from an empty env": {in: Input{EnvSet: true}, wantCreate: obj("", "10s", "env", false)},
	}
	for name, c := range cases {
		create, p := Desired(retryDef, c.in)
		if !reflect.DeepEqual(create, c.wantCreate) {
			t.Errorf("%s: create = %+v, want %+v", name, create, c.wantCreate)
		}
		if len(p) == 0 && len(c.wantPatch) == 0 {
			continue
		}
		if !reflect.DeepEqual(p, c.wantPatch) {
			t.Errorf("%s: patch = %v, want %v", name, p, c.wantPatch)
		}
	}
}

// TestLeavesEnv: only an object on source env whose env var is gone moves
// off env (the write Rancher v2.15's webhook refuses as an update).
func TestLeavesEnv(t *testing.T) {
	for name, c := range map[string]struct {
		in   Input
		want bool
	}{
		"env removed":                     {Input{Object: obj("4s", "10s", "env", false), Remembered: "5s", RememberedSet: true}, true},
		"env removed, nothing remembered": {Input{Object: obj("4s", "10s", "env", false)}, true},
		"env still set":                   {Input{Object: obj("4s", "10s", "env", false), Env: "4s", EnvSet: true}, false},
		"env set, object not yet env":     {Input{Object: obj("5s", "10s", "", false), Env: "4s", EnvSet: true}, false},
		"no env":                          {Input{Object: obj("5s", "10s", "", false)}, false},
		"missing object":                  {Input{Remembered: "5s", RememberedSet: true}, false},
	} {
		if got := LeavesEnv(c.in); got != c.want {
			t.Errorf("%s: LeavesEnv = %v, want %v", name, got, c.want)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	s := State{
		Values:    map[string]string{retryDef.Name: "5s", "fleet-leader-election-lease-duration": ""},
		Effective: map[Component]election.Timings{FleetController: {LeaseDuration: 30e9, RenewDeadline: 25e9, RetryPeriod: 5e9}},
	}
	data, err := s.encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeState(data)
	if err != nil || !got.equal(s) {
		t.Fatalf("decode(encode(s)) = %+v, %v", got, err)
	}
	if _, err := decodeState(nil); err != nil {
		t.Errorf("empty state: %v", err)
	}
	// A stored triple that no longer validates is dropped, and said so;
	// the other component's stays (map order must not matter: repeat).
	for i := 0; i < 50; i++ {
		data[stateKeyEffective] = `{"fleet-controller":{"leaseDuration":"30s","renewDeadline":"25s","retryPeriod":"30s"},` +
			`"fleet-agent":{"leaseDuration":"30s","renewDeadline":"25s","retryPeriod":"5s"}}`
		got, err = decodeState(data)
		if err == nil || len(got.Effective) != 1 || got.Effective[FleetAgent].RetryPeriod != 5e9 {
			t.Fatalf("one invalid stored triple: %+v, %v", got.Effective, err)
		}
	}
	// A stored triple that no longer validates is dropped, and said so.
	data[stateKeyEffective] = `{"fleet-agent":{"leaseDuration":"30s","renewDeadline":"25s","retryPeriod":"30s"}}`
	got, err = decodeState(data)
	if err == nil || len(got.Effective) != 0 || got.Values[retryDef.Name] != "5s" {
		t.Errorf("invalid stored triple: %+v, %v", got, err)
	}
}
