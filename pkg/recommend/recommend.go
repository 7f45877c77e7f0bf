// Package recommend chooses leader-election timing triples for a target:
// the valid triple with the fewest lock requests per hour whose
// worst-case failover stays within a bound and whose renewDeadline leaves
// the leader enough renewal attempts, the trade-off curve around it, and
// what an installation's locks cost with one triple or another.
//
// Every triple it returns passes election.Timings.Validate. It uses
// pkg/election's cost model and performs no I/O (InEffect computes from an
// installation pkg/inventory has read), so the CLI (`leasetune recommend`,
// `leasetune audit`) and a UI compute the same.
package recommend

import (
	"errors"
	"fmt"
	"math"
	"time"

	"leasetune.io/leasetune/pkg/election"
)

// Target is what a recommendation must meet.
type Target struct {
	// MaxFailover bounds the worst-case failover (leaseDuration + 4.4 ×
	// retryPeriod, election.CostOf).
	MaxFailover time.Duration
	// MinRenewAttempts is the least renewDeadline / retryPeriod; at least
	// election.MinRenewAttempts (0 means that).
	MinRenewAttempts int
	// Followers and Behaviour are what the costs are computed for (they
	// change the numbers, not the choice: every term of the cost falls
	// with the retry period).
	Followers int
	Behaviour election.ClientGoBehaviour
}

// Option is one triple with what it costs and what it buys.
type Option struct {
	Timings election.Timings
	// RequestsPerHour is the lock requests per hour of one lock (leader
	// and Target.Followers).
	RequestsPerHour float64
	// WorstCaseFailover is election.CostOf's bound.
	WorstCaseFailover time.Duration
	// RenewAttempts and SurvivableStall are election.RenewAttempts and
	// election.SurvivableStall.
	RenewAttempts   float64
	SurvivableStall time.Duration
}

// OptionOf describes t for the target's followers and behaviour.
func OptionOf(t election.Timings, target Target) Option {
	c := election.CostOf(t, target.Followers, target.Behaviour)
	return Option{Timings: t, RequestsPerHour: c.TotalRequestsPerHour(), WorstCaseFailover: c.WorstCaseFailover,
		RenewAttempts: election.RenewAttempts(t), SurvivableStall: election.SurvivableStall(t)}
}

// ErrUnreachable is wrapped when no valid triple meets the target.
var ErrUnreachable = errors.New("no valid triple meets the target")

// Meets reports whether t is valid, in whole seconds, and meets the
// target.
func Meets(t election.Timings, target Target) bool {
	n := minAttempts(target)
	return wholeSeconds(t) && t.RenewDeadline >= time.Duration(n)*t.RetryPeriod &&
		election.CostOf(t, 0, target.Behaviour).WorstCaseFailover <= target.MaxFailover &&
		t.Validate() == nil
}

func wholeSeconds(t election.Timings) bool {
	for _, f := range election.Fields {
		if t.Get(f)%time.Second != 0 {
			return false
		}
	}
	return true
}

func minAttempts(target Target) int {
	if target.MinRenewAttempts < election.MinRenewAttempts {
		return election.MinRenewAttempts
	}
	return target.MinRenewAttempts
}

// Check returns an error when the target itself is unusable.
func (target Target) Check() error {
	if target.MinRenewAttempts != 0 && target.MinRenewAttempts < election.MinRenewAttempts {
		return fmt.Errorf("min renew attempts %d: at least %d (renewDeadline ≥ %d × retryPeriod is a rule of every valid triple)",
			target.MinRenewAttempts, election.MinRenewAttempts, election.MinRenewAttempts)
	}
	if target.Followers < 0 {
		return fmt.Errorf("followers %d must not be negative", target.Followers)
	}
	if target.MaxFailover <= 0 {
		return fmt.Errorf("max failover %s must be positive", election.FormatDuration(target.MaxFailover))
	}
	return nil
}

// forRetry returns, for a retry period r (whole seconds), the valid
// triple that meets the target with the longest renewDeadline (so the
// leader survives the longest stall) and, for that, the shortest lease
// (renewDeadline + 1s), and whether there is one. With minimal it instead
// returns the triple with the shortest failover: renewDeadline = N × r.
func forRetry(r time.Duration, target Target, minimal bool) (election.Timings, bool) {
	n := time.Duration(minAttempts(target))
	renew := n * r
	if !minimal {
		// The longest lease the failover bound allows, in whole seconds.
		rest := target.MaxFailover - election.CostOf(election.Timings{RetryPeriod: r, LeaseDuration: 0}, 0, target.Behaviour).WorstCaseFailover
		lease := rest.Truncate(time.Second)
		if lease > election.MaxDuration {
			lease = election.MaxDuration
		}
		if lease-time.Second > renew {
			renew = lease - time.Second
		}
	}
	t := election.Timings{LeaseDuration: renew + time.Second, RenewDeadline: renew, RetryPeriod: r}
	return t, Meets(t, target)
}

// Best returns the recommended triple: the fewest requests per hour (the
// longest retry period in whole seconds) that meets the target; of the
// triples with that retry period, the one with the longest renewDeadline
// (the longest apiserver stall survived), and for it the shortest lease.
// It returns an error wrapping ErrUnreachable when even the smallest
// valid triple fails the target.
func Best(target Target) (Option, error) {
	if err := target.Check(); err != nil {
		return Option{}, err
	}
	// The failover grows with the retry period; search it from the top.
	maxRetry := election.MaxDuration / time.Duration(minAttempts(target))
	for r := maxRetry.Truncate(time.Second); r >= election.MinRetryPeriod; r -= time.Second {
		if t, ok := forRetry(r, target, false); ok {
			return OptionOf(t, target), nil
		}
	}
	smallest, _ := forRetry(election.MinRetryPeriod, Target{MaxFailover: math.MaxInt64, MinRenewAttempts: target.MinRenewAttempts}, true)
	return Option{}, fmt.Errorf("%w: with %d renewal attempts the shortest worst-case failover is %s (%s), above %s",
		ErrUnreachable, minAttempts(target), election.FormatDuration(election.CostOf(smallest, 0, target.Behaviour).WorstCaseFailover),
		smallest, election.FormatDuration(target.MaxFailover))
}

// Curve returns the trade-off curve below the recommendation: for up to n
// retry periods shorter than best's, spread from just below it down to
// 1s, the triple with the shortest failover for that retry period
// (renewDeadline = N × retryPeriod, leaseDuration 1s more), fewest
// requests first. Each meets the target. The triple with the shortest
// failover at best's own retry period comes first when it differs from
// best.
func Curve(best Option, target Target, n int) []Option {
	var out []Option
	if t, ok := forRetry(best.Timings.RetryPeriod, target, true); ok && t != best.Timings {
		out = append(out, OptionOf(t, target))
	}
	top := int(best.Timings.RetryPeriod / time.Second)
	seen := map[int]bool{top: true}
	for i := 1; i <= n; i++ {
		// Evenly spaced between top-1 and 1.
		r := top - 1
		if n > 1 {
			r = top - 1 - (i-1)*(top-2)/(n-1)
		}
		if r < 1 || seen[r] {
			continue
		}
		seen[r] = true
		if t, ok := forRetry(time.Duration(r)*time.Second, target, true); ok {
			out = append(out, OptionOf(t, target))
		}
	}
	return out
}

// Installation is what an installation's locks are: Clusters fleet-agent
// locks (one per downstream cluster) and ControllerLocks Fleet
// controller locks, each with Followers followers, and, when
// RancherReplicas > 0, Rancher's own cattle-controllers lock, whose
// candidates are the Rancher replicas (1 leader, RancherReplicas-1
// followers).
type Installation struct {
	Clusters, ControllerLocks, Followers int
	RancherReplicas                      int
	Behaviour                            election.ClientGoBehaviour
}

// DefaultControllerLocks is the number of Fleet controller locks of a
// Fleet v0.14 installation: fleet-controller-leader-election-shard,
// fleet-agentmanagement-lock, fleet-cleanup-lock,
// fleet-gitops-leader-election-shard, fleet-helmops-leader-election-shard
// (see pkg/audit's list of managed locks).
const DefaultControllerLocks = 5

// RequestsPerHour returns the installation's lock requests per hour with
// the controller triple on the Fleet controllers, the agent triple on
// every fleet-agent and the rancher triple on Rancher's lock (counted
// only when RancherReplicas > 0).
func (in Installation) RequestsPerHour(controller, agent, rancher election.Timings) float64 {
	c := election.CostOf(controller, in.Followers, in.Behaviour).TotalRequestsPerHour()
	a := election.CostOf(agent, in.Followers, in.Behaviour).TotalRequestsPerHour()
	total := float64(in.ControllerLocks)*c + float64(in.Clusters)*a
	if in.RancherReplicas > 0 {
		total += election.CostOf(rancher, in.RancherReplicas-1, in.Behaviour).TotalRequestsPerHour()
	}
	return total
}
