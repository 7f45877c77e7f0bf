package fleet

import (
	"strings"
	"testing"
)

// TestChartDurationError: Fleet v0.16's goDuration accepts what its
// pattern matches and the integer 0; time.ParseDuration accepts more
// (a sign, a leading dot, a space-free "1.5h" is in both), and YAML
// decodes a bare number as an int.
func TestChartDurationError(t *testing.T) {
	for v, ok := range map[interface{}]bool{
		"30s": true, "1m30s": true, "1.5s": true, "500ms": true, "2µs": true, "10us": true, "1h0m0s": true, "0": true, 0: true, nil: true,
		"+30s": false, "-5s": false, ".5s": false, "5.s": false, "30": false, "30S": false, "1d": false, "30 s": false, "": false,
		30: false, 1.5: false, true: false,
	} {
		err := ChartDurationError("agent.leaderElection.retryPeriod", v)
		if (err == nil) != ok {
			t.Errorf("%#v: %v, want accepted %v", v, err, ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "agent.leaderElection.retryPeriod") || !strings.Contains(err.Error(), ChartDurationPattern)) {
			t.Errorf("%#v: the error does not name the key and the pattern: %v", v, err)
		}
	}
}
