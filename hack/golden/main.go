// Command golden writes the cases that keep the Rancher UI extension's
// computations in the browser identical to the Go code's: the validation
// cases (ui/pkg/leasetune/validation/golden.json: durations, triples,
// costs) and the plan cases (ui/pkg/leasetune/plan/golden.json: the
// ElectionStatus of synthetic installations, the write order and
// `leasetune plan --set` for proposed triples, recommend's triples; see
// plan.go).
//
// Every expected value in the file is computed here by the code the
// webhook, the /v3/settings API and the controller run: pkg/election's
// ParseDuration, Timings.Validate, FormatDuration and CostOf, and
// pkg/settings's Registry. Two tests read the file: this package's (the
// committed file is what this command writes now, so a change of a rule or
// a message in Go fails until the file is regenerated) and the UI's jest
// test (validation.test.ts: the JavaScript port gives the same answer for
// every case, so the UI cannot drift from what was generated).
//
// Usage: go run ./hack/golden [-o FILE] [-plan FILE] (default: the files
// above, from the repository root).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/pkg/settings"
)

// DefaultPath is where the cases live, relative to the repository root.
const DefaultPath = "ui/pkg/leasetune/validation/golden.json"

// Golden is the file's content.
type Golden struct {
	// Note says where the file comes from.
	Note string `json:"note"`
	// Constants are the rules' numbers, for the UI's help text.
	Constants Constants `json:"constants"`
	// Settings is pkg/settings's Registry.
	Settings []Setting `json:"settings"`
	// Durations are ParseDuration cases, for each field name in turn only
	// where the message differs (the field name is part of it).
	Durations []Duration `json:"durations"`
	// Formats are FormatDuration cases (nanoseconds, as a decimal string:
	// JavaScript numbers cannot hold every int64).
	Formats []Format `json:"formats"`
	// Triples are Validate cases over strings, with the parse errors first
	// and, for valid triples, the cost of one lock.
	Triples []Triple `json:"triples"`
}

// Constants are pkg/election's constants.
type Constants struct {
	MinRetryPeriod   string             `json:"minRetryPeriod"`
	MaxDuration      string             `json:"maxDuration"`
	MinRenewAttempts int                `json:"minRenewAttempts"`
	JitterFactor     float64            `json:"jitterFactor"`
	Floors           map[string]string  `json:"floors"`
	Defaults         map[string]Timings `json:"defaults"`
}

// Setting is one settings.Definition.
type Setting struct {
	Name        string `json:"name"`
	Component   string `json:"component"`
	Field       string `json:"field"`
	Default     string `json:"default"`
	EnvVar      string `json:"envVar"`
	Description string `json:"description"`
}

// Duration is one ParseDuration case.
type Duration struct {
	Field string `json:"field"`
	Input string `json:"input"`
	// Nanoseconds is the parsed value (decimal string) when Error is empty.
	Nanoseconds string `json:"nanoseconds,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Format is one FormatDuration case.
type Format struct {
	Nanoseconds string `json:"nanoseconds"`
	Formatted   string `json:"formatted"`
}

// Timings is a triple as strings (FormatDuration).
type Timings struct {
	LeaseDuration string `json:"leaseDuration"`
	RenewDeadline string `json:"renewDeadline"`
	RetryPeriod   string `json:"retryPeriod"`
}

// Triple is one case: three inputs, and what the server says of them.
type Triple struct {
	Input Timings `json:"input"`
	// ParseErrors are the fields that do not parse, with
	// election.ParseError's message; when any, nothing else is checked.
	ParseErrors []FieldError `json:"parseErrors"`
	// Error is the whole *election.ValidationError message ("" when valid).
	Error string `json:"error,omitempty"`
	// Violations are its violations, in order.
	Violations []Violation `json:"violations"`
	// Cost is election.CostOf for one lock with one follower (valid only).
	Cost *Cost `json:"cost,omitempty"`
}

// FieldError is a parse error of one field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Violation is an election.Violation.
type Violation struct {
	Rule    string   `json:"rule"`
	Fields  []string `json:"fields"`
	Message string   `json:"message"`
}

// Cost is election.CostOf(t, 1, b) for both client-go behaviours.
type Cost struct {
	LeaderRequestsPerHour        float64 `json:"leaderRequestsPerHour"`
	LeaderOnlyUpdatesPerHour     float64 `json:"leaderOnlyUpdatesRequestsPerHour"`
	FollowerRequestsPerHour      float64 `json:"followerRequestsPerHour"`
	WorstCaseFailover            string  `json:"worstCaseFailover"`
	WorstCaseFailoverNanoseconds string  `json:"worstCaseFailoverNanoseconds"`
	RenewAttempts                float64 `json:"renewAttempts"`
}

// durationInputs are the single values every field is parsed from: Go's
// syntax in its corners (fractions, several units, both micro signs,
// signs, overflow), what copy and paste brings (white space, a zero-width
// space, a byte-order mark) and typos.
var durationInputs = []string{
	"", " ", "0", "+0", "-0", "0s", "1s", "10s", "30s", "1m", "1m30s", "90s", "1h", "2h", "1h0m1s", "1.5s",
	".5s", "5.s", "0.5s", "999ms", "1000ms", "1500ms", "3.000000001s", "1h0m0.000000001s", "1h1h",
	"10", "10x", "10S", "10sec", "abc", ".s", "-.s", "-10s", "+5s", "1e3s", "30 s", " 30s", "30s ",
	"\t30s", "30s\n", "\u00a030s", "\u200b30s", "\ufeff30s", "\u008530s", "1µs", "1μs", "1us", "5ns",
	"１０s", "10ｓ", "\"10s\"", "10s\\", "9223372036854775807ns", "9223372036854775808ns",
	"2562047h47m16.854775807s", "2562047h47m16.854775808s", "2562048h", "1.0000000000000000000001h",
	"18446744073709551616ns", "0.000000001s", "0.0000000001s", "1.999999999999s", "00010s", "-1h",
}

// Triples come from every combination of these (chosen to break each
// rule alone and together, and to sit on each boundary) and the few
// special cases after them.
var (
	leases  = []string{"30s", "3s", "2s", "1.5s", "500ms", "0s", "-1s", "45s", "1h", "1h0m1s", "10"}
	renews  = []string{"25s", "2s", "1s", "12s", "12.000000001s", "20s", "30s", "0s", "1h1s", "abc"}
	retries = []string{"10s", "1s", "999ms", "6s", "2s", "0s", "-1s", "30m", "10h", ""}
	special = [][3]string{
		{"60s", "50s", "20s"}, {"3s", "2s", "1s"}, {"45s", "30s", "2s"}, {"15s", "10s", "2s"},
		{"1h0m0s", "59m59s", "29m59s"}, {"9223372036854775807ns", "9223372036854775806ns", "9223372036854775805ns"},
		{"1s", "1s", "1s"}, {"0", "0", "0"}, {"-5s", "-5s", "-5s"}, {"1ns", "1ns", "1ns"},
		{"32s", "31s", "13s"}, {"2562047h", "2562046h", "7686143364045646503ns"}, {" 30s", "25s\t", "\u200b10s"},
	}
)

// formatInputs are nanosecond values FormatDuration must print exactly.
var formatInputs = []int64{0, 1, 999, 1000, 1001, 999999, 1000000, 1500000, 999999999, 1000000000, 1000000001,
	1500000000, 60000000000, 90000000000, 3600000000000, 3600000000001, 3661000000000, -1, -1500000000,
	9223372036854775807, -9223372036854775808, 74000000000, 89200000000}

// Generate computes the cases.
func Generate() Golden {
	g := Golden{
		Note: "Generated by `go run ./hack/golden` from pkg/election and pkg/settings; do not edit. " +
			"Checked by hack/golden's Go test and by validation.test.ts.",
		Constants: Constants{
			MinRetryPeriod:   election.FormatDuration(election.MinRetryPeriod),
			MaxDuration:      election.FormatDuration(election.MaxDuration),
			MinRenewAttempts: election.MinRenewAttempts,
			JitterFactor:     election.JitterFactor,
			Floors:           map[string]string{},
			Defaults: map[string]Timings{
				"fleet": timings(election.FleetDefaults), "wrangler": timings(election.WranglerDefaults),
			},
		},
	}
	for _, f := range election.Fields {
		g.Constants.Floors[string(f)] = election.FormatDuration(election.Floor(f))
	}
	for _, d := range settings.Registry {
		g.Settings = append(g.Settings, Setting{Name: d.Name, Component: string(d.Component), Field: string(d.Field),
			Default: d.Default, EnvVar: d.EnvVar(), Description: d.Description})
	}
	for _, in := range durationInputs {
		for _, f := range election.Fields {
			d, err := election.ParseDuration(f, in)
			c := Duration{Field: string(f), Input: in}
			if err != nil {
				c.Error = err.Error()
			} else {
				c.Nanoseconds = strconv.FormatInt(int64(d), 10)
			}
			g.Durations = append(g.Durations, c)
		}
	}
	for _, ns := range formatInputs {
		g.Formats = append(g.Formats, Format{Nanoseconds: strconv.FormatInt(ns, 10), Formatted: election.FormatDuration(time.Duration(ns))})
	}
	for _, l := range leases {
		for _, r := range renews {
			for _, t := range retries {
				g.Triples = append(g.Triples, triple(l, r, t))
			}
		}
	}
	for _, s := range special {
		g.Triples = append(g.Triples, triple(s[0], s[1], s[2]))
	}
	return g
}

func timings(t election.Timings) Timings {
	f := election.FormatDuration
	return Timings{LeaseDuration: f(t.LeaseDuration), RenewDeadline: f(t.RenewDeadline), RetryPeriod: f(t.RetryPeriod)}
}

// triple is what the server says of three inputs: each must parse
// (election.ParseDuration), then the whole must validate.
func triple(lease, renew, retry string) Triple {
	c := Triple{Input: Timings{LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry},
		ParseErrors: []FieldError{}, Violations: []Violation{}}
	var t election.Timings
	for i, s := range [3]string{lease, renew, retry} {
		f := election.Fields[i]
		d, err := election.ParseDuration(f, s)
		if err != nil {
			c.ParseErrors = append(c.ParseErrors, FieldError{Field: string(f), Message: err.Error()})
			continue
		}
		t = t.With(f, d)
	}
	if len(c.ParseErrors) > 0 {
		return c
	}
	err := t.Validate()
	if err == nil {
		cost := election.CostOf(t, 1, election.LeaderGetsAndUpdates)
		only := election.CostOf(t, 1, election.LeaderOnlyUpdates)
		c.Cost = &Cost{LeaderRequestsPerHour: cost.LeaderRequestsPerHour, LeaderOnlyUpdatesPerHour: only.LeaderRequestsPerHour,
			FollowerRequestsPerHour: cost.FollowerRequestsPerHour, WorstCaseFailover: election.FormatDuration(cost.WorstCaseFailover),
			WorstCaseFailoverNanoseconds: strconv.FormatInt(int64(cost.WorstCaseFailover), 10), RenewAttempts: election.RenewAttempts(t)}
		return c
	}
	var ve *election.ValidationError
	if !errors.As(err, &ve) {
		panic(fmt.Sprintf("Validate answered %T, not a *ValidationError: %v", err, err))
	}
	c.Error = ve.Error()
	for _, v := range ve.Violations {
		fields := make([]string, len(v.Fields))
		for i, f := range v.Fields {
			fields[i] = string(f)
		}
		c.Violations = append(c.Violations, Violation{Rule: string(v.Rule), Fields: fields, Message: v.Message})
	}
	return c
}

// Encode returns a file's bytes: indented JSON with a final newline.
func Encode(g interface{}) ([]byte, error) {
	b, err := json.MarshalIndent(g, "", " ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func main() {
	out := flag.String("o", DefaultPath, "the validation cases' file to write")
	planOut := flag.String("plan", PlanPath, "the plan cases' file to write")
	flag.Parse()
	for _, f := range []struct {
		path string
		v    interface{}
	}{{*out, Generate()}, {*planOut, GeneratePlan()}} {
		b, err := Encode(f.v)
		if err == nil {
			err = os.WriteFile(f.path, b, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "golden:", err)
			os.Exit(1)
		}
		fmt.Printf("wrote %s (%d bytes)\n", f.path, len(b))
	}
}
