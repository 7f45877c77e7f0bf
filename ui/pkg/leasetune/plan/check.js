// The Settings' rules as leasetune's webhook applies them, ported from
// pkg/settings (resolve.go Resolve and Evaluate, check.go CheckChange,
// order.go WriteOrder): which value of a setting counts, whether a write
// of one setting is accepted given the other two, and the order in which
// the page writes a triple so that each write is accepted. The write
// orders and their errors are checked against the Go code's in
// golden.json (plan.test.js).
import { parseDuration, goQuote, formatDuration, SECOND, HOUR } from '../validation/duration';
import { validate, tripleString, FIELDS } from '../validation/validate';
import { settingsOf, lookup } from './registry';

// rawValue is the value set for a setting before defaulting and its
// origin: the env var, else the object's value (a stale env object yields
// to the remembered value), else the remembered value.
function rawValue(input) {
  const o = input.object;

  if (input.envSet) {
    return [input.env, 'env'];
  } else if (o && o.source === 'env' && input.rememberedSet) {
    return [input.remembered, 'remembered'];
  } else if (o) {
    return [o.value ?? '', 'value'];
  } else if (input.rememberedSet) {
    return [input.remembered, 'remembered'];
  }

  return ['', 'default'];
}

/**
 * resolve is settings.Resolve of definition d: { value, origin }, the
 * default when the value set is empty (Rancher's rule). input is { object:
 * { value, source } | null, env, envSet, remembered, rememberedSet }.
 */
export function resolve(d, input) {
  const [v, origin] = rawValue(input);

  return v === '' ? { value: d.default, origin: 'default' } : { value: v, origin };
}

/**
 * evaluate is settings.Evaluate of component c's three resolved values:
 * { timings } or { error, parseErrors: [{ field, message }], violations }.
 * The error is Go's message: "setting NAME: <parse error>" per field that
 * does not parse (joined by new lines), else the whole
 * *election.ValidationError.
 */
export function evaluate(c, values) {
  const defs = settingsOf(c);
  const timings = {};
  const parseErrors = [];

  defs.forEach((d, i) => {
    const r = parseDuration(d.field, values[i].value);

    if (r.error) {
      parseErrors.push({ field: d.field, setting: d.name, message: `setting ${ d.name }: ${ r.error }` });
    } else {
      timings[d.field] = r.ns;
    }
  });
  if (parseErrors.length) {
    return { error: parseErrors.map((e) => e.message).join('\n'), parseErrors, violations: [] };
  }
  const violations = validate(timings);

  if (violations.length) {
    return {
      error: `invalid leader-election timings ${ tripleString(timings) }: ${ violations.map((v) => v.message).join('; ') }`, parseErrors, violations
    };
  }

  return { timings };
}

// envSetOf is View.readOnly: the object says source env, or the env var is
// set on leasetune's pod.
function readOnly(view, d, obj) {
  return (obj && obj.source === 'env') || !!(view.envSet && view.envSet(d));
}

function byNameOf(objects) {
  const out = {};

  (objects || []).forEach((o) => {
    out[o.name] = o;
  });

  return out;
}

function remembered(view, name) {
  const r = view.remembered || {};

  return Object.prototype.hasOwnProperty.call(r, name) ? { remembered: r[name], rememberedSet: true } : { remembered: '', rememberedSet: false };
}

// subset is settings.subset: every violation of a is one of b (by rule and fields).
function subset(a, b) {
  const count = {};
  const key = (v) => `${ v.rule } ${ v.fields.join(',') }`;

  b.forEach((v) => {
    count[key(v)] = (count[key(v)] || 0) + 1;
  });

  return a.every((v) => {
    if (!count[key(v)]) {
      return false;
    }
    count[key(v)]--;

    return true;
  });
}

const FLOORS = { leaseDuration: 3n * SECOND, renewDeadline: 2n * SECOND, retryPeriod: SECOND };

// ownRules is settings.ownRules: the rules one value must meet whatever
// the other two ('' when it meets them), in Go's words.
function ownRules(f, d) {
  const fd = formatDuration;
  const errs = [];

  if (d <= 0n) {
    errs.push(`${ f } ${ fd(d) } must be greater than 0`);
  }
  if (d > HOUR) {
    errs.push(`${ f } ${ fd(d) } must be at most ${ fd(HOUR) }`);
  }
  if (d > 0n && d < FLOORS[f]) {
    errs.push({
      retryPeriod:   `${ f } ${ fd(d) } must be at least ${ fd(FLOORS[f]) }`,
      renewDeadline: `${ f } ${ fd(d) } must be at least ${ fd(FLOORS[f]) } (2 × the shortest retryPeriod, ${ fd(SECOND) })`,
      leaseDuration: `${ f } ${ fd(d) } must be at least ${ fd(FLOORS[f]) } (above the shortest renewDeadline, ${ fd(FLOORS.renewDeadline) }, in whole seconds)`,
    }[f]);
  }
  if (f === 'leaseDuration' && d % SECOND !== 0n) {
    errs.push(`${ f } ${ fd(d) } must be a whole number of seconds`);
  }

  return errs.join('\n');
}

/**
 * checkChange is settings.CheckChange: null when setting name may take
 * value given the other two settings of its component (view: { objects:
 * [{ name, value, source }], remembered: { name: value }, envSet(d) }),
 * else { readOnly, message } with Go's message. An edit of an already
 * invalid triple that breaks no rule it does not already break is
 * accepted, as a way out. The refusal names the setting, the value and
 * the rule; Go adds a hint (an order of edits that works), left out here:
 * the page shows a refusal only when no order of its writes is accepted.
 */
export function checkChange(view, name, value) {
  const d = lookup(name);

  if (!d) {
    return { message: `unknown setting ${ goQuote(name) }` };
  }
  const byName = byNameOf(view.objects);

  if (readOnly(view, d, byName[name])) {
    return { readOnly: true, message: `setting ${ name } is set by an env var and read-only (env var ${ d.envVar } on leasetune's pod)` };
  }
  const defs = settingsOf(d.component);
  const cur = [];
  const next = [];
  let idx = 0;

  defs.forEach((od, i) => {
    const o = byName[od.name] || null;
    const input = { object: o, ...remembered(view, od.name) };

    if (o && o.source === 'env') {
      input.env = o.value ?? '';
      input.envSet = true;
    }
    cur.push(resolve(od, input));
    if (od.name === name) {
      idx = i;
      next.push(resolve(od, { object: { value } }));
    } else {
      next.push(resolve(od, input));
    }
  });
  const empty = value === '' ? ` (empty: the default, ${ d.default })` : '';
  const refused = (err) => ({ message: `${ name }=${ goQuote(value) }${ empty } refused: ${ err }` });
  const own = parseDuration(d.field, next[idx].value);

  if (own.error) {
    return refused(`setting ${ name }: ${ own.error }`);
  }
  const n = evaluate(d.component, next);

  if (!n.error) {
    return null;
  }
  const isV = n.violations.length > 0;
  const c = evaluate(d.component, cur);

  if (!c.error) {
    return refused(n.error);
  }
  if (c.violations.length > 0) {
    return isV && subset(n.violations, c.violations) ? null : refused(n.error);
  }
  // A current value does not even parse: any value acceptable on its own
  // is a step out.
  const bad = ownRules(d.field, own.ns);

  return bad ? refused(bad) : null;
}

/**
 * writeOrder is settings.WriteOrder: the writes [{ name, value }] that take
 * component c's settings to want (three strings in field order, '' meaning
 * the default), in an order in which checkChange accepts each given the
 * ones before it (the field order first, then every other); [] when
 * nothing changes. It throws an OrderError { reason: invalid | read-only
 * | no-order, setting, message } with Go's message.
 */
export function writeOrder(view, c, want) {
  const defs = settingsOf(c);
  const byName = byNameOf(view.objects);
  const next = defs.map((d, i) => resolve(d, { object: { value: want[i] } }));
  const whole = evaluate(c, next);

  if (whole.error) {
    throw new OrderError('invalid', whole.parseErrors.length ? whole.parseErrors[0].setting : '', `the ${ c } triple is refused: ${ whole.error }`);
  }
  const changed = [];

  defs.forEach((d, i) => {
    // The value that counts now: an object set by env holds the env value.
    const input = { object: byName[d.name] || null, ...remembered(view, d.name) };

    if (input.object && input.object.source === 'env') {
      input.env = input.object.value ?? '';
      input.envSet = true;
    }
    if (resolve(d, input).value !== next[i].value) {
      changed.push(i);
    }
  });
  if (!changed.length) {
    return [];
  }
  let first = null;

  for (const order of orders(changed)) {
    let objects = (view.objects || []).map((o) => ({ ...o }));
    const writes = [];
    let failed = false;

    for (const i of order) {
      const d = defs[i];
      const refusal = checkChange({ ...view, objects }, d.name, want[i]);

      if (refusal && refusal.readOnly) {
        throw new OrderError('read-only', d.name, refusal.message);
      }
      if (refusal) {
        first = first || { setting: d.name, message: refusal.message };
        failed = true;
        break;
      }
      objects = withValue(objects, d.name, want[i]);
      writes.push({ name: d.name, value: want[i] });
    }
    if (!failed) {
      return writes;
    }
  }
  throw new OrderError('no-order', first.setting, `no order of the writes is accepted: ${ first.message }`);
}

/** OrderError is why writeOrder found no writes (settings.OrderError). */
export class OrderError extends Error {
  constructor(reason, setting, message) {
    super(message);
    this.reason = reason;
    this.setting = setting;
  }
}

function withValue(objects, name, value) {
  const o = objects.find((x) => x.name === name);

  if (o) {
    o.value = value;

    return objects;
  }

  return [...objects, { name, value }];
}

function orders(idx) {
  if (idx.length <= 1) {
    return [idx];
  }

  return idx.flatMap((x, i) => orders([...idx.slice(0, i), ...idx.slice(i + 1)]).map((p) => [x, ...p]));
}

export { FIELDS };
