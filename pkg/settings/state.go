package settings

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"

	"leasetune.io/leasetune/pkg/election"
)

// State is what the provider must not lose across a restart: the values
// users set, and the last good triple of each component. It is stored in
// a ConfigMap the project owns (see Provider).
type State struct {
	// Values maps a setting's name to the value a user last set on its
	// Setting object ("" meaning the default).
	Values map[string]string
	// Effective maps a component to the last triple that validated and
	// took effect.
	Effective map[Component]election.Timings
}

// ConfigMap data keys of the state.
const (
	stateKeyValues    = "values"
	stateKeyEffective = "effective"
)

// timingsJSON is the stored form of a triple: strings that
// time.ParseDuration reads back exactly.
type timingsJSON struct {
	LeaseDuration string `json:"leaseDuration"`
	RenewDeadline string `json:"renewDeadline"`
	RetryPeriod   string `json:"retryPeriod"`
}

// encode returns the ConfigMap data of s.
func (s State) encode() (map[string]string, error) {
	eff := map[Component]timingsJSON{}
	for c, t := range s.Effective {
		eff[c] = timingsJSON{
			LeaseDuration: election.FormatDuration(t.LeaseDuration),
			RenewDeadline: election.FormatDuration(t.RenewDeadline),
			RetryPeriod:   election.FormatDuration(t.RetryPeriod),
		}
	}
	values := s.Values
	if values == nil {
		values = map[string]string{}
	}
	v, err := json.Marshal(values)
	if err != nil {
		return nil, err
	}
	e, err := json.Marshal(eff)
	if err != nil {
		return nil, err
	}
	return map[string]string{stateKeyValues: string(v), stateKeyEffective: string(e)}, nil
}

// decodeState reads ConfigMap data written by encode. A stored triple that
// no longer parses or validates is dropped with an error naming it; the
// rest of the state is still returned.
func decodeState(data map[string]string) (State, error) {
	s := State{Values: map[string]string{}, Effective: map[Component]election.Timings{}}
	if v := data[stateKeyValues]; v != "" {
		if err := json.Unmarshal([]byte(v), &s.Values); err != nil {
			return s, fmt.Errorf("state key %q: %w", stateKeyValues, err)
		}
	}
	if v := data[stateKeyEffective]; v != "" {
		var eff map[Component]timingsJSON
		if err := json.Unmarshal([]byte(v), &eff); err != nil {
			return s, fmt.Errorf("state key %q: %w", stateKeyEffective, err)
		}
		var errs []error
		for c, tj := range eff {
			t, err := election.Parse(tj.LeaseDuration, tj.RenewDeadline, tj.RetryPeriod)
			if err == nil {
				err = t.Validate()
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("state: stored triple of %s dropped: %w", c, err))
				continue // the other components' triples still count
			}
			s.Effective[c] = t
		}
		return s, errors.Join(errs...)
	}
	return s, nil
}

// clone returns a deep copy of s.
func (s State) clone() State {
	out := State{Values: map[string]string{}, Effective: map[Component]election.Timings{}}
	for k, v := range s.Values {
		out.Values[k] = v
	}
	for k, v := range s.Effective {
		out.Effective[k] = v
	}
	return out
}

// equal reports whether s and o hold the same state.
func (s State) equal(o State) bool {
	return reflect.DeepEqual(s.clone(), o.clone())
}

// mergeState returns the state to store over data, the state ConfigMap's
// data now (nil: there is none), by a writer that computed next from base
// (the state it last read or stored): the stored entries (one per
// setting's value, one per component's triple), with the entries next
// changes from base applied, except those another writer has changed too
// since base (there the stored value stays). An entry the writer only
// carried along keeps its stored value, so a writer whose base is stale
// never reverts what another one stored meanwhile. A missing ConfigMap,
// or a key of it that does not parse, has nothing to preserve: next's
// entries are stored.
func mergeState(base, next State, data map[string]string) State {
	if data == nil {
		return next.clone()
	}
	cur := storedState(data, base)
	return State{
		Values:    mergeEntries(base.Values, next.Values, cur.Values),
		Effective: mergeEntries(base.Effective, next.Effective, cur.Effective),
	}
}

// storedState decodes data for mergeState; a key that does not parse
// counts as unchanged since base. A stored triple that no longer validates
// is dropped, as decodeState drops it.
func storedState(data map[string]string, base State) State {
	cur := base.clone()
	if v, err := decodeState(map[string]string{stateKeyValues: data[stateKeyValues]}); err == nil {
		cur.Values = v.Values
	}
	var eff map[Component]timingsJSON
	if e := data[stateKeyEffective]; e == "" || json.Unmarshal([]byte(e), &eff) == nil {
		v, _ := decodeState(map[string]string{stateKeyEffective: e})
		cur.Effective = v.Effective
	}
	return cur
}

// mergeEntries returns a copy of cur with the entries next changes from
// base (set, changed or removed) applied, except where cur differs from
// base too.
func mergeEntries[K, V comparable](base, next, cur map[K]V) map[K]V {
	out := maps.Clone(cur)
	if out == nil {
		out = map[K]V{}
	}
	apply := func(k K) {
		b, inBase := base[k]
		n, inNext := next[k]
		if inBase == inNext && b == n {
			return // carried along
		}
		if c, inCur := cur[k]; inCur != inBase || c != b {
			return // another writer changed it since base: it stays
		}
		if inNext {
			out[k] = n
		} else {
			delete(out, k)
		}
	}
	for k := range next {
		apply(k)
	}
	for k := range base {
		if _, ok := next[k]; !ok {
			apply(k)
		}
	}
	return out
}
