package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGoldenCurrent fails when the committed cases differ from what the Go
// code says now: a rule or message changed in pkg/election or
// pkg/settings, or what pkg/electionstatus, pkg/plan or pkg/recommend
// compute, and the UI's ports (checked against the same files by
// ui/pkg/leasetune/validation/validation.test.js and
// ui/pkg/leasetune/plan/plan.test.js) must follow. Regenerate
// with `go run ./hack/golden` and fix the port until `make test-ui` passes.
func TestGoldenCurrent(t *testing.T) {
	for _, f := range []struct {
		path string
		v    interface{}
	}{{DefaultPath, Generate()}, {PlanPath, GeneratePlan()}} {
		want, err := Encode(f.v)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", f.path)
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run go run ./hack/golden)", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go run ./hack/golden` from the repository root, then `make test-ui`", path)
		}
	}
}

// TestGoldenCoversEveryRule checks the cases exercise every rule and both
// kinds of parse error, so the UI's port is checked on each.
func TestGoldenCoversEveryRule(t *testing.T) {
	g := Generate()
	rules := map[string]bool{}
	valid := 0
	for _, c := range g.Triples {
		for _, v := range c.Violations {
			rules[v.Rule] = true
		}
		if c.Cost != nil {
			valid++
		}
	}
	for _, r := range []string{"Positive", "LeaseDurationExceedsRenewDeadline", "RenewDeadlineExceedsJitteredRetryPeriod",
		"LeaseDurationWholeSeconds", "LeaseDurationAtLeastOneSecond", "RetryPeriodAtLeastOneSecond",
		"RenewDeadlineAllowsTwoAttempts", "AtMostOneHour"} {
		if !rules[r] {
			t.Errorf("no case breaks rule %s", r)
		}
	}
	if valid < 10 {
		t.Errorf("only %d valid triples", valid)
	}
	errs := map[string]bool{}
	for _, d := range g.Durations {
		if d.Error != "" {
			errs[d.Error[:len("leaseDuration")]] = true
		}
	}
	if len(errs) == 0 {
		t.Error("no duration case fails to parse")
	}
}
