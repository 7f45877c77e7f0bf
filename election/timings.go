package election

import (
	"fmt"
	"time"
)

// Timings is one leader-election timing triple, as passed to client-go's
// leaderelection.LeaderElectionConfig.
type Timings struct {
	// LeaseDuration is how long a follower waits, from the moment it
	// observed the last renewal, before it may take the lock over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps retrying a renewal before
	// it gives up leadership.
	RenewDeadline time.Duration
	// RetryPeriod is the interval between the leader's renewals and, with
	// jitter, between a follower's attempts to acquire the lock.
	RetryPeriod time.Duration
}

var (
	// FleetDefaults is the triple Fleet's chart sets since v0.10
	// (charts/fleet values leaderElection.*: 30s/25s/10s).
	FleetDefaults = Timings{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 10 * time.Second}

	// WranglerDefaults is the triple wrangler v2's pkg/leader uses when no
	// CATTLE_ELECTION_* env var is set: 45s/30s/2s.
	WranglerDefaults = Timings{LeaseDuration: 45 * time.Second, RenewDeadline: 30 * time.Second, RetryPeriod: 2 * time.Second}
)

// String formats the triple as "leaseDuration=30s renewDeadline=25s retryPeriod=10s".
func (t Timings) String() string {
	return fmt.Sprintf("%s=%s %s=%s %s=%s",
		LeaseDuration, FormatDuration(t.LeaseDuration),
		RenewDeadline, FormatDuration(t.RenewDeadline),
		RetryPeriod, FormatDuration(t.RetryPeriod))
}

// Get returns the value of field f.
func (t Timings) Get(f Field) time.Duration {
	switch f {
	case LeaseDuration:
		return t.LeaseDuration
	case RenewDeadline:
		return t.RenewDeadline
	case RetryPeriod:
		return t.RetryPeriod
	}
	panic(fmt.Sprintf("election: unknown field %q", string(f)))
}

// With returns a copy of t with field f set to d.
func (t Timings) With(f Field, d time.Duration) Timings {
	switch f {
	case LeaseDuration:
		t.LeaseDuration = d
	case RenewDeadline:
		t.RenewDeadline = d
	case RetryPeriod:
		t.RetryPeriod = d
	default:
		panic(fmt.Sprintf("election: unknown field %q", string(f)))
	}
	return t
}

// FormatDuration formats d as time.Duration.String does ("30s", "1m30s",
// "1.5s"). The result is exact to the nanosecond: time.ParseDuration, the
// parser of wrangler and Fleet, reads it back to d.
func FormatDuration(d time.Duration) string {
	return d.String()
}
