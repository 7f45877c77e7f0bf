package kit

import (
	"fmt"

	"leasetune.io/leasetune/pkg/election"
)

// Timings is the triple the three durations name (lease duration, renew
// deadline, retry period, as election.Parse reads them). It panics when
// they do not parse or the triple does not validate: a test's own typo.
// (kit imports pkg/election, so pkg/election's own tests cannot use kit.)
func Timings(leaseDuration, renewDeadline, retryPeriod string) election.Timings {
	t, err := election.Parse(leaseDuration, renewDeadline, retryPeriod)
	if err != nil {
		panic(fmt.Sprintf("kit.Timings(%q, %q, %q): %v", leaseDuration, renewDeadline, retryPeriod, err))
	}
	if err := t.Validate(); err != nil {
		panic(fmt.Sprintf("kit.Timings(%q, %q, %q): %v", leaseDuration, renewDeadline, retryPeriod, err))
	}
	return t
}
