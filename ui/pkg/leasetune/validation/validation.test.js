// The page's checks against the server's: every case of golden.json
// (written by `go run ./hack/golden` from pkg/election and pkg/settings,
// and checked to be current by that package's Go test) must come out of
// the JavaScript port exactly as it came out of the Go code.
import golden from './golden.json';
import { parseDuration, formatDuration } from './duration';
import { checkTriple, costOf, renewAttempts, FIELDS } from './validate';

describe('durations, as election.ParseDuration reads them', () => {
  it.each(golden.durations.map((c) => [c.field, JSON.stringify(c.input), c]))('%s %s', (field, _, c) => {
    const r = parseDuration(c.field, c.input);

    if (c.error) {
      expect(r.error).toBe(c.error);
    } else {
      expect(r.error).toBeUndefined();
      expect(r.ns.toString()).toBe(c.nanoseconds);
    }
  });
});

describe('durations, as time.Duration.String prints them', () => {
  it.each(golden.formats.map((c) => [c.nanoseconds, c.formatted]))('%s ns is %s', (ns, formatted) => {
    expect(formatDuration(BigInt(ns))).toBe(formatted);
  });
});

describe('triples, as Timings.Validate judges them', () => {
  it.each(golden.triples.map((c) => [JSON.stringify(c.input), c]))('%s', (_, c) => {
    const r = checkTriple(c.input);

    expect(r.parseErrors).toEqual(c.parseErrors);
    expect(r.violations).toEqual(c.violations);
    expect(r.error).toBe(c.error || '');
    if (c.cost) {
      const cost = costOf(r.timings, 1, false);

      expect(cost.leaderRequestsPerHour).toBe(c.cost.leaderRequestsPerHour);
      expect(costOf(r.timings, 1, true).leaderRequestsPerHour).toBe(c.cost.leaderOnlyUpdatesRequestsPerHour);
      expect(cost.followerRequestsPerHour).toBe(c.cost.followerRequestsPerHour);
      expect(formatDuration(cost.worstCaseFailover)).toBe(c.cost.worstCaseFailover);
      expect(cost.worstCaseFailover.toString()).toBe(c.cost.worstCaseFailoverNanoseconds);
      expect(renewAttempts(r.timings)).toBe(c.cost.renewAttempts);
    } else {
      expect(r.parseErrors.length + r.violations.length).toBeGreaterThan(0);
    }
  });
});

describe('the golden file', () => {
  it('covers the nine settings and the three fields', () => {
    expect(golden.settings).toHaveLength(9);
    expect(new Set(golden.settings.map((s) => s.field))).toEqual(new Set(FIELDS));
  });
});
