package election

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

const ns = time.Nanosecond

func tm(lease, renew, retry time.Duration) Timings {
	return Timings{LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry}
}

func TestValidate(t *testing.T) {
	s := time.Second
	cases := map[string]struct {
		in    Timings
		rules []Rule // nil: valid
	}{
		"fleet defaults":    {in: FleetDefaults},
		"wrangler defaults": {in: WranglerDefaults},

		// client-go: all three > 0.
		"retry zero":             {in: tm(30*s, 25*s, 0), rules: []Rule{RulePositive}},
		"retry 1ns":              {in: tm(1*s, 2*ns, 1*ns), rules: []Rule{RuleRetryAtLeastMin}}, // client-go accepts; our floor refuses
		"retry negative":         {in: tm(30*s, 25*s, -s), rules: []Rule{RulePositive}},
		"renew zero":             {in: tm(30*s, 0, 10*s), rules: []Rule{RulePositive, RuleRenewExceedsJitteredRetry}},
		"lease zero":             {in: tm(0, 25*s, 10*s), rules: []Rule{RulePositive, RuleLeaseExceedsRenew}},
		"all zero":               {in: Timings{}, rules: []Rule{RulePositive, RulePositive, RulePositive, RuleLeaseExceedsRenew, RuleRenewExceedsJitteredRetry}},
		"lease negative seconds": {in: tm(-30*s, -40*s, -50*s), rules: []Rule{RulePositive, RulePositive, RulePositive}},

		// client-go: leaseDuration > renewDeadline.
		"lease equals renew":     {in: tm(25*s, 25*s, 10*s), rules: []Rule{RuleLeaseExceedsRenew}},
		"lease just above renew": {in: tm(25*s, 25*s-ns, 10*s)},
		"lease below renew":      {in: tm(20*s, 25*s, 10*s), rules: []Rule{RuleLeaseExceedsRenew}},
		"lease one second above": {in: tm(26*s, 25*s, 10*s)},

		// client-go: renewDeadline > 1.2 × retryPeriod.
		// (our two-attempt floor is stricter, so each refusal lists it too).
		"renew exactly 1.2 retry": {in: tm(30*s, 12*s, 10*s), rules: []Rule{RuleRenewExceedsJitteredRetry, RuleRenewAllowsTwoAttempts}},
		"renew just above":        {in: tm(30*s, 12*s+ns, 10*s), rules: []Rule{RuleRenewAllowsTwoAttempts}}, // client-go accepts
		"renew equals retry":      {in: tm(30*s, 10*s, 10*s), rules: []Rule{RuleRenewExceedsJitteredRetry, RuleRenewAllowsTwoAttempts}},
		"retry above renew":       {in: tm(30*s, 25*s, 30*s), rules: []Rule{RuleRenewExceedsJitteredRetry, RuleRenewAllowsTwoAttempts}},

		// ours: whole seconds, at least 1s (a sub-second retry also breaks the
		// retry floor, and nothing else).
		"lease 1s":                            {in: tm(1*s, 500*time.Millisecond, 100*time.Millisecond), rules: []Rule{RuleRetryAtLeastMin}},
		"lease 1s minus":                      {in: tm(s-ns, 500*time.Millisecond, 100*time.Millisecond), rules: []Rule{RuleLeaseAtLeastOneSecond, RuleLeaseWholeSeconds, RuleRetryAtLeastMin}},
		"lease 1.5s":                          {in: tm(1500*time.Millisecond, 500*time.Millisecond, 100*time.Millisecond), rules: []Rule{RuleLeaseWholeSeconds, RuleRetryAtLeastMin}},
		"lease 3.5s at the floor":             {in: tm(3500*time.Millisecond, 2*s, 1*s), rules: []Rule{RuleLeaseWholeSeconds}},
		"lease 30s plus 1ns":                  {in: tm(30*s+ns, 25*s, 10*s), rules: []Rule{RuleLeaseWholeSeconds}},
		"fractional renew and retry are fine": {in: tm(3*s, 2500*time.Millisecond, 1250*time.Millisecond)},

		// ours: retryPeriod at least 1s.
		"smallest valid triple":    {in: tm(3*s, 2*s, 1*s)},
		"retry 1s minus 1ns":       {in: tm(3*s, 2*s, s-ns), rules: []Rule{RuleRetryAtLeastMin}},
		"retry 999ms":              {in: tm(30*s, 25*s, 999*time.Millisecond), rules: []Rule{RuleRetryAtLeastMin}},
		"retry 10ms typed for 10s": {in: tm(30*s, 25*s, 10*time.Millisecond), rules: []Rule{RuleRetryAtLeastMin}},
		"retry 1ms, the reported":  {in: tm(2*s, 1*s, time.Millisecond), rules: []Rule{RuleRetryAtLeastMin}},
		"retry 1.5s":               {in: tm(30*s, 25*s, 1500*time.Millisecond)},

		// ours: renewDeadline at least 2 × retryPeriod.
		"renew exactly 2 retry":        {in: tm(30*s, 20*s, 10*s)},
		"renew 2 retry minus 1ns":      {in: tm(30*s, 20*s-ns, 10*s), rules: []Rule{RuleRenewAllowsTwoAttempts}},
		"renew 1.5 retry":              {in: tm(30*s, 15*s, 10*s), rules: []Rule{RuleRenewAllowsTwoAttempts}},
		"renew 2s at the floor":        {in: tm(3*s, 2*s-ns, 1*s), rules: []Rule{RuleRenewAllowsTwoAttempts}},
		"lease at the floor, renew 2s": {in: tm(2*s, 2*s, 1*s), rules: []Rule{RuleLeaseExceedsRenew}},
		"kubernetes defaults":          {in: tm(15*s, 10*s, 2*s)},
		"fleet v0.12 agents":           {in: tm(30*s, 25*s, 10*s)},

		// ours: at most 1h.
		"lease exactly 1h": {in: tm(time.Hour, 50*time.Minute, 10*time.Minute)},
		"lease 1h plus 1s": {in: tm(time.Hour+s, 50*time.Minute, 10*time.Minute), rules: []Rule{RuleAtMostMax}},
		"renew over 1h":    {in: tm(2*time.Hour, time.Hour+ns, 10*time.Minute), rules: []Rule{RuleAtMostMax, RuleAtMostMax}},
		"retry over 1h":    {in: tm(3*time.Hour, 2*time.Hour, time.Hour+ns), rules: []Rule{RuleRenewAllowsTwoAttempts, RuleAtMostMax, RuleAtMostMax, RuleAtMostMax}},
		"huge retry":       {in: tm(30*s, 25*s, time.Duration(1<<62)), rules: []Rule{RuleRenewExceedsJitteredRetry, RuleRenewAllowsTwoAttempts, RuleAtMostMax}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.in.Validate()
			if c.rules == nil {
				if err != nil {
					t.Fatalf("Validate(%s) = %v, want nil", c.in, err)
				}
				return
			}
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Validate(%s) = %v, want *ValidationError", c.in, err)
			}
			var got []Rule
			for _, v := range verr.Violations {
				got = append(got, v.Rule)
			}
			if strings.Join(ruleStrings(got), ",") != strings.Join(ruleStrings(c.rules), ",") {
				t.Errorf("Validate(%s) broke %v, want %v\n%v", c.in, got, c.rules, err)
			}
			if verr.Timings != c.in {
				t.Errorf("ValidationError.Timings = %s, want %s", verr.Timings, c.in)
			}
		})
	}
}

func ruleStrings(rs []Rule) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func TestValidateMessagesNameFieldsAndNumbers(t *testing.T) {
	cases := []struct {
		in   Timings
		want []string
	}{
		{tm(30*time.Second, 10*time.Second, 10*time.Second), []string{"renewDeadline 10s must exceed 1.2 × retryPeriod 10s = 12s"}},
		{tm(25*time.Second, 25*time.Second, 10*time.Second), []string{"leaseDuration 25s must exceed renewDeadline 25s"}},
		{tm(30*time.Second, 25*time.Second, 0), []string{"retryPeriod 0s must be greater than 0"}},
		{tm(1500*time.Millisecond, time.Second, 100*time.Millisecond), []string{"leaseDuration 1.5s must be a whole number of seconds"}},
		{tm(500*time.Millisecond, 400*time.Millisecond, 100*time.Millisecond), []string{"leaseDuration 500ms must be at least 1s"}},
		{tm(2*time.Hour, 25*time.Second, 10*time.Second), []string{"leaseDuration 2h0m0s must be at most 1h0m0s"}},
		{tm(30*time.Second, 25*time.Second, 999*time.Millisecond), []string{"retryPeriod 999ms must be at least 1s"}},
		{tm(30*time.Second, 15*time.Second, 10*time.Second), []string{"renewDeadline 15s must be at least 2 × retryPeriod 10s = 20s, so the leader gets a second renewal attempt"}},
		{tm(30*time.Second, math.MaxInt64, math.MaxInt64), []string{"must be at least 2 × retryPeriod 2562047h47m16.854775807s = more than 2562047h47m16.854775807s"}},
		// No negative product for a positive retry period, whatever its size.
		{tm(30*time.Second, math.MinInt64, math.MaxInt64), []string{"= more than 2562047h47m16.854775807s"}},
		// Several rules at once: one error lists them all.
		{tm(10*time.Second, 20*time.Second, 20*time.Second), []string{
			"leaseDuration 10s must exceed renewDeadline 20s",
			"renewDeadline 20s must exceed 1.2 × retryPeriod 20s = 24s",
		}},
	}
	for _, c := range cases {
		err := c.in.Validate()
		if err == nil {
			t.Fatalf("Validate(%s) = nil, want error", c.in)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%s) = %q, want it to contain %q", c.in, err, w)
			}
		}
		if !strings.HasPrefix(err.Error(), "invalid leader-election timings "+c.in.String()+": ") {
			t.Errorf("error %q does not start with the triple", err)
		}
	}
}

// TestFloor: the floors form the smallest valid triple, and a nanosecond
// less of any one of them is refused.
func TestFloor(t *testing.T) {
	floor := tm(Floor(LeaseDuration), Floor(RenewDeadline), Floor(RetryPeriod))
	if want := tm(3*time.Second, 2*time.Second, time.Second); floor != want {
		t.Fatalf("floors %s, want %s", floor, want)
	}
	if err := floor.Validate(); err != nil {
		t.Fatalf("the floors do not validate: %v", err)
	}
	if MinRetryPeriod != time.Second || MinRenewAttempts != 2 {
		t.Errorf("MinRetryPeriod %s, MinRenewAttempts %d; docs/check.md states 1s and 2", MinRetryPeriod, MinRenewAttempts)
	}
	for _, f := range Fields {
		less := floor.With(f, floor.Get(f)-ns)
		if f == LeaseDuration {
			less = floor.With(f, floor.Get(f)-time.Second) // a lease is whole seconds
		}
		if less.Validate() == nil {
			t.Errorf("%s below its floor is accepted: %s", f, less)
		}
	}
	// Every default anywhere in the repository and upstream validates.
	for _, d := range []Timings{FleetDefaults, WranglerDefaults, tm(15*time.Second, 10*time.Second, 2*time.Second)} {
		if err := d.Validate(); err != nil {
			t.Errorf("default %s refused: %v", d, err)
		}
	}
}
