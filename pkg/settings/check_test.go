package settings

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/tests/kit"
)

func setting(name, value, source string) v3.Setting {
	s := v3.Setting{Value: value, Source: source}
	s.Name = name
	return s
}

const (
	cL = "fleet-leader-election-lease-duration"
	cD = "fleet-leader-election-renew-deadline"
	cP = "fleet-leader-election-retry-period"
)

func view(l, d, p string) View {
	return View{Objects: []v3.Setting{setting(cL, l, ""), setting(cD, d, ""), setting(cP, p, "")}}
}

func TestCheckChange(t *testing.T) {
	at605020 := view("60s", "50s", "20s")
	envRetry30 := View{Objects: []v3.Setting{setting(cP, "30s", "env")}}
	envRetry10 := View{Objects: []v3.Setting{setting(cP, "10s", "env")}}
	cases := []struct {
		name, setting, value string
		v                    View
		parts                []string // nil means accepted
		is                   error
	}{
		{"valid", cP, "5s", View{}, nil, nil},
		{"empty is the default", cP, "", at605020, nil, nil},
		{"unknown", "server-url", "x", View{}, []string{`unknown setting "server-url"`}, ErrUnknownSetting},
		{"env-sourced object", cP, "5s", View{Objects: []v3.Setting{setting(cP, "4s", "env")}}, []string{"read-only", "CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD"}, ErrReadOnly},
		{"env var on the pod, source rewritten by hand", cP, "5s", View{Objects: []v3.Setting{setting(cP, "4s", "")},
			EnvSet: func(d Definition) bool { return d.Name == cP }}, []string{"read-only"}, ErrReadOnly},
		{"unparsable", cP, "10", View{}, []string{`retryPeriod "10" is not a duration`}, nil},
		{"whitespace", cP, "10s ", View{}, []string{"white space"}, nil},
		// Renew 25s needs a retry of at most 12.5s (two attempts), so the retry moves first.
		{"empty default invalid with the others", cL, "", at605020, []string{"leaseDuration 30s must exceed renewDeadline 50s",
			"An order that works: set fleet-leader-election-retry-period to 12s, then fleet-leader-election-renew-deadline to 25s, then this value"}, nil},
		{"lowering the lease first", cL, "30s", at605020, []string{"leaseDuration 30s must exceed renewDeadline 50s",
			"An order that works: set fleet-leader-election-retry-period to 12s, then fleet-leader-election-renew-deadline to 25s, then this value"}, nil},
		{"lowering the lease below 2 × retry", cL, "20s", at605020, []string{
			"set fleet-leader-election-retry-period to 8s, then fleet-leader-election-renew-deadline to 16s, then this value"}, nil},
		{"raising the retry period first", cP, "30s", View{}, []string{
			"renewDeadline 25s must exceed 1.2 × retryPeriod 30s = 36s",
			"renewDeadline 25s must be at least 2 × retryPeriod 30s = 1m0s, so the leader gets a second renewal attempt",
			"set fleet-leader-election-lease-duration to 1m12s, then fleet-leader-election-renew-deadline to 1m0s, then this value"}, nil},
		// The floor: retryPeriod at least 1s, renewDeadline at least 2 × retryPeriod.
		{"retry 1s is accepted", cP, "1s", View{}, nil, nil},
		{"retry 999ms: no order", cP, "999ms", View{}, []string{"retryPeriod 999ms must be at least 1s"}, nil},
		{"retry 10ms typed for 10s: no order", cP, "10ms", View{}, []string{"retryPeriod 10ms must be at least 1s"}, nil},
		{"retry 1ns: no order", cP, "1ns", view("3s", "2s", "1s"), []string{"retryPeriod 1ns must be at least 1s"}, nil},
		{"renew exactly 2 × retry", cD, "20s", View{}, nil, nil},
		{"renew just below 2 × retry", cD, "19.999s", View{}, []string{
			"renewDeadline 19.999s must be at least 2 × retryPeriod 10s = 20s, so the leader gets a second renewal attempt",
			"An order that works: set fleet-leader-election-retry-period to 9s, then this value"}, nil},
		{"renew 15s with retry 10s passes client-go, not the floor", cD, "15s", View{}, []string{
			"renewDeadline 15s must be at least 2 × retryPeriod 10s = 20s",
			"An order that works: set fleet-leader-election-retry-period to 7s, then this value"}, nil},
		{"retry exactly half the renew deadline", cP, "12.5s", View{}, nil, nil},
		{"retry just above half the renew deadline", cP, "12.6s", View{}, []string{
			"renewDeadline 25s must be at least 2 × retryPeriod 12.6s = 25.2s",
			"An order that works: set fleet-leader-election-renew-deadline to 26s, then this value"}, nil},
		{"renew at its floor", cD, "2s", view("3s", "2.5s", "1s"), nil, nil},
		{"renew below its floor: no order", cD, "1.999s", View{}, []string{
			"No order of edits helps: renewDeadline 1.999s must be at least 2s (2 × the shortest retryPeriod, 1s)"}, nil},
		{"lease at its floor", cL, "3s", view("4s", "2s", "1s"), nil, nil},
		{"lease at its floor, with an order", cL, "3s", View{}, []string{
			"An order that works: set fleet-leader-election-retry-period to 1s, then fleet-leader-election-renew-deadline to 2s, then this value"}, nil},
		{"lease below its floor: no order", cL, "2s", View{}, []string{
			"No order of edits helps: leaseDuration 2s must be at least 3s (above the shortest renewDeadline, 2s, in whole seconds)"}, nil},
		{"out of an unparsable triple: not with a retry below the floor", cP, "999ms", view("abc", "25s", "30s"), []string{"retryPeriod 999ms must be at least 1s"}, nil},
		{"out of an unparsable triple: not with a renew below its floor", cD, "1s", view("abc", "25s", "30s"), []string{"renewDeadline 1s must be at least 2s"}, nil},
		{"raising the renew deadline first", cD, "40s", View{}, []string{"set fleet-leader-election-lease-duration to 48s, then this value"}, nil},
		{"over the bound: no order helps", cL, "2h", View{}, []string{"at most 1h0m0s"}, nil},
		{"renew at the bound: no order helps", cD, "1h", View{}, []string{"leaseDuration 30s must exceed renewDeadline 1h0m0s"}, nil},
		{"a value with a rule of its own: no order", cL, "500ms", View{}, []string{"at least 1s"}, nil},
		{"a deleted setting counts as the remembered value", cD, "55s",
			View{Objects: []v3.Setting{setting(cD, "50s", ""), setting(cP, "20s", "")}, Remembered: map[string]string{cL: "60s"}}, nil, nil},
		{"the hint names the env var of a read-only setting", cD, "10s", envRetry10,
			[]string{"would have to be", "CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD"}, nil},
		// The current triple is invalid (env retry 30s with the default renew 25s):
		// a step that breaks nothing new is accepted, so there is a way out.
		{"a way out of an invalid state", cL, "60s", envRetry30, nil, nil},
		{"but no step that adds a broken rule", cL, "20s", envRetry30, []string{"leaseDuration 20s must exceed renewDeadline 25s"}, nil},
		// A value that does not even parse (written before the webhook was
		// installed) must not lock everyone out: any sensible value of any
		// of the three is a step out.
		{"out of an unparsable triple: fix it", cL, "30s", view("abc", "25s", "30s"), nil, nil},
		{"out of an unparsable triple: another one", cD, "40s", view("abc", "25s", "30s"), nil, nil},
		{"out of an unparsable triple: not with a bad value", cD, "0s", view("abc", "25s", "30s"), []string{"renewDeadline 0s must be greater than 0"}, nil},
		{"near the bound a hint still exists", cD, "55m0s", View{}, []string{"set fleet-leader-election-lease-duration to 1h0m0s, then this value"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckChange(c.v, c.setting, c.value)
			if c.parts == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, p := range c.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("%q lacks %q", err, p)
				}
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("%v is not %v", err, c.is)
			}
			if strings.Contains(c.name, "no order") && strings.Contains(err.Error(), "An order that works") {
				t.Errorf("a hint where no order helps: %v", err)
			}
		})
	}
}

var hintStep = regexp.MustCompile(`(fleet-leader-election-[a-z-]+) to ([0-9.hms]+)`)

// TestHintsAreFollowable: for random valid triples and edits, every hint's
// steps, applied in order, are each accepted, and then so is the edit.
func TestHintsAreFollowable(t *testing.T) {
	rng := kit.Rand(t, 1)
	// Values near the floor (retry 1s, renew 2s, lease 3s) and below it included.
	durs := []string{"999ms", "1s", "1.5s", "1.999s", "2s", "2.5s", "3s", "5s", "8s", "10s", "15s", "20s", "25s", "30s", "45s", "1m0s", "2m0s", "5m0s", "10m0s", "30m0s", "1h0m0s"}
	names := []string{cL, cD, cP}
	hints, floors := 0, 0
	for i := 0; i < 5000; i++ {
		l, d, p := durs[rng.Intn(len(durs))], durs[rng.Intn(len(durs))], durs[rng.Intn(len(durs))]
		if _, err := Evaluate(FleetController, [3]Resolved{{Value: l}, {Value: d}, {Value: p}}); err != nil {
			continue
		}
		name, value := names[rng.Intn(3)], durs[rng.Intn(len(durs))]
		v := view(l, d, p)
		err := CheckChange(v, name, value)
		var ce *ChangeError
		if !errors.As(err, &ce) || ce.Hint == "" {
			continue
		}
		if strings.HasPrefix(ce.Hint, "No order of edits helps: ") {
			// Then truly none does: the value is refused with any other two.
			floors++
			d, _ := Lookup(name)
			own, _ := election.ParseDuration(d.Field, value)
			for _, a := range durs {
				for _, b := range durs {
					others := [2]time.Duration{}
					for j, s := range []string{a, b} {
						others[j], _ = time.ParseDuration(s)
					}
					tr := election.Timings{}
					k := 0
					for _, f := range election.Fields {
						if f == d.Field {
							tr = tr.With(f, own)
						} else {
							tr = tr.With(f, others[k])
							k++
						}
					}
					if tr.Validate() == nil {
						t.Fatalf("%s=%s: the hint says no order helps, but %s is valid", name, value, tr)
					}
				}
			}
			continue
		}
		if !strings.HasPrefix(ce.Hint, "An order that works: ") {
			t.Fatalf("from %s/%s/%s, %s=%s: a hint that is neither an order nor a floor: %q", l, d, p, name, value, ce.Hint)
		}
		hints++
		for _, m := range hintStep.FindAllStringSubmatch(ce.Hint, -1) {
			if err := CheckChange(v, m[1], m[2]); err != nil {
				t.Fatalf("from %s/%s/%s, %s=%s: the hinted step %s=%s is refused: %v", l, d, p, name, value, m[1], m[2], err)
			}
			for i := range v.Objects {
				if v.Objects[i].Name == m[1] {
					v.Objects[i].Value = m[2]
				}
			}
		}
		if err := CheckChange(v, name, value); err != nil {
			t.Fatalf("from %s/%s/%s after the hinted steps, %s=%s is still refused: %v (hint %q)", l, d, p, name, value, err, ce.Hint)
		}
	}
	if hints < 100 || floors < 10 {
		t.Errorf("only %d hints and %d floors exercised", hints, floors)
	}
}

// An empty value is the default: a refusal of one says which it is.
func TestChangeErrorNamesTheDefault(t *testing.T) {
	var objs []v3.Setting
	for name, value := range map[string]string{"fleet-leader-election-lease-duration": "30s", "fleet-leader-election-renew-deadline": "12s",
		"fleet-leader-election-retry-period": "5s"} {
		s := v3.Setting{Value: value}
		s.Name = name
		objs = append(objs, s)
	}
	err := CheckChange(View{Objects: objs}, "fleet-leader-election-retry-period", "")
	if err == nil || !strings.HasPrefix(err.Error(), `fleet-leader-election-retry-period="" (empty: the default, 10s) refused: `) {
		t.Errorf("CheckChange = %v", err)
	}
}
