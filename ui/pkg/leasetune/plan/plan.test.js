// The page's computations against the Go code's: every case of golden.json
// (written by `go run ./hack/golden` from pkg/electionstatus, pkg/settings
// WriteOrder, pkg/plan FromSnapshot and pkg/recommend, and checked to be
// current by that package's Go test) must come out of the JavaScript
// ports as it came out of the Go code.
import golden from './golden.json';
import validationGolden from '../validation/golden.json';
import { writeOrder, OrderError } from './check';
import { plan } from './plan';
import { recommend } from './tradeoff';
import { REGISTRY } from './registry';
import { goParseDuration, formatDuration } from '../validation/duration';
import { LEADER_ONLY_UPDATES } from '../validation/validate';
import { viewOf } from '../api/store';

const FIELDS = ['leaseDuration', 'renewDeadline', 'retryPeriod'];

describe('the registry', () => {
  it('is pkg/settings Registry', () => {
    expect(REGISTRY).toEqual(validationGolden.settings.map((s) => ({
      name: s.name, component: s.component, field: s.field, default: s.default, envVar: s.envVar
    })));
  });
});

// Cost sums over many clusters: Go adds one cluster at a time, the page
// multiplies each group's cost by its count, so the two can differ in the
// last bits of a float64 (and in nothing else).
const SUMMED = ['agentLockRequestsPerHour', 'agentLockRequestsPerHourBefore'];

function expectTotals(got, want) {
  const keys = new Set([...Object.keys(got), ...Object.keys(want)]);

  keys.forEach((k) => {
    // Go leaves a zero "before" out of the JSON (omitempty).
    const g = got[k] ?? 0;
    const w = want[k] ?? 0;

    if (SUMMED.includes(k) && w !== 0) {
      expect({ [k]: Math.abs(g - w) / w < 1e-12 }).toEqual({ [k]: true });
    } else {
      expect({ [k]: g }).toEqual({ [k]: w });
    }
  });
}

const cases = golden.cases.flatMap((c) => c.proposals.map((p) => [c.name, p.component, FIELDS.map((f) => p.values[f]).join('/'), c, p]));

describe('the write order and the plan, as settings.WriteOrder and plan.FromSnapshot give them', () => {
  it('has cases with writes, with errors, with cluster changes, and of every Fleet channel', () => {
    expect(cases.filter((x) => x[4].plan && x[4].writes.length).length).toBeGreaterThan(100);
    expect(new Set(cases.filter((x) => x[4].error).map((x) => x[4].error.reason))).toEqual(new Set(['invalid', 'read-only']));
    expect(cases.some((x) => x[4].plan?.clusterChanges > 0)).toBe(true);
    expect(new Set(golden.cases.map((c) => c.status.fleet.channel || ''))).toEqual(new Set(['agentmanagement', 'fixed-v0.12', 'cluster-env-v0.9', 'fixed-v0.9.0', 'none', '']));
  });

  it.each(cases)('%s: %s %s', (name, component, values, c, p) => {
    const view = viewOf(c.settings, c.status);
    const want = FIELDS.map((f) => p.values[f]);
    let writes;

    try {
      writes = writeOrder(view, component, want);
    } catch (e) {
      expect(e).toBeInstanceOf(OrderError);
      expect({ reason: e.reason, setting: e.setting, message: e.message }).toEqual(p.error || {});

      return;
    }
    expect(p.error).toBeUndefined();
    expect(writes).toEqual(p.writes);
    const got = plan(c.status, component, p.values, writes);

    expect(got.changes.map((x) => `${ x.object } | ${ x.field }`).sort()).toEqual(p.plan.changes);
    expect(got.objects).toEqual(p.plan.objects);
    expect(got.clusterChangeCount).toBe(p.plan.clusterChanges);
    expect(p.plan.refused).toEqual([]);
    expectTotals(got.totals, p.plan.totals);
    const after = got.after[component];

    expect(after && Object.fromEntries(FIELDS.map((f) => [f, formatDuration(after[f])]))).toEqual(p.plan.after);
  });
});

describe('election.Supported', () => {
  it('counts locks as the Go code does', () => {
    expect(LEADER_ONLY_UPDATES).toBe(golden.leaderOnlyUpdates);
  });
});

describe('recommend.Best', () => {
  it.each(golden.recommendations.map((r) => [r.maxFailover, r.followers, r]))('within %s, %d followers', (target, followers, r) => {
    const got = recommend(goParseDuration(target).ns, followers);

    if (r.error) {
      expect(got.error).toBe(r.error);
    } else {
      expect(Object.fromEntries(FIELDS.map((f) => [f, formatDuration(got.timings[f])]))).toEqual(r.triple);
      expect(got.requestsPerHour).toBe(r.requestsPerHour);
    }
  });
});
