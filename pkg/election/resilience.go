package election

import "time"

// RenewAttempts returns how many renewal attempts a leader gets before it
// gives up the lock: renewDeadline / retryPeriod. In client-go v0.28's
// LeaderElector.renew the leader tries at once and then every retryPeriod
// (wait.PollImmediateUntil) until renewDeadline has passed (see
// MinRenewAttempts). For a validated triple (0 otherwise).
func RenewAttempts(t Timings) float64 {
	if t.RetryPeriod <= 0 {
		return 0
	}
	return float64(t.RenewDeadline) / float64(t.RetryPeriod)
}

// SurvivableStall returns the longest kube-apiserver stall a leader
// survives without giving up the lock, whenever the stall begins:
// renewDeadline. Each renewal round (LeaderElector.renew: wait.Until, one
// retryPeriod after the last success) gets a context with the
// renewDeadline timeout; a stall that begins as a round begins leaves the
// leader exactly that long.
func SurvivableStall(t Timings) time.Duration {
	return t.RenewDeadline
}
