// Formatting for the page: every number with its unit, in the words of
// l10n/en-us.yaml (t is the shell's translation function).
import { formatDuration } from './validation/duration';
import { FIELDS } from './validation/validate';

/** perHour formats a rate of requests: "4,725 requests/h". */
export function perHour(t, n) {
  return t('leasetune.unit.perHour', { count: Math.round(n || 0).toLocaleString('en-US') }, true);
}

/** seconds formats a number of seconds as a Go duration: "1m14s". */
export function seconds(s) {
  return formatDuration(BigInt(Math.round(s * 1e9)));
}

/** triple formats a triple of strings or of BigInt nanoseconds: "30s / 25s / 10s" (null: "none"). */
export function triple(t, x) {
  if (!x) {
    return t('leasetune.unit.none', {}, true);
  }

  return FIELDS.map((f) => (typeof x[f] === 'bigint' ? formatDuration(x[f]) : x[f])).join(' / ');
}

/** attempts formats renewal attempts: 2.5. */
export function attempts(n) {
  return `${ Math.round(n * 100) / 100 }`;
}
