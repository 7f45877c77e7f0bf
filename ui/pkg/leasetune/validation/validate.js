// The rules of a timing triple exactly as the server checks them: a port
// of leasetune's pkg/election Timings.Validate (client-go v0.28's
// NewLeaderElector rules and leasetune's own), with the same messages, and
// of election.CostOf. golden.json holds the Go code's answers for every
// case; validation.test.js checks them, so the page and the webhook say
// the same thing.

import { parseDuration, formatDuration, SECOND, HOUR } from './duration';

export const FIELDS = ['leaseDuration', 'renewDeadline', 'retryPeriod'];

// pkg/election/validate.go
export const JITTER_FACTOR = 1.2;
export const MAX_DURATION = HOUR;
export const MIN_RETRY_PERIOD = SECOND;
export const MIN_RENEW_ATTEMPTS = 2n;

const MAX_INT64 = (1n << 63n) - 1n;
const MIN_INT64 = -(1n << 63n);

// goFloatToInt64 is time.Duration(x) of a float64 on amd64: truncation,
// and the "integer indefinite" MinInt64 when x is out of range.
function goFloatToInt64(x) {
  if (!Number.isFinite(x) || x >= 2 ** 63 || x < -(2 ** 63)) {
    return MIN_INT64;
  }

  return BigInt(Math.trunc(x));
}

// floorDiv is big.Int's Euclidean division by a positive divisor.
function floorDiv(a, b) {
  const q = a / b;

  return (a % b !== 0n && a < 0n) ? q - 1n : q;
}

// jitteredRetry is election.jitteredRetry: client-go's
// time.Duration(JitterFactor × float64(retry)), the exact ⌊6·retry/5⌋,
// and whether that overflows an int64.
function jitteredRetry(retry) {
  const clientGo = goFloatToInt64(JITTER_FACTOR * Number(retry));
  const exact = floorDiv(retry * 6n, 5n);

  if (exact > MAX_INT64 || exact < MIN_INT64) {
    return { clientGo, exact: 0n, overflow: true };
  }

  return { clientGo, exact, overflow: false };
}

/**
 * validate is Timings.Validate of { leaseDuration, renewDeadline,
 * retryPeriod } (BigInt nanoseconds): an array of violations
 * { rule, fields, message } in the server's order, empty when valid.
 */
export function validate(t) {
  const vs = [];
  const add = (rule, message, ...fields) => vs.push({ rule, fields, message });
  const f = formatDuration;
  const lease = t.leaseDuration;
  const renew = t.renewDeadline;
  const retry = t.retryPeriod;

  for (const fl of FIELDS) {
    if (t[fl] <= 0n) {
      add('Positive', `${ fl } ${ f(t[fl]) } must be greater than 0`, fl);
    }
  }
  if (lease <= renew) {
    add('LeaseDurationExceedsRenewDeadline', `leaseDuration ${ f(lease) } must exceed renewDeadline ${ f(renew) }`, 'leaseDuration', 'renewDeadline');
  }
  const { clientGo, exact, overflow } = jitteredRetry(retry);

  if (renew <= clientGo || (overflow && renew > 0n) || renew <= exact) {
    const shown = overflow ? `more than ${ f(MAX_INT64) }` : f(exact);

    add('RenewDeadlineExceedsJitteredRetryPeriod',
      `renewDeadline ${ f(renew) } must exceed ${ JITTER_FACTOR } × retryPeriod ${ f(retry) } = ${ shown }`, 'renewDeadline', 'retryPeriod');
  }
  if (lease > 0n && lease < SECOND) {
    add('LeaseDurationAtLeastOneSecond', `leaseDuration ${ f(lease) } must be at least 1s`, 'leaseDuration');
  }
  if (lease % SECOND !== 0n) {
    add('LeaseDurationWholeSeconds', `leaseDuration ${ f(lease) } must be a whole number of seconds`, 'leaseDuration');
  }
  if (retry > 0n && retry < MIN_RETRY_PERIOD) {
    add('RetryPeriodAtLeastOneSecond', `retryPeriod ${ f(retry) } must be at least ${ f(MIN_RETRY_PERIOD) }`, 'retryPeriod');
  }
  if (renew > 0n && retry > 0n && renew / MIN_RENEW_ATTEMPTS < retry) {
    const shown = retry <= MAX_INT64 / MIN_RENEW_ATTEMPTS ? f(MIN_RENEW_ATTEMPTS * retry) : `more than ${ f(MAX_INT64) }`;

    add('RenewDeadlineAllowsTwoAttempts',
      `renewDeadline ${ f(renew) } must be at least ${ MIN_RENEW_ATTEMPTS } × retryPeriod ${ f(retry) } = ${ shown }, so the leader gets a second renewal attempt`,
      'renewDeadline', 'retryPeriod');
  }
  for (const fl of FIELDS) {
    if (t[fl] > MAX_DURATION) {
      add('AtMostOneHour', `${ fl } ${ f(t[fl]) } must be at most ${ f(MAX_DURATION) }`, fl);
    }
  }

  return vs;
}

/**
 * tripleString is Timings.String: "leaseDuration=30s renewDeadline=25s retryPeriod=10s".
 */
export function tripleString(t) {
  return FIELDS.map((fl) => `${ fl }=${ formatDuration(t[fl]) }`).join(' ');
}

/**
 * checkTriple reads three strings (a value per field, as typed) the way
 * the server does: each must parse (election.ParseDuration), then the
 * whole must validate. It returns { timings, parseErrors: [{ field,
 * message }], violations, error } where error is the whole
 * *election.ValidationError message ('' when valid or unparsed) and
 * timings is null unless every field parsed.
 */
export function checkTriple(values) {
  const parseErrors = [];
  const timings = {};

  for (const fl of FIELDS) {
    const r = parseDuration(fl, values[fl]);

    if (r.error) {
      parseErrors.push({ field: fl, message: r.error });
    } else {
      timings[fl] = r.ns;
    }
  }
  if (parseErrors.length > 0) {
    return {
      timings: null, parseErrors, violations: [], error: ''
    };
  }
  const violations = validate(timings);
  const error = violations.length ? `invalid leader-election timings ${ tripleString(timings) }: ${ violations.map((v) => v.message).join('; ') }` : '';

  return {
    timings, parseErrors, violations, error
  };
}

// pkg/election/cost.go
const MEAN_FOLLOWER_WAIT_FACTOR = 1 + JITTER_FACTOR / 2;
const NS_PER_HOUR = 3.6e12;

/**
 * LEADER_ONLY_UPDATES is election.Supported: every Rancher (v2.9+) and Fleet
 * (v0.10+) leasetune supports builds with client-go v0.30+, whose leader
 * only updates its lock while its lease is valid (plan.test.js checks it
 * against the Go code's golden answer).
 */
export const LEADER_ONLY_UPDATES = true;

/**
 * costOf is election.CostOf for one lock of a valid triple t (BigInt
 * nanoseconds) with `followers` followers: requests per hour of the
 * leader (1 per retry period with client-go v0.30+, leaderOnlyUpdates; 2
 * before, when it got the lock before each update) and of the followers
 * (one per mean jittered wait, 1.6 retry periods), and the worst-case
 * failover leaseDuration + 4.4 × retryPeriod (BigInt nanoseconds).
 */
export function costOf(t, followers = 0, leaderOnlyUpdates = LEADER_ONLY_UPDATES) {
  const perHour = NS_PER_HOUR / Number(t.retryPeriod);
  const leader = perHour * (leaderOnlyUpdates ? 1 : 2);
  const follower = followers * perHour / MEAN_FOLLOWER_WAIT_FACTOR;
  // math.Round(2 * MaxFollowerWaitFactor * float64(retry)); Go folds the
  // constant 2 × 2.2 to 4.4 before multiplying.
  const failover = t.leaseDuration + BigInt(Math.round(4.4 * Number(t.retryPeriod)));

  return {
    leaderRequestsPerHour:   leader,
    followerRequestsPerHour: follower,
    totalRequestsPerHour:    leader + follower,
    worstCaseFailover:       failover,
  };
}

/**
 * renewAttempts is election.RenewAttempts: renewDeadline / retryPeriod.
 */
export function renewAttempts(t) {
  return t.retryPeriod <= 0n ? 0 : Number(t.renewDeadline) / Number(t.retryPeriod);
}
