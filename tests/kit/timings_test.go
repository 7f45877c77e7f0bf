package kit

import (
	"testing"
	"time"

	"leasetune.io/leasetune/pkg/election"
)

func TestTimings(t *testing.T) {
	if got, want := Timings("30s", "25s", "10s"), (election.Timings{LeaseDuration: 30 * time.Second, RenewDeadline: 25 * time.Second, RetryPeriod: 10 * time.Second}); got != want {
		t.Errorf("Timings = %v, want %v", got, want)
	}
	for _, c := range [][3]string{{"30s", "25s", "x"}, {"10s", "25s", "5s"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Timings%q did not panic", c)
				}
			}()
			Timings(c[0], c[1], c[2])
		}()
	}
}
