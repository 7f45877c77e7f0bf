// Formatting for the page: every number with its unit.

import { formatDuration } from './validation/duration';

export const FIELD_LABELS = {
  leaseDuration: 'Lease duration',
  renewDeadline: 'Renew deadline',
  retryPeriod:   'Retry period',
};

export const FIELD_HELP = {
  leaseDuration: 'how long a candidate waits, after it last saw the lock renewed, before it takes over',
  renewDeadline: 'how long the leader keeps trying to renew before it gives up leadership',
  retryPeriod:   'how often the leader renews and the followers look at the lock',
};

export const SOURCE_LABELS = {
  default:  'default',
  user:     'user',
  env:      'env',
  override: 'override',
};

/** perHour formats a rate of requests: "4,725 requests/h". */
export function perHour(n) {
  return `${ Math.round(n).toLocaleString('en-US') } requests/h`;
}

/** seconds formats a number of seconds as a Go duration: "1m14s". */
export function seconds(s) {
  return formatDuration(BigInt(Math.round(s * 1e9)));
}

/** triple formats a triple of strings: "30s / 25s / 10s". */
export function triple(t) {
  return t ? `${ t.leaseDuration } / ${ t.renewDeadline } / ${ t.retryPeriod }` : 'none';
}

/** attempts formats renewal attempts: "2.5 renewal attempts". */
export function attempts(n) {
  return `${ Math.round(n * 100) / 100 } renewal attempts`;
}
