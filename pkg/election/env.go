package election

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// EnvPrefix is the first part of the env var names a component reads its
// timings from: "<prefix>_ELECTION_LEASE_DURATION", "_RENEW_DEADLINE",
// "_RETRY_PERIOD".
type EnvPrefix string

const (
	// CattlePrefix gives CATTLE_ELECTION_*, read by wrangler v2.1.2+'s
	// pkg/leader and so by every wrangler process: fleet-controller,
	// gitjob, helmops, fleet-agent, cattle-cluster-agent.
	CattlePrefix EnvPrefix = "CATTLE"
	// FleetAgentPrefix gives FLEET_AGENT_ELECTION_*, read by Fleet v0.13+'s
	// fleet-agentmanagement to render the env of every downstream agent.
	FleetAgentPrefix EnvPrefix = "FLEET_AGENT"
)

// EnvName returns the env var name of field f, e.g.
// CattlePrefix.EnvName(RetryPeriod) is "CATTLE_ELECTION_RETRY_PERIOD".
func (p EnvPrefix) EnvName(f Field) string {
	return string(p) + "_ELECTION_" + f.envSuffix()
}

// EnvNames returns the three env var names in the fixed field order.
func (p EnvPrefix) EnvNames() [3]string {
	var names [3]string
	for i, f := range Fields {
		names[i] = p.EnvName(f)
	}
	return names
}

// Owns reports whether name is one of the prefix's three env var names.
func (p EnvPrefix) Owns(name string) bool {
	for _, n := range p.EnvNames() {
		if n == name {
			return true
		}
	}
	return false
}

// Env returns t as three env vars with literal values, in the fixed field
// order, each value formatted by FormatDuration so that time.ParseDuration
// reads it back exactly.
func (p EnvPrefix) Env(t Timings) []corev1.EnvVar {
	env := make([]corev1.EnvVar, len(Fields))
	for i, f := range Fields {
		env[i] = corev1.EnvVar{Name: p.EnvName(f), Value: FormatDuration(t.Get(f))}
	}
	return env
}

// ErrIncomplete is wrapped by FromEnv when only some of the three names are
// present.
var ErrIncomplete = errors.New("incomplete timing env")

// FromEnv reads the prefix's three entries from env. When a name occurs
// more than once the last one wins, as it does for a container's env.
//
// It returns found=false and no error when none of the three names is
// present. It returns an error, naming the env var and its value, when only
// some are present (wrapping ErrIncomplete), when an entry takes its value
// from a source (valueFrom) rather than a literal, or when a value does not
// parse (wrapping *ParseError). It does not validate the triple.
func (p EnvPrefix) FromEnv(env []corev1.EnvVar) (t Timings, found bool, err error) {
	seen := map[Field]*corev1.EnvVar{} // the last entry of each name
	for i := range env {
		e := &env[i]
		for _, f := range Fields {
			if e.Name == p.EnvName(f) {
				seen[f] = e
			}
		}
	}
	var missing []string
	var errs []error
	for _, f := range Fields {
		e := seen[f]
		if e == nil {
			missing = append(missing, p.EnvName(f))
			continue
		}
		found = true
		if e.ValueFrom != nil {
			errs = append(errs, fmt.Errorf("env %s takes its value from a source (valueFrom), not a literal duration", e.Name))
			continue
		}
		d, perr := ParseDuration(f, e.Value)
		if perr != nil {
			errs = append(errs, fmt.Errorf("env %s: %w", e.Name, perr))
			continue
		}
		t = t.With(f, d)
	}
	if !found {
		return Timings{}, false, nil
	}
	if len(missing) > 0 {
		errs = append([]error{fmt.Errorf("%w: %v missing", ErrIncomplete, missing)}, errs...)
	}
	return t, true, errors.Join(errs...)
}
