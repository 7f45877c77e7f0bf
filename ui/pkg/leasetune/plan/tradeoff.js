// The trade-off of a component's triple, computed in the browser: how
// many locks the installation has (from the ElectionStatus status), the
// curve of lock requests per hour against worst-case failover, and
// pkg/recommend Best's triple for a failover target (ported here; its
// answers are checked against the Go code's in golden.json).
import { goParseDuration, formatDuration, SECOND, HOUR } from '../validation/duration';
import { costOf, validate } from '../validation/validate';
import { timingsOf } from './registry';

const MIN_RENEW_ATTEMPTS = 2n;

/** DEFAULT_CONTROLLER_LOCKS is recommend.DefaultControllerLocks (Fleet v0.14's five locks). */
export const DEFAULT_CONTROLLER_LOCKS = 5;

/** DEFAULT_MAX_FAILOVER is the failover target the page starts with (about the worst case of Fleet's 30s/25s/10s, rounded up). */
export const DEFAULT_MAX_FAILOVER = '1m30s';

/**
 * locksOf counts component c's locks in the status: { count, followers,
 * estimated, reason } where reason is an l10n key's last part saying what
 * was counted. Fleet controllers: the Fleet processes (5 estimated when
 * none is there); fleet-agents: the fleet Clusters (1 estimated when
 * none); Rancher: its lock, one candidate per replica (3 replicas, Rancher
 * chart's default, estimated without a Deployment).
 */
export function locksOf(status, c) {
  if (c === 'fleet-controller') {
    const n = status?.fleet?.processes || 0;

    return n > 0 ? { count: n, followers: 0, reason: 'fleetProcesses' } : {
      count: DEFAULT_CONTROLLER_LOCKS, followers: 0, estimated: true, reason: 'fleetProcessesEstimated'
    };
  }
  if (c === 'fleet-agent') {
    const n = status?.agents?.clusters || 0;

    return n > 0 ? { count: n, followers: 0, reason: 'fleetClusters' } : {
      count: 1, followers: 0, estimated: true, reason: 'fleetClustersEstimated'
    };
  }
  if (status?.rancher?.present) {
    const replicas = Math.max(status.rancher.replicas || 0, 1);

    return { count: 1, followers: replicas - 1, reason: 'rancherReplicas' };
  }

  return {
    count: 1, followers: 2, estimated: true, reason: 'rancherReplicasEstimated'
  };
}

/** pointOf is one triple (BigInt ns) on the curve, for locks. */
export function pointOf(t, locks) {
  const c = costOf(t, locks.followers);

  return {
    triple:             { leaseDuration: formatDuration(t.leaseDuration), renewDeadline: formatDuration(t.renewDeadline), retryPeriod: formatDuration(t.retryPeriod) },
    retryPeriodSeconds: Number(t.retryPeriod) / 1e9,
    requestsPerHour:    locks.count * c.totalRequestsPerHour,
    failoverSeconds:    Number(c.worstCaseFailover) / 1e9,
    failover:           formatDuration(c.worstCaseFailover),
  };
}

function wholeSeconds(t) {
  return ['leaseDuration', 'renewDeadline', 'retryPeriod'].every((f) => t[f] % SECOND === 0n);
}

// meets is recommend.Meets (minimum renew attempts 2).
function meets(t, maxFailover) {
  return wholeSeconds(t) && t.renewDeadline >= MIN_RENEW_ATTEMPTS * t.retryPeriod &&
    costOf(t, 0).worstCaseFailover <= maxFailover && validate(t).length === 0;
}

// forRetry is recommend.forRetry: for retry period r, the triple with the
// longest renewDeadline the failover bound allows and the shortest lease
// for it (minimal: renewDeadline = 2r instead).
function forRetry(r, maxFailover, minimal) {
  let renew = MIN_RENEW_ATTEMPTS * r;

  if (!minimal) {
    const rest = maxFailover - costOf({ retryPeriod: r, leaseDuration: 0n }, 0).worstCaseFailover;
    // time.Duration.Truncate(time.Second): toward zero, to a multiple of 1s.
    let lease = rest - (rest % SECOND);

    if (lease > HOUR) {
      lease = HOUR;
    }
    if (lease - SECOND > renew) {
      renew = lease - SECOND;
    }
  }
  const t = { leaseDuration: renew + SECOND, renewDeadline: renew, retryPeriod: r };

  return { t, ok: meets(t, maxFailover) };
}

const MAX_INT64 = (1n << 63n) - 1n;

function tripleString(t) {
  return `leaseDuration=${ formatDuration(t.leaseDuration) } renewDeadline=${ formatDuration(t.renewDeadline) } retryPeriod=${ formatDuration(t.retryPeriod) }`;
}

/**
 * recommend is recommend.Best for a failover target (BigInt ns) and
 * followers, with election.Supported's costs: { timings, requestsPerHour } of the
 * fewest lock requests (the longest retry period in whole seconds) whose
 * worst-case failover stays within the target, with the longest
 * renewDeadline and for it the shortest lease; or { error } with Go's
 * message when no valid triple meets it.
 */
export function recommend(maxFailover, followers = 0) {
  if (maxFailover <= 0n) {
    return { error: `max failover ${ formatDuration(maxFailover) } must be positive` };
  }
  const maxRetry = HOUR / MIN_RENEW_ATTEMPTS;

  for (let r = maxRetry - (maxRetry % SECOND); r >= SECOND; r -= SECOND) {
    const { t, ok } = forRetry(r, maxFailover, false);

    if (ok) {
      return { timings: t, requestsPerHour: costOf(t, followers).totalRequestsPerHour };
    }
  }
  const { t: smallest } = forRetry(SECOND, MAX_INT64, true);

  return {
    error: `no valid triple meets the target: with ${ MIN_RENEW_ATTEMPTS } renewal attempts the shortest worst-case failover is ${ formatDuration(costOf(smallest, 0).worstCaseFailover) } (${ tripleString(smallest) }), above ${ formatDuration(maxFailover) }`
  };
}

/**
 * tradeoff is the page's trade-off for component c: { locks, curve: [point]
 * (for retry periods from 1s up, the valid triple with the shortest
 * failover: renewDeadline 2 × retryPeriod, leaseDuration 1s more), current
 * (the triple in effect, or null), maxFailover, recommended (a point) or
 * recommendError }. maxFailover is a duration as typed; an unusable one
 * gives recommendError and the curve alone.
 */
export function tradeoff(status, c, inEffect, maxFailover) {
  const locks = locksOf(status, c);
  const out = {
    locks, curve: [], current: null, maxFailover, recommended: null, recommendError: ''
  };
  let top = 60n * SECOND;
  const cur = timingsOf(inEffect);

  if (cur) {
    out.current = pointOf(cur, locks);
    top = cur.retryPeriod * 2n > top ? cur.retryPeriod * 2n : top;
  }
  const target = goParseDuration(maxFailover || '');

  if (target.error || target.ns <= 0n) {
    out.recommendError = 'badTarget';
  } else {
    out.maxFailover = formatDuration(target.ns);
    const best = recommend(target.ns, locks.followers);

    if (best.error) {
      out.recommendError = best.error;
    } else {
      out.recommended = pointOf(best.timings, locks);
      top = best.timings.retryPeriod * 2n > top ? best.timings.retryPeriod * 2n : top;
    }
  }
  const maxRetry = HOUR / MIN_RENEW_ATTEMPTS;

  if (top > maxRetry) {
    top = maxRetry;
  }
  let step = SECOND;
  const n = top / SECOND;

  if (n > 120n) {
    step = ((n + 119n) / 120n) * SECOND;
  }
  for (let r = SECOND; r <= top; r += step) {
    const t = { leaseDuration: 2n * r + SECOND, renewDeadline: 2n * r, retryPeriod: r };

    if (validate(t).length === 0) {
      out.curve.push(pointOf(t, locks));
    }
  }

  return out;
}
