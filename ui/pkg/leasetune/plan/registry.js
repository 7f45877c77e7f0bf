// The nine settings (pkg/settings Registry: name, component, field,
// default, the env var on leasetune's pod that sets one), the components'
// order, the defaults and the env names of a triple (pkg/election). The
// golden cases (../validation/golden.json, from the Go code) check every
// entry here.
import { parseDuration } from '../validation/duration';
import { FIELDS } from '../validation/validate';

export { FIELDS };

/** COMPONENTS are pkg/settings Components, in their order. */
export const COMPONENTS = ['fleet-controller', 'fleet-agent', 'rancher'];

const PREFIXES = { 'fleet-controller': 'fleet', 'fleet-agent': 'fleet-agent', rancher: 'rancher' };
const SUFFIXES = { leaseDuration: 'lease-duration', renewDeadline: 'renew-deadline', retryPeriod: 'retry-period' };
const DEFAULTS = {
  'fleet-controller': ['30s', '25s', '10s'], 'fleet-agent': ['30s', '25s', '10s'], rancher: ['45s', '30s', '2s']
};

/** REGISTRY is settings.Registry: { name, component, field, default, envVar }. */
export const REGISTRY = COMPONENTS.flatMap((component) => FIELDS.map((field, i) => {
  const name = `${ PREFIXES[component] }-leader-election-${ SUFFIXES[field] }`;

  return {
    name, component, field, default: DEFAULTS[component][i], envVar: `CATTLE_${ name.toUpperCase().replace(/-/g, '_') }`
  };
}));

/** settingsOf is settings.Of: component c's three definitions, in field order. */
export function settingsOf(c) {
  return REGISTRY.filter((d) => d.component === c);
}

/** lookup is settings.Lookup (undefined for another name). */
export function lookup(name) {
  return REGISTRY.find((d) => d.name === name);
}

/** timingsOf reads a triple of strings ({ leaseDuration, ... }) as BigInt nanoseconds (null when absent or unparsable). */
export function timingsOf(t) {
  if (!t) {
    return null;
  }
  const out = {};

  for (const f of FIELDS) {
    const r = parseDuration(f, t[f] ?? '');

    if (r.error) {
      return null;
    }
    out[f] = r.ns;
  }

  return out;
}

const S = 1000000000n;

/** FLEET_DEFAULTS and WRANGLER_DEFAULTS are election.FleetDefaults (30s/25s/10s) and WranglerDefaults (45s/30s/2s). */
export const FLEET_DEFAULTS = { leaseDuration: 30n * S, renewDeadline: 25n * S, retryPeriod: 10n * S };
export const WRANGLER_DEFAULTS = { leaseDuration: 45n * S, renewDeadline: 30n * S, retryPeriod: 2n * S };

/** sameTimings compares two triples of BigInt nanoseconds (null equals null). */
export function sameTimings(a, b) {
  if (!a || !b) {
    return !a && !b;
  }

  return FIELDS.every((f) => a[f] === b[f]);
}

const ENV_SUFFIXES = { leaseDuration: 'LEASE_DURATION', renewDeadline: 'RENEW_DEADLINE', retryPeriod: 'RETRY_PERIOD' };

/** CATTLE and FLEET_AGENT are election's env prefixes. */
export const CATTLE = 'CATTLE';
export const FLEET_AGENT = 'FLEET_AGENT';

/** envName is EnvPrefix.EnvName: envName('CATTLE', 'retryPeriod') is CATTLE_ELECTION_RETRY_PERIOD. */
export function envName(prefix, field) {
  return `${ prefix }_ELECTION_${ ENV_SUFFIXES[field] }`;
}

/** owns is EnvPrefix.Owns. */
export function owns(prefix, name) {
  return FIELDS.some((f) => envName(prefix, f) === name);
}
