package rancher

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"leasetune.io/leasetune/pkg/election"
)

// Runs is the triple Rancher's lock kube-system/cattle-controllers runs
// with the rancher container's env, at Rancher version v, and false where
// that Rancher reads no env (2.8.0-2.8.2, wrangler v1: hardcoded
// 45s/30s/2s; or an unknown version: ReadsElectionEnv). wrangler reads
// each name on its own, its default where the name is absent or empty
// (rancher/wrangler pkg/leader/leader.go computeConfig, the same at
// v2.1.2 and v3.3.1): a partial triple runs the defaults of the missing
// names. The last entry of a name wins.
func Runs(env []corev1.EnvVar, v Version) (election.Timings, bool) {
	if !v.Known || !v.AtLeast(2, 8, 3) {
		return election.WranglerDefaults, false
	}
	t := election.WranglerDefaults
	for _, f := range election.Fields {
		for _, e := range env {
			if e.Name != election.CattlePrefix.EnvName(f) || e.ValueFrom != nil || e.Value == "" {
				continue
			}
			if dur, err := time.ParseDuration(e.Value); err == nil {
				t = t.With(f, dur)
			}
		}
	}
	return t, true
}
