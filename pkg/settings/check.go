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
	msg := fmt.Sprintf("%s=%q refused: %v", e.Setting, e.Value, e.Err)
	if e.Hint != "" {
		msg += ". " + e.Hint
	}
	return msg
}

// Unwrap returns the reason.
func (e *ChangeError) Unwrap() error { return e.Err }

// CheckChange decides whether setting name may take value, as the
// admission webhook and the /v3 API do before a write: the value must parse
// (an empty value is checked as the default) and, with the other two
// current values of its component (from objs; a missing object counts as
// its default), make a valid triple. Errors: ErrUnknownSetting; ErrReadOnly
// (wrapped) when the current object's source is "env"; *ChangeError.
func CheckChange(objs []v3.Setting, name, value string) error {
	d, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownSetting, name)
	}
	byName := map[string]*v3.Setting{}
	for i := range objs {
		byName[objs[i].Name] = &objs[i]
	}
	if cur := byName[name]; cur != nil && cur.Source == v3.SourceEnv {
		return fmt.Errorf("setting %s is %w (%s)", name, ErrReadOnly, d.EnvVar())
	}
	var vals [3]Resolved
	var cur election.Timings
	curOK := true
	for i, od := range Of(d.Component) {
		in := Input{Object: byName[od.Name]}
		r := Resolve(od, in)
		if od.Name == name {
			vals[i] = Resolve(od, Input{Object: &v3.Setting{Value: value}})
		} else {
			vals[i] = r
		}
		dur, err := election.ParseDuration(od.Field, r.Value)
		if err != nil {
			curOK = false
		}
		cur = cur.With(od.Field, dur)
	}
	if _, err := Evaluate(d.Component, vals); err != nil {
		ce := &ChangeError{Setting: name, Value: value, Err: err}
		var verr *election.ValidationError
		if errors.As(err, &verr) && curOK {
			ce.Hint = hint(d, verr, cur)
		}
		return ce
	}
	return nil
}

// hint says which other setting must change first for an edit of d to
// validate, from the rule it breaks, and recalls the general order.
func hint(d Definition, verr *election.ValidationError, cur election.Timings) string {
	defs := Of(d.Component)
	name := func(f election.Field) string {
		for _, od := range defs {
			if od.Field == f {
				return od.Name
			}
		}
		return string(f)
	}
	t := verr.Timings
	f := election.FormatDuration
	var first []string
	if verr.Has(election.RuleLeaseExceedsRenew) {
		switch d.Field {
		case election.LeaseDuration:
			first = append(first, fmt.Sprintf("lower %s below %s first", name(election.RenewDeadline), f(t.LeaseDuration)))
		case election.RenewDeadline:
			first = append(first, fmt.Sprintf("raise %s above %s first", name(election.LeaseDuration), f(t.RenewDeadline)))
		}
	}
	if verr.Has(election.RuleRenewExceedsJitteredRetry) {
		switch d.Field {
		case election.RenewDeadline, election.LeaseDuration:
			first = append(first, fmt.Sprintf("lower %s below %s (renewDeadline / 1.2) first",
				name(election.RetryPeriod), f(time.Duration(float64(t.RenewDeadline)/election.JitterFactor).Truncate(time.Millisecond))))
		case election.RetryPeriod:
			first = append(first, fmt.Sprintf("raise %s above %s (1.2 × retryPeriod) first", name(election.RenewDeadline),
				f(time.Duration(election.JitterFactor*float64(t.RetryPeriod)))))
		}
	}
	if len(first) == 0 {
		return ""
	}
	order := fmt.Sprintf("From %s/%s/%s: to lower the timings, change the retry period, then the renew deadline, then the lease duration; to raise them, the reverse",
		f(cur.LeaseDuration), f(cur.RenewDeadline), f(cur.RetryPeriod))
	return strings.Join(first, "; ") + ". " + order + "."
}
