package election

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// JitterFactor is client-go's leaderelection.JitterFactor (1.2): followers
// wait between 1× and (1+JitterFactor)× the retry period between attempts,
// and NewLeaderElector requires renewDeadline > JitterFactor × retryPeriod.
const JitterFactor = 1.2

// MaxDuration is the largest value this project accepts for any field (1h).
// client-go has no upper bound; ours keeps a typo such as "10h" from leaving
// a component without a leader for hours after a crash.
const MaxDuration = time.Hour

// MinRetryPeriod is the shortest retryPeriod this project accepts (1s).
// client-go has no lower bound (NewLeaderElector takes 1ns); ours keeps a
// unit typo such as "10ms" for "10s" from multiplying the lock traffic this
// project exists to reduce: 2s already made the Fleet locks a third of all
// kube-apiserver requests in SURE-3805 (docs/design.md, "Why: the lock traffic"), and 10ms would
// be 200 times that. The shortest retry period any Kubernetes component
// ships by default is 2s (client-go's "core clients default", k8s.io/
// component-base RecommendedDefaultLeaderElectionConfiguration 15s/10s/2s
// for kube-controller-manager and kube-scheduler, wrangler's 45s/30s/2s);
// 1s is half of that, so no default anywhere is refused, and at 1s one lock
// still costs at most 7,200 leader and 2,250 follower requests an hour.
const MinRetryPeriod = time.Second

// MinRenewAttempts is the least number of renewal attempts renewDeadline
// must leave the leader (2): renewDeadline ≥ MinRenewAttempts ×
// retryPeriod. In client-go v0.28's LeaderElector.renew the leader tries
// at once and then every retryPeriod (wait.PollImmediateUntil, whose
// ticker starts after the first attempt) until renewDeadline has passed,
// so renewDeadline/retryPeriod is the number of attempts it gets before it
// gives up the lock and every controller of the component restarts.
// client-go's own rule (renewDeadline > 1.2 × retryPeriod) leaves the
// second attempt only 0.2 × retryPeriod: a first attempt slower than that
// (a kube-apiserver restart, a slow etcd) and the leader has no second
// one. With 2, a first attempt may take a whole retryPeriod and a second
// still starts before the deadline. Not more: Fleet's own defaults
// 30s/25s/10s (its chart since v0.10, hardcoded in v0.12 agents, and this
// project's defaults) leave 2.5 attempts, and 3 would refuse them;
// wrangler's 45s/30s/2s leave 15. Beyond two, more attempts cost traffic or
// failover time, which is the users' trade-off to make.
const MinRenewAttempts = 2

// Floor returns the smallest value field f has in any valid triple: 1s
// for retryPeriod (MinRetryPeriod), 2s for renewDeadline (MinRenewAttempts
// × MinRetryPeriod), 3s for leaseDuration (above renewDeadline, in whole
// seconds). The smallest valid triple is 3s/2s/1s.
func Floor(f Field) time.Duration {
	renew := MinRenewAttempts * MinRetryPeriod
	switch f {
	case RetryPeriod:
		return MinRetryPeriod
	case RenewDeadline:
		return renew
	case LeaseDuration:
		return renew.Truncate(time.Second) + time.Second
	}
	panic(fmt.Sprintf("election: unknown field %q", string(f)))
}

// Rule identifies one validation rule. Its value is stable and suitable for
// metrics labels and Event reasons.
type Rule string

const (
	// RulePositive: every field must be greater than zero.
	// Source: client-go v0.28 leaderelection.NewLeaderElector.
	RulePositive Rule = "Positive"
	// RuleLeaseExceedsRenew: leaseDuration must be greater than renewDeadline.
	// Source: client-go v0.28 leaderelection.NewLeaderElector.
	RuleLeaseExceedsRenew Rule = "LeaseDurationExceedsRenewDeadline"
	// RuleRenewExceedsJitteredRetry: renewDeadline must be greater than
	// time.Duration(JitterFactor × float64(retryPeriod)), computed exactly so.
	// Source: client-go v0.28 leaderelection.NewLeaderElector.
	RuleRenewExceedsJitteredRetry Rule = "RenewDeadlineExceedsJitteredRetryPeriod"
	// RuleLeaseWholeSeconds: leaseDuration must be a whole number of
	// seconds. This project's rule: the lock record stores
	// leaseDurationSeconds as an integer and client-go truncates, so a
	// fraction would silently be lost (resourcelock.LeaderElectionRecord).
	RuleLeaseWholeSeconds Rule = "LeaseDurationWholeSeconds"
	// RuleLeaseAtLeastOneSecond: leaseDuration must be at least 1s, or the
	// lock record would store 0 seconds. This project's rule; checked only
	// when leaseDuration is positive (else RulePositive already applies).
	RuleLeaseAtLeastOneSecond Rule = "LeaseDurationAtLeastOneSecond"
	// RuleRetryAtLeastMin: retryPeriod must be at least MinRetryPeriod
	// (1s). This project's rule; checked only when retryPeriod is positive.
	RuleRetryAtLeastMin Rule = "RetryPeriodAtLeastOneSecond"
	// RuleRenewAllowsTwoAttempts: renewDeadline must be at least
	// MinRenewAttempts (2) × retryPeriod, so the leader gets a second
	// renewal attempt. This project's rule; checked only when both are
	// positive (else RulePositive already applies).
	RuleRenewAllowsTwoAttempts Rule = "RenewDeadlineAllowsTwoAttempts"
	// RuleAtMostMax: every field must be at most MaxDuration (1h). This
	// project's rule.
	RuleAtMostMax Rule = "AtMostOneHour"
)

// Violation is one broken rule, with a message that names the fields and
// their values.
type Violation struct {
	// Rule is the rule broken.
	Rule Rule
	// Fields are the fields the rule relates, in the fixed field order.
	Fields []Field
	// Message explains the violation with the numbers, e.g.
	// "renewDeadline 10s must exceed 1.2 × retryPeriod 10s = 12s".
	Message string
}

// ValidationError is returned by Timings.Validate and lists every rule the
// triple breaks, in a fixed order.
type ValidationError struct {
	// Timings is the triple that was refused.
	Timings Timings
	// Violations lists each broken rule, once per field it applies to (a
	// triple of three zeros breaks RulePositive three times); never empty.
	Violations []Violation
}

// Error joins the violation messages with "; " after the triple, e.g.
// "invalid leader-election timings leaseDuration=30s renewDeadline=10s
// retryPeriod=10s: renewDeadline 10s must exceed 1.2 × retryPeriod 10s = 12s".
func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		msgs[i] = v.Message
	}
	return fmt.Sprintf("invalid leader-election timings %s: %s", e.Timings, strings.Join(msgs, "; "))
}

// jitteredRetry returns client-go's time.Duration(JitterFactor ×
// float64(retry)), the exact product ⌊6·retry/5⌋ when it fits in a
// Duration, and whether the exact product overflows a Duration.
func jitteredRetry(retry time.Duration) (clientGo, exact time.Duration, overflow bool) {
	clientGo = time.Duration(JitterFactor * float64(retry))
	p := new(big.Int).Mul(big.NewInt(int64(retry)), big.NewInt(6))
	p.Div(p, big.NewInt(5)) // truncates toward zero, as the float conversion does
	if !p.IsInt64() {
		return clientGo, 0, true
	}
	return clientGo, time.Duration(p.Int64()), false
}

// Has reports whether rule r is among the violations.
func (e *ValidationError) Has(r Rule) bool {
	for _, v := range e.Violations {
		if v.Rule == r {
			return true
		}
	}
	return false
}

// Validate checks t against the rules of client-go v0.28's
// leaderelection.NewLeaderElector (every field > 0; leaseDuration >
// renewDeadline; renewDeadline > JitterFactor × retryPeriod) and this
// project's own (leaseDuration a whole number of seconds and at least 1s;
// retryPeriod at least MinRetryPeriod; renewDeadline at least
// MinRenewAttempts × retryPeriod; every field at most MaxDuration). It returns nil, or a *ValidationError
// listing every rule broken. Whatever Validate accepts, NewLeaderElector
// accepts too.
func (t Timings) Validate() error {
	var vs []Violation
	add := func(r Rule, msg string, fields ...Field) {
		vs = append(vs, Violation{Rule: r, Fields: fields, Message: msg})
	}
	f := FormatDuration

	for _, fl := range Fields {
		if d := t.Get(fl); d <= 0 {
			add(RulePositive, fmt.Sprintf("%s %s must be greater than 0", fl, f(d)), fl)
		}
	}
	if t.LeaseDuration <= t.RenewDeadline {
		add(RuleLeaseExceedsRenew, fmt.Sprintf("%s %s must exceed %s %s",
			LeaseDuration, f(t.LeaseDuration), RenewDeadline, f(t.RenewDeadline)), LeaseDuration, RenewDeadline)
	}
	// client-go's own expression decides, float rounding included; the
	// exact product also catches a retry period so large that the float
	// conversion overflows (client-go then accepts, but our 1h bound
	// refuses the triple anyway, and the rule must still be listed).
	if jittered, exact, overflow := jitteredRetry(t.RetryPeriod); t.RenewDeadline <= jittered || (overflow && t.RenewDeadline > 0) || t.RenewDeadline <= exact {
		shown := f(exact)
		if overflow {
			shown = "more than " + f(math.MaxInt64)
		}
		add(RuleRenewExceedsJitteredRetry, fmt.Sprintf("%s %s must exceed %v × %s %s = %s",
			RenewDeadline, f(t.RenewDeadline), JitterFactor, RetryPeriod, f(t.RetryPeriod), shown), RenewDeadline, RetryPeriod)
	}
	if t.LeaseDuration > 0 && t.LeaseDuration < time.Second {
		add(RuleLeaseAtLeastOneSecond, fmt.Sprintf("%s %s must be at least 1s", LeaseDuration, f(t.LeaseDuration)), LeaseDuration)
	}
	if t.LeaseDuration%time.Second != 0 {
		add(RuleLeaseWholeSeconds, fmt.Sprintf("%s %s must be a whole number of seconds", LeaseDuration, f(t.LeaseDuration)), LeaseDuration)
	}
	if t.RetryPeriod > 0 && t.RetryPeriod < MinRetryPeriod {
		add(RuleRetryAtLeastMin, fmt.Sprintf("%s %s must be at least %s", RetryPeriod, f(t.RetryPeriod), f(MinRetryPeriod)), RetryPeriod)
	}
	if t.RenewDeadline > 0 && t.RetryPeriod > 0 {
		// renew ≥ n × retry, without overflow: ⌊renew/n⌋ ≥ retry.
		if t.RenewDeadline/MinRenewAttempts < t.RetryPeriod {
			shown := "more than " + f(math.MaxInt64)
			if t.RetryPeriod <= math.MaxInt64/MinRenewAttempts {
				shown = f(MinRenewAttempts * t.RetryPeriod)
			}
			add(RuleRenewAllowsTwoAttempts, fmt.Sprintf("%s %s must be at least %d × %s %s = %s, so the leader gets a second renewal attempt",
				RenewDeadline, f(t.RenewDeadline), MinRenewAttempts, RetryPeriod, f(t.RetryPeriod), shown), RenewDeadline, RetryPeriod)
		}
	}
	for _, fl := range Fields {
		if d := t.Get(fl); d > MaxDuration {
			add(RuleAtMostMax, fmt.Sprintf("%s %s must be at most %s", fl, f(d), f(MaxDuration)), fl)
		}
	}
	if len(vs) == 0 {
		return nil
	}
	return &ValidationError{Timings: t, Violations: vs}
}
