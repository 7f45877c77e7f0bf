package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		code      int
		stdout    []string // substrings
		stderr    []string
		notStdout bool // stdout must be empty
	}{
		{
			name: "fleet defaults",
			args: []string{"check", "--lease-duration", "30s", "--renew-deadline", "25s", "--retry-period", "10s"},
			code: 0,
			stdout: []string{
				"valid: leaseDuration=30s renewDeadline=25s retryPeriod=10s",
				"client-go < v0.30 (leader gets and updates): 945 (leader 720, followers 225)",
				"client-go v0.30+ (leader updates only):      585 (leader 360, followers 225)",
				"worst-case failover after the leader dies: 1m14s",
				"renewal attempts before the leader gives up: 2.5 (renewDeadline / retryPeriod)\n",
				"the leader survives a kube-apiserver stall of up to 25s (renewDeadline)\n",
			},
		},
		{
			name: "a spelling Fleet v0.16's chart refuses: a note, still valid",
			args: []string{"check", "--lease-duration", "30s", "--renew-deadline", "25000ms", "--retry-period", "+10s"},
			code: 0,
			stdout: []string{
				"valid: leaseDuration=30s renewDeadline=25s retryPeriod=10s",
				"note: \"+10s\" is valid for wrangler and client-go, but as leaderElection.retryPeriod in Fleet's chart values (rancher-config's fleet key) Fleet v0.16's values schema refuses it (^(0|([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+)$): write it as 10s\n",
			},
		},
		{
			name:   "wrangler defaults with 2 followers",
			args:   []string{"check", "--lease-duration=45s", "--renew-deadline=30s", "--retry-period=2s", "--followers=2"},
			code:   0,
			stdout: []string{"1 leader + 2 follower(s)", ": 5850 (leader 3600, followers 2250)", "failover after the leader dies: 53.8s", "renewal attempts before the leader gives up: 15 ", "stall of up to 30s"},
		},
		{
			name:      "renew deadline equal to 1.2 × retry period",
			args:      []string{"check", "--lease-duration", "30s", "--renew-deadline", "12s", "--retry-period", "10s"},
			code:      1,
			stderr:    []string{"\n  renewDeadline 12s must exceed 1.2 × retryPeriod 10s = 12s\n", "\n  renewDeadline 12s must be at least 2 × retryPeriod 10s = 20s, so the leader gets a second renewal attempt\n"},
			notStdout: true,
		},
		{
			name:      "the reported 2s/1s/1ms: refused by the floor",
			args:      []string{"check", "--lease-duration", "2s", "--renew-deadline", "1s", "--retry-period", "1ms"},
			code:      1,
			stderr:    []string{"invalid: leaseDuration=2s renewDeadline=1s retryPeriod=1ms\n", "\n  retryPeriod 1ms must be at least 1s\n"},
			notStdout: true,
		},
		{
			name:      "retry period 999ms",
			args:      []string{"check", "--lease-duration", "30s", "--renew-deadline", "25s", "--retry-period", "999ms"},
			code:      1,
			stderr:    []string{"\n  retryPeriod 999ms must be at least 1s\n"},
			notStdout: true,
		},
		{
			name:   "retry period 1s, the floor",
			args:   []string{"check", "--lease-duration", "30s", "--renew-deadline", "25s", "--retry-period", "1s"},
			code:   0,
			stdout: []string{"valid: leaseDuration=30s renewDeadline=25s retryPeriod=1s", "(leader 7200, followers 2250)"},
		},
		{
			name:   "the smallest valid triple",
			args:   []string{"check", "--lease-duration", "3s", "--renew-deadline", "2s", "--retry-period", "1s"},
			code:   0,
			stdout: []string{"valid: leaseDuration=3s renewDeadline=2s retryPeriod=1s"},
		},
		{
			name:   "renew deadline exactly 2 × retry period",
			args:   []string{"check", "--lease-duration", "30s", "--renew-deadline", "20s", "--retry-period", "10s"},
			code:   0,
			stdout: []string{"valid: leaseDuration=30s renewDeadline=20s retryPeriod=10s"},
		},
		{
			name:      "renew deadline just below 2 × retry period, above client-go's 1.2",
			args:      []string{"check", "--lease-duration", "30s", "--renew-deadline", "19.999s", "--retry-period", "10s"},
			code:      1,
			stderr:    []string{"\n  renewDeadline 19.999s must be at least 2 × retryPeriod 10s = 20s, so the leader gets a second renewal attempt\n"},
			notStdout: true,
		},
		{
			name:      "several rules broken, one line each",
			args:      []string{"check", "--lease-duration", "10.5s", "--renew-deadline", "20s", "--retry-period", "20s"},
			code:      1,
			stderr:    []string{"\n  leaseDuration 10.5s must exceed renewDeadline 20s\n", "\n  renewDeadline 20s must exceed 1.2 × retryPeriod 20s = 24s\n", "\n  leaseDuration 10.5s must be a whole number of seconds\n"},
			notStdout: true,
		},
		{
			name:      "unparsable and missing",
			args:      []string{"check", "--lease-duration", "30", "--renew-deadline", " 25s"},
			code:      2,
			stderr:    []string{`--lease-duration: leaseDuration "30" is not a duration`, `--renew-deadline: renewDeadline " 25s" is not a duration: leading or trailing white space`, "flag --retry-period is required", "Usage:"},
			notStdout: true,
		},
		{
			name:      "no flags",
			args:      []string{"check"},
			code:      2,
			stderr:    []string{"flag --lease-duration is required", "Usage:"},
			notStdout: true,
		},
		{
			name:   "unknown flag",
			args:   []string{"check", "--lease", "30s"},
			code:   2,
			stderr: []string{"unknown flag: --lease"},
		},
		{
			name:   "negative followers",
			args:   []string{"check", "--lease-duration", "30s", "--renew-deadline", "25s", "--retry-period", "10s", "--followers", "-1"},
			code:   2,
			stderr: []string{"--followers -1 must not be negative"},
		},
		{
			name:   "stray argument",
			args:   []string{"check", "30s"},
			code:   2,
			stderr: []string{`unexpected argument "30s"`, "Usage:"},
		},
		{
			name:   "a flag that swallowed the next flag",
			args:   []string{"check", "--lease-duration", "30s", "--retry-period", "--renew-deadline", "25s"},
			code:   2,
			stderr: []string{`unexpected argument "25s"`},
		},
		{
			name:   "a duration flag given twice",
			args:   []string{"check", "--lease-duration", "30s", "--renew-deadline", "25s", "--retry-period", "10s", "--retry-period", "20s"},
			code:   2,
			stderr: []string{"--retry-period", "given more than once"},
		},
		{
			name:   "followers are decimal",
			args:   []string{"check", "--lease-duration", "30s", "--renew-deadline", "25s", "--retry-period", "10s", "--followers", "010"},
			code:   0,
			stdout: []string{"1 leader + 10 follower(s)"},
		},
		{
			name:   "followers in hex are refused",
			args:   []string{"check", "--lease-duration", "30s", "--renew-deadline", "25s", "--retry-period", "10s", "--followers", "0x10"},
			code:   2,
			stderr: []string{"not a decimal number"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), c.args, strings.NewReader(""), &out, &errOut)
			if code != c.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, &out, &errOut)
			}
			for _, s := range c.stdout {
				if !strings.Contains(out.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, &out)
				}
			}
			for _, s := range c.stderr {
				if !strings.Contains(errOut.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, &errOut)
				}
			}
			if c.notStdout && out.Len() > 0 {
				t.Errorf("stdout not empty:\n%s", &out)
			}
		})
	}
}

// TestCheckJSON: check -o json prints one object on stdout, valid or not,
// and exits as the text output does.
func TestCheckJSON(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want checkJSON
	}{
		{
			name: "wrangler defaults with 2 followers",
			args: []string{"--lease-duration", "45s", "--renew-deadline", "30s", "--retry-period", "2s", "--followers", "2"},
			want: checkJSON{LeaseDuration: "45s", RenewDeadline: "30s", RetryPeriod: "2s", Valid: true, Violations: []violationJSON{}, Followers: 2,
				Cost: []costJSON{
					{ClientGo: "client-go < v0.30 (leader gets and updates)", RequestsPerHour: 5850, LeaderRequestsPerHour: 3600, FollowerRequestsPerHour: 2250},
					{ClientGo: "client-go v0.30+ (leader updates only)", RequestsPerHour: 4050, LeaderRequestsPerHour: 1800, FollowerRequestsPerHour: 2250},
				},
				WorstCaseFailover: "53.8s", RenewAttempts: 15, SurvivableStall: "30s", Notes: []string{}},
		},
		{
			name: "Fleet's defaults, one spelled as Fleet v0.16's chart refuses",
			args: []string{"--lease-duration", "30s", "--renew-deadline", "25s", "--retry-period", "+10s"},
			want: checkJSON{LeaseDuration: "30s", RenewDeadline: "25s", RetryPeriod: "10s", Valid: true, Violations: []violationJSON{}, Followers: 1,
				Cost: []costJSON{
					{ClientGo: "client-go < v0.30 (leader gets and updates)", RequestsPerHour: 945, LeaderRequestsPerHour: 720, FollowerRequestsPerHour: 225},
					{ClientGo: "client-go v0.30+ (leader updates only)", RequestsPerHour: 585, LeaderRequestsPerHour: 360, FollowerRequestsPerHour: 225},
				},
				WorstCaseFailover: "1m14s", RenewAttempts: 2.5, SurvivableStall: "25s",
				Notes: []string{`"+10s" is valid for wrangler and client-go, but as leaderElection.retryPeriod in Fleet's chart values (rancher-config's fleet key) Fleet v0.16's values schema refuses it (^(0|([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+)$): write it as 10s`}},
		},
		{
			name: "invalid: every broken rule, no cost",
			args: []string{"--lease-duration", "10.5s", "--renew-deadline", "20s", "--retry-period", "20s"},
			code: 1,
			want: checkJSON{LeaseDuration: "10.5s", RenewDeadline: "20s", RetryPeriod: "20s", Followers: 1, Notes: []string{},
				Violations: []violationJSON{
					{Rule: "LeaseDurationExceedsRenewDeadline", Fields: []string{"leaseDuration", "renewDeadline"}, Message: "leaseDuration 10.5s must exceed renewDeadline 20s"},
					{Rule: "RenewDeadlineExceedsJitteredRetryPeriod", Fields: []string{"renewDeadline", "retryPeriod"}, Message: "renewDeadline 20s must exceed 1.2 × retryPeriod 20s = 24s"},
					{Rule: "LeaseDurationWholeSeconds", Fields: []string{"leaseDuration"}, Message: "leaseDuration 10.5s must be a whole number of seconds"},
					{Rule: "RenewDeadlineAllowsTwoAttempts", Fields: []string{"renewDeadline", "retryPeriod"}, Message: "renewDeadline 20s must be at least 2 × retryPeriod 20s = 40s, so the leader gets a second renewal attempt"},
				}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append(append([]string{"check"}, c.args...), "-o", "json"), strings.NewReader(""), &out, &errOut)
			if code != c.code || errOut.Len() > 0 {
				t.Errorf("exit code %d, stderr %q: want %d and nothing", code, &errOut, c.code)
			}
			var got checkJSON
			dec := json.NewDecoder(&out)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&got); err != nil {
				t.Fatalf("stdout is not check's JSON: %v\n%s", err, out.String())
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			if dec.More() {
				t.Error("more than one JSON value on stdout")
			}
		})
	}
	// The model's numbers, not rounded as the text rounds them.
	var out, errOut bytes.Buffer
	var got checkJSON
	if code := run(context.Background(), []string{"check", "--lease-duration", "30s", "--renew-deadline", "25s", "--retry-period", "7s", "-o", "json"},
		strings.NewReader(""), &out, &errOut); code != 0 || json.Unmarshal(out.Bytes(), &got) != nil || len(got.Cost) != 2 {
		t.Fatalf("7s: exit %d: %s%s", code, &out, &errOut)
	}
	h := 3600.0 / 7
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"leader, client-go < v0.30", got.Cost[0].LeaderRequestsPerHour, 2 * h},
		{"followers", got.Cost[0].FollowerRequestsPerHour, h / 1.6},
		{"all, client-go < v0.30", got.Cost[0].RequestsPerHour, 2*h + h/1.6},
		{"all, client-go v0.30+", got.Cost[1].RequestsPerHour, h + h/1.6},
		{"renew attempts", got.RenewAttempts, 25.0 / 7},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"check", "--lease-duration", "45s", "--renew-deadline", "30s", "--retry-period", "2s", "-o", "yaml"},
		strings.NewReader(""), &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), `--output "yaml": want text or json`) || out.Len() > 0 {
		t.Errorf("-o yaml: exit %d, stdout %q, stderr %q: want 2 and the usage error", code, &out, &errOut)
	}
	// Not escaped for HTML, as a person reads it.
	out.Reset()
	run(context.Background(), []string{"check", "--lease-duration", "45s", "--renew-deadline", "30s", "--retry-period", "2s", "-o", "json"}, strings.NewReader(""), &out, &errOut)
	if !strings.Contains(out.String(), `"client-go < v0.30`) {
		t.Errorf("JSON escapes < for HTML:\n%s", &out)
	}
}
