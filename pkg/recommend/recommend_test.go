package recommend

import (
	"errors"
	"testing"
	"time"

	"leasetune.io/leasetune/pkg/election"
	"leasetune.io/leasetune/tests/kit"
)

const s = time.Second

// bruteForce returns the fewest requests per hour of any triple on the
// whole-second grid up to max that meets the target, and whether one does.
func bruteForce(target Target, max int) (float64, bool) {
	best, found := 0.0, false
	for lease := 1; lease <= max; lease++ {
		for renew := 1; renew < lease; renew++ {
			for retry := 1; retry <= renew; retry++ {
				t := election.Timings{LeaseDuration: time.Duration(lease) * s, RenewDeadline: time.Duration(renew) * s, RetryPeriod: time.Duration(retry) * s}
				if !Meets(t, target) {
					continue
				}
				c := OptionOf(t, target).RequestsPerHour
				if !found || c < best {
					best, found = c, true
				}
			}
		}
	}
	return best, found
}

func TestBestAgainstBruteForce(t *testing.T) {
	cases := []struct {
		name   string
		target Target
		want   election.Timings // zero: only checked against the brute force
	}{
		{"60s, 2 attempts", Target{MaxFailover: 60 * s}, election.Timings{LeaseDuration: 20 * s, RenewDeadline: 19 * s, RetryPeriod: 9 * s}},
		{"60s, 3 attempts", Target{MaxFailover: 60 * s, MinRenewAttempts: 3}, election.Timings{LeaseDuration: 29 * s, RenewDeadline: 28 * s, RetryPeriod: 7 * s}},
		{"74s, Fleet's failover", Target{MaxFailover: 74 * s}, election.Timings{}},
		{"the floor exactly: 3s/2s/1s fails over in 7.4s", Target{MaxFailover: 7400 * time.Millisecond}, election.Timings{LeaseDuration: 3 * s, RenewDeadline: 2 * s, RetryPeriod: s}},
		{"10s", Target{MaxFailover: 10 * s, Followers: 2}, election.Timings{LeaseDuration: 5 * s, RenewDeadline: 4 * s, RetryPeriod: s}},
		{"2m, 4 attempts, v0.30", Target{MaxFailover: 2 * time.Minute, MinRenewAttempts: 4, Behaviour: election.LeaderOnlyUpdates}, election.Timings{}},
		{"90s, 1 follower", Target{MaxFailover: 90 * s, Followers: 1}, election.Timings{}},
	}
	for _, c := range cases {
		got, err := Best(c.target)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if c.want != (election.Timings{}) && got.Timings != c.want {
			t.Errorf("%s: Best = %s, want %s", c.name, got.Timings, c.want)
		}
		if !Meets(got.Timings, c.target) {
			t.Errorf("%s: Best = %s does not meet the target", c.name, got.Timings)
		}
		bf, ok := bruteForce(c.target, 130)
		if !ok || got.RequestsPerHour > bf+1e-9 {
			t.Errorf("%s: Best = %s at %.1f/h, beaten on the grid by %.1f/h", c.name, got.Timings, got.RequestsPerHour, bf)
		}
		for _, o := range Curve(got, c.target, 5) {
			if !Meets(o.Timings, c.target) {
				t.Errorf("%s: alternative %s does not meet the target", c.name, o.Timings)
			}
			if o.RequestsPerHour < got.RequestsPerHour-1e-9 {
				t.Errorf("%s: alternative %s is cheaper than the recommendation", c.name, o.Timings)
			}
			if o.WorstCaseFailover > got.WorstCaseFailover {
				t.Errorf("%s: alternative %s fails over slower than the recommendation", c.name, o.Timings)
			}
		}
	}
}

func TestUnreachable(t *testing.T) {
	_, err := Best(Target{MaxFailover: 7 * s})
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("7s: err = %v, want ErrUnreachable", err)
	}
	if _, ok := bruteForce(Target{MaxFailover: 7 * s}, 20); ok {
		t.Fatal("the brute force finds a triple below 7.4s")
	}
	if err := (Target{MaxFailover: time.Minute, MinRenewAttempts: 1}).Check(); err == nil {
		t.Fatal("1 renewal attempt accepted")
	}
}

// TestEveryRecommendationValidates is the property: for random targets,
// every triple Best and Curve return validates, meets the target, and is
// never beaten on retry period by a triple that meets it.
func TestEveryRecommendationValidates(t *testing.T) {
	rnd := kit.Rand(t, 1)
	for i := 0; i < 2000; i++ {
		target := Target{
			MaxFailover:      time.Duration(rnd.Int63n(int64(3 * time.Hour))),
			MinRenewAttempts: 2 + rnd.Intn(10),
			Followers:        rnd.Intn(5),
			Behaviour:        election.ClientGoBehaviour(rnd.Intn(2)),
		}
		best, err := Best(target)
		if errors.Is(err, ErrUnreachable) {
			if target.MaxFailover >= 8*s+time.Duration(target.MinRenewAttempts)*s*2 {
				t.Errorf("%+v: unreachable", target)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", target, err)
		}
		for _, o := range append([]Option{best}, Curve(best, target, 5)...) {
			if err := o.Timings.Validate(); err != nil {
				t.Fatalf("%+v: %s: %v", target, o.Timings, err)
			}
			if !Meets(o.Timings, target) {
				t.Fatalf("%+v: %s misses the target", target, o.Timings)
			}
		}
		// One second more of retry period cannot meet the target.
		r := best.Timings.RetryPeriod + s
		n := time.Duration(minAttempts(target))
		next := election.Timings{LeaseDuration: n*r + s, RenewDeadline: n * r, RetryPeriod: r}
		if Meets(next, target) {
			t.Fatalf("%+v: %s beats %s", target, next, best.Timings)
		}
	}
}

func TestInstallation(t *testing.T) {
	in := Installation{Clusters: 100, ControllerLocks: DefaultControllerLocks}
	got := in.RequestsPerHour(election.FleetDefaults, election.FleetDefaults, election.WranglerDefaults)
	if want := 105 * 720.0; got != want {
		t.Fatalf("100 clusters at Fleet's defaults: %v/h, want %v/h", got, want)
	}
	// Rancher's lock with 3 replicas at wrangler's 2s: the leader's get and
	// update every 2 s (3,600/h) and two followers' gets, each every 3.2 s
	// on average (client-go's jitter of 1.2: 1,125/h each), 5,850/h, the
	// number plan prints for it.
	in.RancherReplicas = 3
	want := 105*720.0 + election.CostOf(election.WranglerDefaults, 2, election.LeaderGetsAndUpdates).TotalRequestsPerHour()
	if got := in.RequestsPerHour(election.FleetDefaults, election.FleetDefaults, election.WranglerDefaults); got != want || want-105*720 != 5850 {
		t.Fatalf("with Rancher's lock: %v/h, want %v/h (Rancher's lock %v/h, want 5,850)", got, want, want-105*720)
	}
}
