// Package election models a leader-election timing triple (leaseDuration,
// renewDeadline, retryPeriod) as Rancher, wrangler and Fleet use it.
//
// It provides:
//   - Timings, the triple, with the named values Fleet and wrangler ship
//     (FleetDefaults, WranglerDefaults);
//   - Parse and ParseDuration, which read the strings found in env vars and
//     Rancher settings with time.ParseDuration, the parser wrangler and Fleet use;
//   - Timings.Validate, which accepts exactly what client-go v0.28's
//     leaderelection.NewLeaderElector accepts, narrowed by this project's own
//     rules (whole-second lease of at least 1s; retryPeriod at least 1s and
//     renewDeadline at least 2 × retryPeriod, MinRetryPeriod and
//     MinRenewAttempts; every value at most 1h);
//   - EnvPrefix and the conversions to and from []corev1.EnvVar
//     (CATTLE_ELECTION_*, FLEET_AGENT_ELECTION_*);
//   - a cost model: lock requests per hour and worst-case failover time.
//
// It performs no I/O and holds no state; every function is safe for
// concurrent use.
package election
