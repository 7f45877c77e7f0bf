package election

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// clientGoAccepts asks client-go v0.28 itself whether it accepts t.
func clientGoAccepts(t Timings) bool {
	_, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          &resourcelock.LeaseLock{LockConfig: resourcelock.ResourceLockConfig{Identity: "fuzz"}},
		LeaseDuration: t.LeaseDuration,
		RenewDeadline: t.RenewDeadline,
		RetryPeriod:   t.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {},
			OnStoppedLeading: func() {},
		},
	})
	return err == nil
}

// ourRulesHold restates this project's own rules independently of Validate:
// a lease of whole seconds, at least 1s; a retry period of at least 1s; a
// renew deadline of at least two retry periods (in exact integers: no
// product that could overflow); each at most 1h.
func ourRulesHold(t Timings) bool {
	twoRetries := new(big.Int).Mul(big.NewInt(int64(t.RetryPeriod)), big.NewInt(2))
	return t.LeaseDuration >= time.Second && t.LeaseDuration%time.Second == 0 &&
		t.RetryPeriod >= time.Second &&
		big.NewInt(int64(t.RenewDeadline)).Cmp(twoRetries) >= 0 &&
		t.LeaseDuration <= time.Hour && t.RenewDeadline <= time.Hour && t.RetryPeriod <= time.Hour
}

// FuzzValidateMatchesClientGo checks that Validate accepts exactly the
// triples client-go's NewLeaderElector accepts that also satisfy this
// project's own rules; in particular it never accepts what client-go
// refuses. The seed corpus runs with every `go test`.
func FuzzValidateMatchesClientGo(f *testing.F) {
	s := int64(time.Second)
	for _, seed := range [][3]int64{
		{30 * s, 25 * s, 10 * s},
		{45 * s, 30 * s, 2 * s},
		{30 * s, 12 * s, 10 * s},   // renew exactly 1.2 × retry
		{30 * s, 12*s + 1, 10 * s}, // just above
		{25 * s, 25 * s, 10 * s},   // lease == renew
		{3 * s, 2 * s, 1 * s},      // smallest valid
		{3 * s, 2*s - 1, 1 * s},    // renew just below 2 × retry
		{3 * s, 2 * s, 1*s - 1},    // retry just below 1s
		{1 * s, 2, 1},              // client-go's smallest: refused by our floor
		{2 * s, 1500 * int64(time.Millisecond), int64(time.Second) / 100}, // 10ms typed for 10s
		{30 * s, 20 * s, 10 * s},      // renew exactly 2 × retry
		{30 * s, 20*s - 1, 10 * s},    // just below
		{0, 0, 0},                     // zeros
		{-1, -2, -3},                  // negatives
		{3600 * s, 3000 * s, 600 * s}, // at the upper bound
		{3601 * s, 3000 * s, 600 * s},
		{30 * s, 25 * s, 1<<63 - 1}, // float overflow in client-go's jitter product
		{1<<63 - 1, 1<<62 + 1, 1 << 62},
		{1500 * int64(time.Millisecond), s, 100 * int64(time.Millisecond)},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, lease, renew, retry int64) {
		in := tm(time.Duration(lease), time.Duration(renew), time.Duration(retry))
		err := in.Validate()
		cg := clientGoAccepts(in)
		if err == nil && !cg {
			t.Fatalf("Validate accepted %s, which client-go's NewLeaderElector refuses", in)
		}
		if want := cg && ourRulesHold(in); (err == nil) != want {
			t.Fatalf("Validate(%s) = %v; client-go accepts: %v, project rules hold: %v", in, err, cg, ourRulesHold(in))
		}
		var ve *ValidationError
		if err != nil && !errors.As(err, &ve) {
			t.Fatalf("Validate answered %T, not a *ValidationError: %v", err, err)
		}
		if err != nil {
			for _, v := range ve.Violations {
				if v.Message == "" || len(v.Fields) == 0 {
					t.Fatalf("violation %+v lacks a message or fields", v)
				}
			}
		}
	})
}

// FuzzFormatRoundTrip checks that every duration this package writes is
// read back exactly by the parser wrangler and Fleet use.
func FuzzFormatRoundTrip(f *testing.F) {
	for _, d := range []int64{0, 1, 10 * int64(time.Second), 1500 * int64(time.Millisecond), int64(time.Hour), 1<<63 - 1, -1 << 63, 123456789} {
		f.Add(d)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := time.Duration(n)
		s := FormatDuration(d)
		got, err := time.ParseDuration(s)
		if err != nil || got != d {
			t.Fatalf("time.ParseDuration(FormatDuration(%d) = %q) = %v, %v", n, s, got, err)
		}
		if got, err := ParseDuration(RetryPeriod, s); err != nil || got != d {
			t.Fatalf("ParseDuration(%q) = %v, %v", s, got, err)
		}
	})
}
