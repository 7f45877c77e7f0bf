package election

import (
	"math"
	"testing"
	"time"
)

func TestCostOf(t *testing.T) {
	cases := []struct {
		name      string
		in        Timings
		followers int
		b         ClientGoBehaviour
		total     float64
		failover  time.Duration
	}{
		// docs/check.md: 4,715/h and 950/h measured for these two.
		{"wrangler, 1 follower, v0.28", WranglerDefaults, 1, LeaderGetsAndUpdates, 3600 + 1125, 45*time.Second + 8800*time.Millisecond},
		{"fleet, 1 follower, v0.28", FleetDefaults, 1, LeaderGetsAndUpdates, 720 + 225, 74 * time.Second},
		{"wrangler, 1 follower, v0.30", WranglerDefaults, 1, LeaderOnlyUpdates, 1800 + 1125, 45*time.Second + 8800*time.Millisecond},
		{"fleet, no follower, v0.30", FleetDefaults, 0, LeaderOnlyUpdates, 360, 74 * time.Second},
		{"fleet, 3 followers, v0.28", FleetDefaults, 3, LeaderGetsAndUpdates, 720 + 3*225, 74 * time.Second},
	}
	for _, c := range cases {
		got := CostOf(c.in, c.followers, c.b)
		if math.Abs(got.TotalRequestsPerHour()-c.total) > 1e-9 {
			t.Errorf("%s: total %v/h, want %v/h", c.name, got.TotalRequestsPerHour(), c.total)
		}
		if got.WorstCaseFailover != c.failover {
			t.Errorf("%s: failover %v, want %v", c.name, got.WorstCaseFailover, c.failover)
		}
	}
}

func TestCostFallsWithRetryPeriod(t *testing.T) {
	prev := math.Inf(1)
	for _, retry := range []time.Duration{time.Second, 2 * time.Second, 10 * time.Second, time.Minute} {
		c := CostOf(tm(time.Hour, 50*time.Minute, retry), 1, LeaderGetsAndUpdates)
		if c.TotalRequestsPerHour() >= prev {
			t.Errorf("retry %v: %v/h not below %v/h", retry, c.TotalRequestsPerHour(), prev)
		}
		prev = c.TotalRequestsPerHour()
	}
}
