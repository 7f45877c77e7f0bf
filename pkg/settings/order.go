package settings

import (
	"errors"
	"fmt"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
)

// Write is one Setting write: the value to give setting Name ("" means the
// default, as for any Setting).
type Write struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// OrderReason says why WriteOrder found no writes.
type OrderReason string

const (
	// OrderInvalid: the proposed triple does not parse or validate.
	OrderInvalid OrderReason = "invalid"
	// OrderReadOnly: a setting that would change is set by an env var.
	OrderReadOnly OrderReason = "read-only"
	// OrderNone: no order of the writes is accepted step by step.
	OrderNone OrderReason = "no-order"
)

// OrderError is why WriteOrder found no writes. Setting names the setting
// concerned ("" when no single one is).
type OrderError struct {
	Reason  OrderReason
	Setting string
	Err     error
}

// Error says why, with the rule and the numbers.
func (e *OrderError) Error() string {
	return e.Err.Error()
}

// Unwrap returns the reason underneath: an *election.ParseError or
// *election.ValidationError (OrderInvalid), ErrReadOnly (OrderReadOnly), or
// CheckChange's *ChangeError (OrderNone).
func (e *OrderError) Unwrap() error { return e.Err }

// WriteOrder returns the writes that take component c's settings to want
// (the three values in the order election.Fields, "" meaning the default),
// in an order in which each write is accepted by CheckChange (the
// webhook's and the /v3/settings API's check) given the writes before it,
// so that every intermediate triple is valid. A setting whose value
// already resolves to the wanted one is not written; nothing at all when
// nothing changes. The order tried first is the fixed field order, then
// every other (at most 3! = 6).
//
// Errors (*OrderError): the wanted triple does not parse or validate
// (OrderInvalid: "the <component> triple is refused: ...", Setting the
// first field that does not parse); a setting that would change is set by
// an env var (OrderReadOnly, CheckChange's message naming the env var); no
// order is accepted (OrderNone: "no order of the writes is accepted: " and
// CheckChange's refusal of the first write of the first order tried that
// fails).
func WriteOrder(v View, c Component, want [3]string) ([]Write, error) {
	defs := Of(c)
	// The wanted triple as a whole first: its own message is clearer than
	// the refusal of one write on the way.
	var next [3]Resolved
	for i, d := range defs {
		next[i] = Resolve(d, Input{Object: &v3.Setting{Value: want[i]}})
	}
	if _, err := Evaluate(c, next); err != nil {
		field := ""
		var pe *election.ParseError
		if errors.As(err, &pe) {
			for _, d := range defs {
				if d.Field == pe.Field {
					field = d.Name
				}
			}
		}
		return nil, &OrderError{Reason: OrderInvalid, Setting: field, Err: fmt.Errorf("the %s triple is refused: %w", c, err)}
	}
	var changed []int
	for i, cur := range CurrentValues(v, c) {
		if cur != next[i].Value {
			changed = append(changed, i)
		}
	}
	if len(changed) == 0 {
		return nil, nil
	}
	var firstErr error
	firstSetting := ""
	for _, order := range indexOrders(changed) {
		objs := append([]v3.Setting{}, v.Objects...)
		var writes []Write
		var stepErr error
		for _, i := range order {
			d := defs[i]
			if err := CheckChange(View{Objects: objs, Remembered: v.Remembered, EnvSet: v.EnvSet}, d.Name, want[i]); err != nil {
				if errors.Is(err, ErrReadOnly) {
					return nil, &OrderError{Reason: OrderReadOnly, Setting: d.Name, Err: err}
				}
				stepErr = err
				if firstErr == nil {
					firstErr, firstSetting = err, d.Name
				}
				break
			}
			objs = WithValue(objs, d.Name, want[i])
			writes = append(writes, Write{Name: d.Name, Value: want[i]})
		}
		if stepErr == nil {
			return writes, nil
		}
	}
	return nil, &OrderError{Reason: OrderNone, Setting: firstSetting, Err: fmt.Errorf("no order of the writes is accepted: %w", firstErr)}
}

// CurrentValues are the values of c's settings that count now, in the
// order of Of, as the webhook resolves them: an object set by env holds
// the env value (not a user's value remembered from before the env var
// was set); a missing object, the user's remembered value.
func CurrentValues(v View, c Component) [3]string {
	byName := map[string]v3.Setting{}
	for _, o := range v.Objects {
		byName[o.Name] = o
	}
	var out [3]string
	for i, d := range Of(c) {
		in := Input{}
		if cur, ok := byName[d.Name]; ok {
			in.Object = &cur
			if cur.Source == v3.SourceEnv {
				in.Env, in.EnvSet = cur.Value, true
			}
		}
		in.Remembered, in.RememberedSet = v.Remembered[d.Name]
		out[i] = Resolve(d, in).Value
	}
	return out
}

// WithValue returns objs with setting name's value set (added when
// missing); it changes objs' elements in place.
func WithValue(objs []v3.Setting, name, value string) []v3.Setting {
	for i := range objs {
		if objs[i].Name == name {
			objs[i].Value = value
			return objs
		}
	}
	s := v3.Setting{Value: value}
	s.Name = name
	return append(objs, s)
}

// indexOrders returns every order of idx, the given order first.
func indexOrders(idx []int) [][]int {
	if len(idx) <= 1 {
		return [][]int{idx}
	}
	var out [][]int
	for i := range idx {
		rest := append(append([]int{}, idx[:i]...), idx[i+1:]...)
		for _, p := range indexOrders(rest) {
			out = append(out, append([]int{idx[i]}, p...))
		}
	}
	return out
}
