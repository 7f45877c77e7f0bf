package settings

import (
	"encoding/json"
	"errors"
	"fmt"
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
