package election

import (
	"math"
	"time"
)

// ClientGoBehaviour selects how the leader renews its lock, which changed in
// client-go v0.30.
type ClientGoBehaviour int

const (
	// LeaderGetsAndUpdates is client-go before v0.30 (this project's v0.28,
	// wrangler v2, Fleet up to v0.12): tryAcquireOrRenew reads the lock and
	// then updates it at every renewal, 2 requests per retry period.
	LeaderGetsAndUpdates ClientGoBehaviour = iota
	// LeaderOnlyUpdates is client-go v0.30 and later: while the leader holds
	// a valid lease it updates the lock without reading it first, 1 request
	// per retry period.
	LeaderOnlyUpdates
)

// Supported is how the leaders of every Rancher and Fleet leasetune
// supports renew their locks: Fleet v0.10.0 builds with client-go v0.30.2
// and Rancher v2.9.0 (and its cattle-cluster-agent) with v0.30.1 (go.mod
// at each tag; Fleet v0.9 and Rancher v2.8 used v0.28). plan, recommend,
// the ElectionStatus and the page count their locks with it; the lock
// traffic measured beside Fleet v0.13–v0.16 and Rancher v2.12–v2.15 is
// one request per retry period from the leader (docs/upstream.md).
const Supported = LeaderOnlyUpdates

// String names the behaviour for output.
func (b ClientGoBehaviour) String() string {
	if b == LeaderOnlyUpdates {
		return "client-go v0.30+ (leader updates only)"
	}
	return "client-go < v0.30 (leader gets and updates)"
}

// leaderRequestsPerRenewal is the number of API requests the leader makes
// per retry period.
func (b ClientGoBehaviour) leaderRequestsPerRenewal() float64 {
	if b == LeaderOnlyUpdates {
		return 1
	}
	return 2
}

// MeanFollowerWaitFactor is the mean follower wait between two acquisition
// attempts, in retry periods: wait.JitterUntil(…, retryPeriod, JitterFactor,
// …) in client-go's LeaderElector.acquire waits retryPeriod × (1 + r ×
// JitterFactor) with r uniform in [0,1), so 1× to 2.2×, 1.6× on average.
const MeanFollowerWaitFactor = 1 + JitterFactor/2

// MaxFollowerWaitFactor is the longest follower wait between two
// acquisition attempts, in retry periods: 1 + JitterFactor = 2.2.
const MaxFollowerWaitFactor = 1 + JitterFactor

// Cost is the expected API cost and the failover bound of one lock.
type Cost struct {
	// LeaderRequestsPerHour is the leader's lock requests per hour.
	LeaderRequestsPerHour float64
	// FollowerRequestsPerHour is the lock requests per hour of all
	// followers together.
	FollowerRequestsPerHour float64
	// WorstCaseFailover bounds the time from the leader's death (without
	// releasing the lock) until a follower holds it.
	WorstCaseFailover time.Duration
}

// TotalRequestsPerHour is the lock requests per hour of leader and
// followers together.
func (c Cost) TotalRequestsPerHour() float64 {
	return c.LeaderRequestsPerHour + c.FollowerRequestsPerHour
}

// CostOf computes the expected lock requests per hour for one lock with one
// leader and the given number of followers, and the worst-case failover
// time, for a validated triple t (the result is meaningless otherwise).
//
// Requests per hour, with h = 1h / retryPeriod:
//
//   - leader: h × 2 with LeaderGetsAndUpdates, h × 1 with LeaderOnlyUpdates.
//     LeaderElector.renew runs tryAcquireOrRenew once per retryPeriod
//     (wait.Until then wait.PollImmediateUntil, both at retryPeriod); before
//     client-go v0.30 that is Lock.Get followed by Lock.Update.
//   - each follower: h / MeanFollowerWaitFactor (h / 1.6). LeaderElector.acquire
//     runs tryAcquireOrRenew, whose Lock.Get finds an unexpired lease held by
//     another and returns, once per wait.JitterUntil period.
//
// Worst-case failover is leaseDuration + 2 × MaxFollowerWaitFactor × retryPeriod
// (leaseDuration + 4.4 × retryPeriod): a follower measures expiry from the
// moment it observed the last renewal (LeaderElector.observedTime), which it
// sees up to one maximal jittered wait (2.2 × retryPeriod) after the renewal
// happened, and after expiry its next poll may come up to another 2.2 ×
// retryPeriod later. Request latency is not included.
//
// Measured on kube-apiserver 1.32 with client-go v0.28 (docs/check.md):
// 45s/30s/2s made 4,715 requests per hour against 4,725 here; 30s/25s/10s
// made 950 against 945.
func CostOf(t Timings, followers int, b ClientGoBehaviour) Cost {
	perHour := float64(time.Hour) / float64(t.RetryPeriod)
	return Cost{
		LeaderRequestsPerHour:   perHour * b.leaderRequestsPerRenewal(),
		FollowerRequestsPerHour: float64(followers) * perHour / MeanFollowerWaitFactor,
		WorstCaseFailover:       t.LeaseDuration + time.Duration(math.Round(2*MaxFollowerWaitFactor*float64(t.RetryPeriod))),
	}
}
