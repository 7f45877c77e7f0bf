package settings

import (
	"errors"
	"fmt"
	"strings"
	"time"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
)

// ErrUnknownSetting is returned by CheckChange for a name that is not one
// of the project's settings.
var ErrUnknownSetting = errors.New("unknown setting")

// ErrReadOnly is returned by CheckChange for a setting set by an env var.
var ErrReadOnly = errors.New("set by an env var and read-only")

// ChangeError is a refused value, with the reason and, for an invalid
// triple, an order of edits that works.
type ChangeError struct {
	// Setting and Value are the refused change.
	Setting, Value string
	// Err is why: an *election.ParseError or an *election.ValidationError.
	Err error
	// Hint says which edit has to come first, when one does.
	Hint string
}

// Error names the setting, the value, the rule and the numbers, and the hint.
func (e *ChangeError) Error() string {
	value := fmt.Sprintf("%q", e.Value)
	if d, ok := Lookup(e.Setting); ok && e.Value == "" {
		value += " (empty: the default, " + d.Default + ")"
	}
	msg := fmt.Sprintf("%s=%s refused: %v", e.Setting, value, e.Err)
	if e.Hint != "" {
		msg += ". " + e.Hint
	}
	return msg
}

// Unwrap returns the reason.
func (e *ChangeError) Unwrap() error { return e.Err }

// View is what CheckChange reads: the Setting objects, the users'
// remembered values (the Provider's durable state; a missing object counts
// as its remembered value, as for the Provider) and which settings an env
// var sets on the project's pod.
type View struct {
	Objects    []v3.Setting
	Remembered map[string]string
	// EnvSet reports whether the setting's env var is set on the project's
	// pod; nil means only the objects' source counts.
	EnvSet func(Definition) bool
}

// readOnly reports whether d is set by env, and names the env var.
func (v View) readOnly(d Definition, obj *v3.Setting) bool {
	return (obj != nil && obj.Source == v3.SourceEnv) || (v.EnvSet != nil && v.EnvSet(d))
}

// CheckChange decides whether setting name may take value, as the
// admission webhook and the /v3 API do before a write: the value must parse
// (an empty value is checked as the default) and, with the other two
// current values of its component, make a valid triple. When the current
// triple is already invalid (e.g. values written before the webhook
// existed, or an env value), an edit that breaks no rule the current
// triple does not already break is accepted, so a way out exists; the
// Provider keeps the last good triple until the whole is valid.
// Errors: ErrUnknownSetting; ErrReadOnly (wrapped); *ChangeError, whose
// Hint gives an order of edits that works when one exists.
func CheckChange(v View, name, value string) error {
	d, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownSetting, name)
	}
	byName := map[string]*v3.Setting{}
	for i := range v.Objects {
		byName[v.Objects[i].Name] = &v.Objects[i]
	}
	if v.readOnly(d, byName[name]) {
		return fmt.Errorf("setting %s is %w (env var %s on leasetune's pod)", name, ErrReadOnly, d.EnvVar())
	}
	defs := Of(d.Component)
	curVals, newVals := resolveChange(v, byName, d, name, value)
	// The edited value must make sense on its own.
	idx := 0
	for i, od := range defs {
		if od.Name == name {
			idx = i
		}
	}
	own, perr := election.ParseDuration(d.Field, newVals[idx].Value)
	if perr != nil {
		return &ChangeError{Setting: name, Value: value, Err: fmt.Errorf("setting %s: %w", name, perr)}
	}
	_, err := Evaluate(d.Component, newVals)
	if err == nil {
		return nil
	}
	ce := &ChangeError{Setting: name, Value: value, Err: err}
	var newV *election.ValidationError
	isV := errors.As(err, &newV)
	cur, curErr := Evaluate(d.Component, curVals)
	var curV *election.ValidationError
	switch {
	case curErr == nil:
		if isV {
			ce.Hint = orderHint(v, byName, d, cur, own)
			if ce.Hint == "" {
				ce.Hint = floorHint(d.Field, own, err.Error())
			}
		}
	case errors.As(curErr, &curV):
		if isV && subset(newV, curV) {
			return nil // no worse than now: a step out of an invalid state
		}
	default:
		// A current value does not even parse: the triple is unusable as
		// it is, so any value that is acceptable on its own is a step out
		// (the Provider validates the whole before anything takes effect).
		bad := ownRules(d.Field, own)
		if bad == nil {
			return nil
		}
		ce.Err = bad
	}
	return ce
}

// resolveChange resolves the three settings of d's component as they are
// (cur) and with setting name at value (next).
func resolveChange(v View, byName map[string]*v3.Setting, d Definition, name, value string) (cur, next [3]Resolved) {
	for i, od := range Of(d.Component) {
		in := Input{Object: byName[od.Name]}
		if in.Object != nil && in.Object.Source == v3.SourceEnv {
			in.Env, in.EnvSet = in.Object.Value, true
		}
		in.Remembered, in.RememberedSet = v.Remembered[od.Name]
		cur[i], next[i] = Resolve(od, in), Resolve(od, in)
		if od.Name == name {
			next[i] = Resolve(od, Input{Object: &v3.Setting{Value: value}})
		}
	}
	return cur, next
}

// Proposed returns the component's triple as the settings are now (cur,
// curOK when it validates) and with setting name at value (next, nextOK),
// for checks that judge a change by its effect beyond the triple itself
// (the webhook's judgement of every agent's effective triple). Errors:
// ErrUnknownSetting.
func Proposed(v View, name, value string) (cur election.Timings, curOK bool, next election.Timings, nextOK bool, err error) {
	d, ok := Lookup(name)
	if !ok {
		return cur, false, next, false, fmt.Errorf("%w %q", ErrUnknownSetting, name)
	}
	byName := map[string]*v3.Setting{}
	for i := range v.Objects {
		byName[v.Objects[i].Name] = &v.Objects[i]
	}
	curVals, newVals := resolveChange(v, byName, d, name, value)
	cur, cerr := Evaluate(d.Component, curVals)
	next, nerr := Evaluate(d.Component, newVals)
	return cur, cerr == nil, next, nerr == nil, nil
}

// ownRules says which of the rules a single value must meet whatever the
// other two it breaks (nil: none): greater than 0, at most MaxDuration, at
// least its floor (election.Floor: retryPeriod 1s, renewDeadline 2s,
// leaseDuration 3s, as no valid triple has less), and for a lease whole
// seconds. The wording is election.Timings.Validate's where Validate has
// the rule; a floor that follows from two rules says which.
func ownRules(f election.Field, d time.Duration) error {
	fd := election.FormatDuration
	var errs []error
	if d <= 0 {
		errs = append(errs, fmt.Errorf("%s %s must be greater than 0", f, fd(d)))
	}
	if d > election.MaxDuration {
		errs = append(errs, fmt.Errorf("%s %s must be at most %s", f, fd(d), fd(election.MaxDuration)))
	}
	if floor := election.Floor(f); d > 0 && d < floor {
		switch f {
		case election.RetryPeriod:
			errs = append(errs, fmt.Errorf("%s %s must be at least %s", f, fd(d), fd(floor)))
		case election.RenewDeadline:
			errs = append(errs, fmt.Errorf("%s %s must be at least %s (%d × the shortest %s, %s)",
				f, fd(d), fd(floor), election.MinRenewAttempts, election.RetryPeriod, fd(election.MinRetryPeriod)))
		case election.LeaseDuration:
			errs = append(errs, fmt.Errorf("%s %s must be at least %s (above the shortest %s, %s, in whole seconds)",
				f, fd(d), fd(floor), election.RenewDeadline, fd(election.Floor(election.RenewDeadline))))
		}
	}
	if f == election.LeaseDuration && d%time.Second != 0 {
		errs = append(errs, fmt.Errorf("%s %s must be a whole number of seconds", f, fd(d)))
	}
	return errors.Join(errs...)
}

// floorHint says, when no order of edits helps because the value itself
// is below its floor, which floor that is (the parts the refusal in msg
// does not already say), so the user is not left to try other orders.
func floorHint(f election.Field, d time.Duration, msg string) string {
	bad := ownRules(f, d)
	if bad == nil {
		return ""
	}
	var parts []string
	for _, line := range strings.Split(bad.Error(), "\n") {
		if !strings.Contains(msg, line) {
			parts = append(parts, line)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "No order of edits helps: " + strings.Join(parts, "; ")
}

// subset reports whether every violation of a is also one of b (by rule and fields).
func subset(a, b *election.ValidationError) bool {
	count := map[string]int{}
	for _, x := range b.Violations {
		count[fmt.Sprint(x.Rule, x.Fields)]++
	}
	for _, x := range a.Violations {
		k := fmt.Sprint(x.Rule, x.Fields)
		if count[k] == 0 {
			return false
		}
		count[k]--
	}
	return true
}

// orderHint looks for edits of the other two settings after which d can
// take want, each step leaving a valid triple, and says them. It says
// nothing when no order helps (the value breaks a rule of its own, such as
// a floor, or the upper bound leaves no room: floorHint then says which
// floor, if one is why), and names the env var when a setting that must
// move is set by env.
func orderHint(v View, byName map[string]*v3.Setting, d Definition, cur election.Timings, want time.Duration) string {
	target := fitAround(cur, d.Field, want)
	if target.Validate() != nil {
		return ""
	}
	defs := Of(d.Component)
	var moves []Definition
	for _, od := range defs {
		if od.Field != d.Field && target.Get(od.Field) != cur.Get(od.Field) {
			if v.readOnly(od, byName[od.Name]) {
				return fmt.Sprintf("%s would have to be %s first, but it is set by the env var %s on leasetune's pod: change it there",
					od.Name, election.FormatDuration(target.Get(od.Field)), od.EnvVar())
			}
			moves = append(moves, od)
		}
	}
	for _, order := range permutations(moves) {
		t := cur
		ok := true
		for _, od := range append(order, d) {
			t = t.With(od.Field, target.Get(od.Field))
			if t.Validate() != nil {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		var steps []string
		for _, od := range order {
			steps = append(steps, fmt.Sprintf("%s to %s", od.Name, election.FormatDuration(target.Get(od.Field))))
		}
		return "An order that works: set " + strings.Join(steps, ", then ") + ", then this value (each step leaves a valid triple)"
	}
	return ""
}

// fitAround returns cur with field f set to want and the other two moved,
// as little as the rules need, to round values: renewDeadline at least
// election.MinRenewAttempts retry periods (which also exceeds client-go's
// 1.2), leaseDuration above renewDeadline. A retry period it lowers stays
// at or above the 1s floor whenever the renew deadline allows a valid
// triple at all (renewDeadline ≥ 2s); otherwise the result is invalid and
// orderHint gives no order.
func fitAround(cur election.Timings, f election.Field, want time.Duration) election.Timings {
	return FitAround(cur, f, want)
}

// FitAround returns cur with field f set to want and the other two moved,
// where they must, to the nearest values that make a valid triple (the
// fix a refusal proposes; the webhook's override message uses it too).
// The result may still be invalid when want itself is out of range.
func FitAround(cur election.Timings, f election.Field, want time.Duration) election.Timings {
	t := cur.With(f, want)
	const n = election.MinRenewAttempts
	tooShort := func(renew, retry time.Duration) bool { return renew/n < retry } // renew < n × retry, without overflow
	switch f {
	case election.LeaseDuration:
		if t.RenewDeadline >= t.LeaseDuration {
			t.RenewDeadline = roundDown(t.LeaseDuration * 5 / 6)
		}
		if tooShort(t.RenewDeadline, t.RetryPeriod) {
			t.RetryPeriod = roundDown(t.RenewDeadline / n)
		}
	case election.RenewDeadline:
		if tooShort(t.RenewDeadline, t.RetryPeriod) {
			t.RetryPeriod = roundDown(t.RenewDeadline / n)
		}
		if t.LeaseDuration <= t.RenewDeadline {
			t.LeaseDuration = leaseAbove(t.RenewDeadline)
		}
	case election.RetryPeriod:
		if tooShort(t.RenewDeadline, t.RetryPeriod) && t.RetryPeriod <= election.MaxDuration {
			t.RenewDeadline = ceilSeconds(n * t.RetryPeriod)
		}
		if t.LeaseDuration <= t.RenewDeadline {
			t.LeaseDuration = leaseAbove(t.RenewDeadline)
		}
	}
	return t
}

// leaseAbove is a lease 20% above renew, in whole seconds, capped at the
// upper bound (which may leave no room: then no hint is given).
func leaseAbove(renew time.Duration) time.Duration {
	if l := ceilSeconds(renew * 6 / 5); l <= election.MaxDuration {
		return l
	}
	return election.MaxDuration
}

// roundDown rounds to whole seconds from 2s up, else to milliseconds.
func roundDown(d time.Duration) time.Duration {
	if d >= 2*time.Second {
		return d.Truncate(time.Second)
	}
	if r := d.Truncate(time.Millisecond); r > 0 {
		return r
	}
	return d
}

// ceilSeconds rounds up to whole seconds (a lease must be whole seconds).
func ceilSeconds(d time.Duration) time.Duration {
	if r := d.Truncate(time.Second); r < d {
		return r + time.Second
	}
	return d
}

// permutations returns every order of defs (at most two here).
func permutations(defs []Definition) [][]Definition {
	if len(defs) <= 1 {
		return [][]Definition{defs}
	}
	var out [][]Definition
	for i := range defs {
		rest := append(append([]Definition{}, defs[:i]...), defs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]Definition{defs[i]}, p...))
		}
	}
	return out
}
