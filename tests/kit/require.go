package kit

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// RequireEnv names the suites that must run: a comma-separated list of
// suite names, or "all". .ci/run sets it, so that CI fails where a
// developer's machine without a tool only skips.
const RequireEnv = "LEASETUNE_REQUIRE"

// Suites are the names RequireEnv takes: the tests that need a tool a
// machine may lack.
var Suites = []string{"browser", "prometheus", "operator", "promtool"}

// SkipUnlessRequired skips t, saying why, unless suite is required by
// RequireEnv: then it fails t with the same reason.
func SkipUnlessRequired(t testing.TB, suite, why string) {
	t.Helper()
	if !slices.Contains(Suites, suite) {
		t.Fatalf("kit.SkipUnlessRequired: unknown suite %q (kit.Suites: %v)", suite, Suites)
	}
	if Required(os.Getenv(RequireEnv), suite) {
		t.Fatalf("%s=%s requires the %s suite to run, and it cannot: %s", RequireEnv, os.Getenv(RequireEnv), suite, why)
	}
	t.Skip(why)
}

// Required reports whether the value of RequireEnv requires suite.
func Required(value, suite string) bool {
	for _, s := range strings.Split(value, ",") {
		if s = strings.TrimSpace(s); s == "all" || s == suite {
			return true
		}
	}
	return false
}
