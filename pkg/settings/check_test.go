package settings

import (
	"errors"
	"strings"
	"testing"

	v3 "leasetune.io/leasetune/pkg/apis/management.cattle.io/v3"
)

func setting(name, value, source string) v3.Setting {
	s := v3.Setting{Value: value, Source: source}
	s.Name = name
	return s
}

func TestCheckChange(t *testing.T) {
	const (
		L = "fleet-leader-election-lease-duration"
		D = "fleet-leader-election-renew-deadline"
		P = "fleet-leader-election-retry-period"
	)
	at605020 := []v3.Setting{setting(L, "60s", ""), setting(D, "50s", ""), setting(P, "20s", "")}
	cases := []struct {
		name, setting, value string
		objs                 []v3.Setting
		parts                []string // "" means accepted
		is                   error
	}{
		{"valid", P, "5s", nil, nil, nil},
		{"empty is the default", P, "", at605020, nil, nil},
		{"unknown", "server-url", "x", nil, []string{`unknown setting "server-url"`}, ErrUnknownSetting},
		{"env-sourced", P, "5s", []v3.Setting{setting(P, "4s", "env")}, []string{"read-only", "CATTLE_FLEET_LEADER_ELECTION_RETRY_PERIOD"}, ErrReadOnly},
		{"unparsable", P, "10", nil, []string{`retryPeriod "10" is not a duration`}, nil},
		{"whitespace", P, "10s ", nil, []string{"white space"}, nil},
		{"empty default invalid with the others", L, "", at605020, []string{"leaseDuration 30s must exceed renewDeadline 50s",
			"lower fleet-leader-election-renew-deadline below 30s first"}, nil},
		{"lowering the lease first", L, "30s", at605020, []string{
			"leaseDuration 30s must exceed renewDeadline 50s",
			"lower fleet-leader-election-renew-deadline below 30s first",
			"From 1m0s/50s/20s: to lower the timings, change the retry period, then the renew deadline, then the lease duration"}, nil},
		{"lowering the renew deadline before the retry period", D, "20s", at605020, []string{
			"renewDeadline 20s must exceed 1.2 × retryPeriod 20s = 24s",
			"lower fleet-leader-election-retry-period below 16.666s (renewDeadline / 1.2) first"}, nil},
		{"raising the retry period first", P, "30s", nil, []string{
			"renewDeadline 25s must exceed 1.2 × retryPeriod 30s = 36s",
			"raise fleet-leader-election-renew-deadline above 36s (1.2 × retryPeriod) first"}, nil},
		{"raising the renew deadline first", D, "40s", nil, []string{"raise fleet-leader-election-lease-duration above 40s first"}, nil},
		{"over the bound: no order helps", L, "2h", nil, []string{"at most 1h0m0s"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckChange(c.objs, c.setting, c.value)
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
			if c.name == "over the bound: no order helps" && strings.Contains(err.Error(), "first") {
				t.Errorf("a hint for a rule no order fixes: %v", err)
			}
		})
	}
}
