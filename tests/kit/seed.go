package kit

import (
	"math/rand"
	"os"
	"strconv"
	"testing"
)

// SeedEnv is the environment variable that sets the seed of every
// property test's random source, to repeat a failing run.
const SeedEnv = "LEASETUNE_TEST_SEED"

// Seed returns the seed of a property test's random source: SeedEnv's
// value when it is set, else def, the test's own fixed seed, so that every
// run checks the same cases unless asked otherwise. It logs the seed
// (t.Logf, shown with -v or on failure) with the command that repeats the
// run, and fails t when SeedEnv is not an integer.
func Seed(t testing.TB, def int64) int64 {
	t.Helper()
	seed := def
	if v, ok := os.LookupEnv(SeedEnv); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: not an integer: %v", SeedEnv, v, err)
		}
		seed = n
	}
	t.Logf("seed %d (repeat with %s=%d go test -run '^%s$')", seed, SeedEnv, seed, t.Name())
	return seed
}

// Rand returns a random source seeded with Seed(t, def).
func Rand(t testing.TB, def int64) *rand.Rand {
	t.Helper()
	return rand.New(rand.NewSource(Seed(t, def)))
}
