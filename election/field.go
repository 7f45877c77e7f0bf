package election

// Field names one member of the timing triple. Its string value is the
// field's name in client-go's LeaderElectionConfig, in lower camel case, and
// is what error messages show.
type Field string

const (
	// LeaseDuration is client-go's LeaderElectionConfig.LeaseDuration.
	LeaseDuration Field = "leaseDuration"
	// RenewDeadline is client-go's LeaderElectionConfig.RenewDeadline.
	RenewDeadline Field = "renewDeadline"
	// RetryPeriod is client-go's LeaderElectionConfig.RetryPeriod.
	RetryPeriod Field = "retryPeriod"
)

// Fields lists the three fields in their fixed order: leaseDuration,
// renewDeadline, retryPeriod. Every list this package produces follows it.
var Fields = [3]Field{LeaseDuration, RenewDeadline, RetryPeriod}

// envSuffix is the part of the env var name after "<PREFIX>_ELECTION_".
func (f Field) envSuffix() string {
	switch f {
	case LeaseDuration:
		return "LEASE_DURATION"
	case RenewDeadline:
		return "RENEW_DEADLINE"
	case RetryPeriod:
		return "RETRY_PERIOD"
	}
	return ""
}
