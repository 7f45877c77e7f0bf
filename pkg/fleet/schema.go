package fleet

import (
	"fmt"
	"regexp"
)

// ChartDurationPattern is the pattern Fleet's chart checks every
// leaderElection.* and agent.leaderElection.* value against from v0.16 on
// (rancher/fleet v0.16.1 charts/fleet/values.schema.json, definitions
// goDuration: a string matching it, or the integer 0). Rancher merges
// rancher-config's fleet values into that chart's values, so a value that
// fails it makes Rancher's install or upgrade of Fleet fail.
const ChartDurationPattern = `^(0|([0-9]+([.][0-9]+)?(ns|us|µs|ms|s|m|h))+)$`

var chartDuration = regexp.MustCompile(ChartDurationPattern)

// ChartDurationError says why v, a value of key (e.g.
// "agent.leaderElection.retryPeriod") as YAML decodes it, fails Fleet
// v0.16's values schema; nil when it passes. A null value is absent.
func ChartDurationError(key string, v interface{}) error {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		if chartDuration.MatchString(x) {
			return nil
		}
	case int:
		if x == 0 {
			return nil
		}
	}
	return fmt.Errorf("%s: %#v is not what Fleet v0.16's chart accepts (values.schema.json goDuration: a string matching %s, or the integer 0); Rancher's install or upgrade of Fleet v0.16 fails on it", key, v, ChartDurationPattern)
}
