package settings

import (
	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
)

// Snapshot computes, without writing anything, what the Provider would
// hold in effect for each component, from the Setting objects and the data
// of its state ConfigMap (nil when there is none). An object whose source
// is "env" counts as set by env (the env var is on the project's pod, not
// here); a missing object counts as its remembered value; an invalid
// triple leaves the last good one in effect, as the Provider does. It is
// what `leasetune plan` and `leasetune cleanup` read.
func Snapshot(objs []v3.Setting, stateData map[string]string) (map[Component]ComponentStatus, error) {
	st, err := decodeState(stateData)
	byName := map[string]*v3.Setting{}
	for i := range objs {
		byName[objs[i].Name] = &objs[i]
	}
	out := map[Component]ComponentStatus{}
	for _, c := range Components {
		var vals [3]Resolved
		for i, d := range Of(c) {
			in := Input{Object: byName[d.Name]}
			if in.Object != nil && in.Object.Source == v3.SourceEnv {
				in.Env, in.EnvSet = in.Object.Value, true
			}
			in.Remembered, in.RememberedSet = st.Values[d.Name]
			vals[i] = Resolve(d, in)
		}
		t, verr := Evaluate(c, vals)
		cs := ComponentStatus{Inputs: vals, Refused: verr}
		if verr == nil {
			cs.Effective, cs.HasEffective = t, true
			if last, ok := st.Effective[c]; ok && last != t {
				// Stored and valid, not yet in effect: the Provider applies
				// it once the settings have been unchanged for the settle time.
				pending := t
				cs.Pending = &pending
			}
		} else if last, ok := st.Effective[c]; ok {
			cs.Effective, cs.HasEffective = last, true
		}
		out[c] = cs
	}
	return out, err
}

// RememberedValues returns the users' remembered values from the data of
// the Provider's state ConfigMap (nil when unreadable or absent).
func RememberedValues(stateData map[string]string) map[string]string {
	st, _ := decodeState(stateData)
	return st.Values
}
