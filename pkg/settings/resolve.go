package settings

import (
	"errors"
	"fmt"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
)

// Input is everything that decides one setting's effective value.
type Input struct {
	// Object is the Setting object from the cache; nil when it does not
	// exist (not created yet, or deleted).
	Object *v3.Setting
	// Env is the value of the setting's env var; EnvSet says whether the
	// env var is set at all (an empty env var means the default).
	Env    string
	EnvSet bool
	// Remembered is the value a user last set, from the durable state;
	// RememberedSet says whether one is known.
	Remembered    string
	RememberedSet bool
}

// Origin says where an effective value came from.
type Origin string

const (
	// OriginEnv: the env var on the project's pod.
	OriginEnv Origin = "env"
	// OriginObject: the Setting object's value.
	OriginObject Origin = "value"
	// OriginRemembered: the user's value from the durable state, while the
	// object is missing.
	OriginRemembered Origin = "remembered"
	// OriginDefault: the default, because no value is set.
	OriginDefault Origin = "default"
)

// Resolved is one setting's effective value.
type Resolved struct {
	// Value is the string to parse: the set value, or the default when the
	// set value is empty. It is never trimmed.
	Value string
	// Origin says where Value came from.
	Origin Origin
}

// rawValue returns the value set for the setting before defaulting and
// where it came from: the env var, else the object's value, else the
// remembered user value. An object whose source still says "env" while the
// env var is gone holds a stale env value: the user's remembered value
// (the provider restores it) takes precedence over it.
func rawValue(in Input) (string, Origin) {
	switch {
	case in.EnvSet:
		return in.Env, OriginEnv
	case in.Object != nil && in.Object.Source == v3.SourceEnv && in.RememberedSet:
		return in.Remembered, OriginRemembered
	case in.Object != nil:
		return in.Object.Value, OriginObject
	case in.RememberedSet:
		return in.Remembered, OriginRemembered
	}
	return "", OriginDefault
}

// Resolve returns the effective value of setting d: the env var, else the
// object's value, else the remembered user value, and the default when
// that is empty (Rancher's rule: an empty value means the default).
func Resolve(d Definition, in Input) Resolved {
	v, o := rawValue(in)
	if v == "" {
		return Resolved{Value: d.Default, Origin: OriginDefault}
	}
	return Resolved{Value: v, Origin: o}
}

// Evaluate parses and validates the three resolved values of component c
// (in the order of Of(c)) as one triple. Errors name the settings and the
// values: a parse failure is "setting <name>: <election.ParseError>"
// (wrapping it); an invalid triple is the *election.ValidationError itself.
func Evaluate(c Component, values [3]Resolved) (election.Timings, error) {
	defs := Of(c)
	var t election.Timings
	var errs []error
	for i, d := range defs {
		dur, err := election.ParseDuration(d.Field, values[i].Value)
		if err != nil {
			errs = append(errs, fmt.Errorf("setting %s: %w", d.Name, err))
			continue
		}
		t = t.With(d.Field, dur)
	}
	if len(errs) > 0 {
		return election.Timings{}, errors.Join(errs...)
	}
	if err := t.Validate(); err != nil {
		return election.Timings{}, err
	}
	return t, nil
}

// Remember returns the user value to keep in the durable state for the
// observed input, and whether there is one: the object's value, unless it
// is set from env (an env value is not the user's choice).
func Remember(in Input) (string, bool) {
	if in.EnvSet || in.Object == nil || in.Object.Source == v3.SourceEnv {
		return "", false
	}
	return in.Object.Value, true
}

// LeavesEnv reports whether the Setting object moves off source "env":
// it says env while the env var is gone. Rancher v2.15's webhook refuses
// that as an update (see Provider.replace).
func LeavesEnv(in Input) bool {
	return in.Object != nil && in.Object.Source == v3.SourceEnv && !in.EnvSet
}

// AdoptOnLeavingEnv returns the value to remember as the user's before an
// object leaves source env, when none is remembered: the value it holds,
// which Desired keeps (as Rancher's provider did, the env value stays when
// the user never set one). Remembered first, it holds while the object is
// replaced (deleted and created again) and after a create that failed.
func AdoptOnLeavingEnv(in Input) (string, bool) {
	if !LeavesEnv(in) || in.RememberedSet {
		return "", false
	}
	return in.Object.Value, true
}

// Desired computes the fields the Setting object of d should have, given
// the input, as Rancher's settings provider stores them (rancher/rancher
// v2.11.3 pkg/controllers/dashboardapi/settings/settings.go, SetAll):
// default is the declared default; with the env var set, source is "env"
// and value the env value; without, source is empty; customized is always
// false, because Rancher's provider never sets it (its /v3 API computes
// customized and the "db"/"default" sources on every read, pkg/api/norman/
// store/setting/store.go, as pkg/settingsapi does; its dashboard computes
// its own from value and default). Beyond Rancher, a missing object is
// created with the user's remembered value and a removed env var brings
// that value back.
//
// For an existing object it returns only the fields that differ, as a
// JSON merge patch body (nil when nothing differs): customized true (as an
// earlier leasetune stored it for a set value) is put back to false. For a
// missing object, the whole object to create (Rancher's SetIfUnset
// semantics: the env value, else the remembered user value, else empty).
func Desired(d Definition, in Input) (create *v3.Setting, patch map[string]interface{}) {
	if in.Object == nil {
		s := &v3.Setting{Default: d.Default}
		s.Name = d.Name
		switch {
		case in.EnvSet:
			s.Value, s.Source = in.Env, v3.SourceEnv
		case in.RememberedSet:
			s.Value = in.Remembered
		}
		return s, nil
	}
	o := in.Object
	patch = map[string]interface{}{}
	value := o.Value
	switch {
	case in.EnvSet:
		if o.Source != v3.SourceEnv {
			patch["source"] = v3.SourceEnv
		}
		value = in.Env
	case LeavesEnv(in):
		// The env var was removed: the setting is writable again, and the
		// user's own value comes back.
		patch["source"] = ""
		if in.RememberedSet {
			value = in.Remembered
		}
	}
	if value != o.Value {
		patch["value"] = value
	}
	if o.Default != d.Default {
		patch["default"] = d.Default
	}
	if o.Customized {
		patch["customized"] = false
	}
	if len(patch) == 0 {
		return nil, nil
	}
	return nil, patch
}
