//go:build !unix

package audit

import "time"

// cpuTime is not measured here.
func cpuTime(bool) time.Duration { return 0 }
