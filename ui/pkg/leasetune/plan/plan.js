// What a proposed triple writes and restarts, computed in the browser from
// the ElectionStatus object leasetune's leader keeps (pkg/electionstatus):
// a port of pkg/plan FromSnapshot (`leasetune plan --set`) over that
// status instead of the whole installation, with the same rules:
//
//   - the Fleet Deployments' env (fleetsettings.Desired over the status'
//     components[].targets), the agent triple on fleet-agentmanagement
//     judged first by what every agent would run (plan.JudgeAgents,
//     agentenv.JudgeGlobal over agents.groups and unroutableEntries);
//   - rancher-config (fleetsettings.MergeChartValues: at the chart's
//     defaults an absent triple stays absent; a key already holding the
//     duration is kept);
//   - the Rancher Deployment (rancherenv.Decide: a problem leaves it
//     alone, back at 45s/30s/2s leasetune's entries go);
//   - each group of clusters (agentenv.Decide per group, times its count;
//     fleet.AgentChannel's AgentRuns and Baseline);
//   - the costs (election.CostOf with election.Supported: client-go v0.30+).
//
// golden.json (from `go run ./hack/golden`) holds the Go code's answers
// for synthetic installations; plan.test.js checks this port against
// every one. What the status cannot tell, and so this port cannot either,
// is said at each place below.
import { goParseDuration, formatDuration } from '../validation/duration';
import { costOf, validate, FIELDS } from '../validation/validate';
import {
  COMPONENTS, settingsOf, timingsOf, sameTimings, envName, owns, CATTLE, FLEET_AGENT, FLEET_DEFAULTS, WRANGLER_DEFAULTS
} from './registry';
import { parseDuration } from '../validation/duration';

// Fleet agent channels (fleet.AgentChannel).
const AGENTMANAGEMENT = 'agentmanagement';
const FIXED_V012 = 'fixed-v0.12';
const CLUSTER_ENV_V09 = 'cluster-env-v0.9';
const FIXED_V090 = 'fixed-v0.9.0';

const VALUE_FROM = '(valueFrom)'; // how the status shows an entry that takes its value from a source

function envOf(prefix, t) {
  return FIELDS.map((f) => ({ name: envName(prefix, f), value: formatDuration(t[f]) }));
}

function valid(t) {
  return validate(t).length === 0;
}

/** lockCost is the requests per hour of one lock with followers (election.Supported). */
function lockCost(t, followers = 0) {
  return costOf(t, followers).totalRequestsPerHour;
}

// baseline is AgentChannel.Baseline: what an agent runs without entries
// of its own; null where agents run no leader election.
function baseline(ch, global) {
  switch (ch) {
  case AGENTMANAGEMENT:
    return global;
  case FIXED_V012:
    return FLEET_DEFAULTS;
  case CLUSTER_ENV_V09:
  case FIXED_V090:
    return WRANGLER_DEFAULTS;
  }

  return null;
}

const rendersElectionEnv = (ch) => ch === AGENTMANAGEMENT || ch === FIXED_V012;
const globalReachesAgents = (ch) => ch === AGENTMANAGEMENT || ch === CLUSTER_ENV_V09;

// renderedEnv is AgentChannel.RenderedElectionEnv.
function renderedEnv(ch, global) {
  if (ch === AGENTMANAGEMENT) {
    return envOf(CATTLE, global);
  } else if (ch === FIXED_V012) {
    return envOf(CATTLE, FLEET_DEFAULTS);
  }

  return [];
}

/**
 * agentRuns is AgentChannel.AgentRuns: { t, elects, error } for a
 * cluster's CATTLE_ELECTION_* entries [{ name, value }] and the global
 * agent triple; t is what its fleet-agent runs (the last entry of a name
 * wins, an empty one means wrangler's default; on an error, what was read
 * up to it).
 */
export function agentRuns(ch, global, clusterEnv) {
  const base = baseline(ch, global);

  if (!base) {
    return { t: null, elects: false };
  }
  if (ch === FIXED_V090) {
    return { t: base, elects: true };
  }
  const t = { ...WRANGLER_DEFAULTS };
  const env = [...renderedEnv(ch, global), ...clusterEnv];

  for (const f of FIELDS) {
    const name = envName(CATTLE, f);
    const last = env.filter((e) => e.name === name).pop();

    if (!last || last.value === '') {
      continue;
    }
    if (last.value === VALUE_FROM) {
      return { t, elects: true, error: `${ name } takes its value from a source (valueFrom), which leasetune cannot read` };
    }
    const r = parseDuration(f, last.value);

    if (r.error) {
      return { t, elects: true, error: `${ name }: ${ r.error }` };
    }
    t[f] = r.ns;
  }

  return { t, elects: true };
}

// fromEnv is EnvPrefix.FromEnv, without the error: the last entry of each
// name; found when any is there; a missing or unreadable one is 0.
function fromEnv(env, prefix) {
  const t = { leaseDuration: 0n, renewDeadline: 0n, retryPeriod: 0n };
  let found = false;
  let ok = true;

  for (const f of FIELDS) {
    const last = (env || []).filter((e) => e.name === envName(prefix, f)).pop();

    if (!last) {
      ok = false;
      continue;
    }
    found = true;
    const r = last.value === VALUE_FROM ? { error: true } : parseDuration(f, last.value);

    if (r.error) {
      ok = false;
    } else {
      t[f] = r.ns;
    }
  }

  return { t, found, ok };
}

// envValue is plan.envValue: the last entry's value of name ('' absent).
function envValue(env, name) {
  const last = (env || []).filter((e) => e.name === name).pop();

  return last ? last.value : '';
}

// differs is fleetsettings.differs: env does not give the prefix's three
// names the durations of t.
function differs(env, prefix, t) {
  const seen = new Set();

  for (const e of env || []) {
    if (!owns(prefix, e.name)) {
      continue;
    }
    seen.add(e.name);
    const f = FIELDS.find((x) => envName(prefix, x) === e.name);
    const r = e.value === VALUE_FROM ? { error: true } : parseDuration(f, e.value);

    if (r.error || r.ns !== t[f]) {
      return true;
    }
  }

  return seen.size !== 3;
}

// sameDuration is plan.sameDuration (Go's time.ParseDuration on both).
function sameDuration(a, b) {
  const x = goParseDuration(a);
  const y = goParseDuration(b);

  return !x.error && !y.error && x.ns === y.ns;
}

function targetsOf(status, component) {
  return (status.components || []).find((c) => c.component === component)?.targets || [];
}

// clusterEnvs are the fleet Clusters' own entries with their counts, as
// JudgeGlobal reads them: a standalone cluster's fleet Cluster is its
// source; a Rancher-managed one's carries Rancher's copy (fleetEntries).
function clusterEnvs(status) {
  const agents = status.agents || {};
  const out = (agents.groups || []).map((g) => ({ count: g.count, env: (g.rancherManaged ? g.fleetEntries : g.entries) || [] }));

  (agents.unroutableEntries || []).forEach((e) => out.push({ count: e.count, env: e.entries || [] }));

  return out;
}

/**
 * judgeAgents is plan.JudgeAgents: on the agentmanagement channel, the
 * number of clusters whose fleet-agent runs a valid triple now and would
 * run an invalid one with the agent triple next (their own entries mix
 * with the ones Fleet renders); 0 when none.
 */
export function judgeAgents(status, next) {
  const ch = status.fleet?.channel || '';

  if (ch !== AGENTMANAGEMENT) {
    return 0;
  }
  const am = targetsOf(status, 'fleet-agent').find((t) => /\/fleet-controller$/.test(t.object) && t.container === 'fleet-agentmanagement');

  if (!am) {
    return 0;
  }
  const { t: cur, found } = fromEnv(am.env, FLEET_AGENT);

  if (!found || sameTimings(cur, next) || !rendersElectionEnv(ch) || !globalReachesAgents(ch)) {
    return 0;
  }
  let broken = 0;

  for (const c of clusterEnvs(status)) {
    const before = agentRuns(ch, cur, c.env);

    if (!before.elects || before.error || !valid(before.t)) {
      continue;
    }
    const after = agentRuns(ch, next, c.env);

    if (after.error || !valid(after.t)) {
      broken += c.count;
    }
  }

  return broken;
}

// effective is agentenv.Effective: the global triple with the overrides
// set; error when one does not parse or the whole is invalid.
function effective(global, overrides) {
  const t = { ...global };
  let error = '';

  for (const f of FIELDS) {
    if (overrides[f] === undefined) {
      continue;
    }
    const r = parseDuration(f, overrides[f]);

    if (r.error) {
      error = error || r.error;
    } else {
      t[f] = r.ns;
    }
  }
  if (!error && !valid(t)) {
    error = 'invalid';
  }

  return { t, error };
}

function sameEnv(a, b) {
  return a.length === b.length && a.every((e, i) => e.name === b[i].name && e.value === b[i].value);
}

function sameRecord(a, b) {
  const ka = Object.keys(a || {});
  const kb = Object.keys(b || {});

  return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && a[k] === b[k]);
}

/**
 * decideGroup is agentenv.Decide for a group of clusters of the status
 * (agents.groups[]): { change, env, runs, elects, problem }. The group
 * holds the source's CATTLE_ELECTION_* entries only; the other entries of
 * spec.agentEnvVars are copied unchanged by Decide and change nothing of
 * its answer.
 */
export function decideGroup(g, global, ch) {
  if (g.malformed) {
    return { change: false, elects: false, problem: 'foreign' };
  }
  const entries = g.entries || [];
  const record = g.record || null;
  const overrides = g.overrides || {};
  const anyOverride = FIELDS.some((f) => overrides[f] !== undefined);
  const eff = effective(global, overrides);
  const owned = new Map();

  for (let i = 0; i < entries.length; i++) {
    const { name, value } = entries[i];
    const recorded = record && Object.prototype.hasOwnProperty.call(record, name);

    if (owned.has(name) || value === VALUE_FROM || !recorded || record[name] !== value) {
      const r = agentRuns(ch, global, entries);

      return {
        change: false, elects: r.elects, runs: r.t, problem: 'foreign'
      };
    }
    owned.set(name, i);
  }
  const fleetReads = ch === CLUSTER_ENV_V09;
  const cattleReads = !!g.clusterAgentReads && !rendersElectionEnv(ch);
  let write = false;
  let problem = '';

  if (!anyOverride) {
    write = fleetReads && !sameTimings(global, baseline(ch, global));
  } else if (!fleetReads && !cattleReads) {
    problem = 'unsupported';
  } else if (eff.error) {
    return {
      change: false, elects: false, problem: 'invalid'
    };
  } else {
    write = !sameTimings(eff.t, WRANGLER_DEFAULTS) || owned.size > 0;
  }
  let out;
  let newRecord = null;

  if (write) {
    const want = {};

    envOf(CATTLE, eff.t).forEach((e) => {
      want[e.name] = e.value;
    });
    newRecord = want;
    out = entries.map((e, i) => (owned.get(e.name) === i ? { name: e.name, value: want[e.name] } : e));
    FIELDS.map((f) => envName(CATTLE, f)).filter((n) => !owned.has(n)).forEach((n) => out.push({ name: n, value: want[n] }));
  } else {
    out = entries.filter((e, i) => owned.get(e.name) !== i);
  }
  const change = !sameEnv(entries, out) || !sameRecord(record && Object.keys(record).length ? record : null, newRecord);
  const r = agentRuns(ch, global, out);

  return {
    change, env: out, elects: r.elects, runs: r.t, problem
  };
}

// restartsOf is agentenv.Restarts of a group.
function restartsOf(g) {
  if (g.replans) {
    return 'fleet-agent, cattle-cluster-agent and the system agent on every node';
  } else if (g.rancherManaged) {
    return 'fleet-agent and cattle-cluster-agent';
  }

  return 'fleet-agent';
}

/**
 * triplesOf are the components' triples as the settings say now (BigInt
 * nanoseconds, null where none is in effect): a pending triple is taken
 * as in effect, as `leasetune plan` takes it (settings.Snapshot).
 */
export function triplesOf(status) {
  const out = {};

  COMPONENTS.forEach((c) => {
    const s = (status.components || []).find((x) => x.component === c) || {};

    out[c] = timingsOf(s.pending || s.inEffect);
  });

  return out;
}

/**
 * proposedTimings reads a typed triple of component c ('' meaning the
 * default) as BigInt nanoseconds (null when it does not parse).
 */
export function proposedTimings(c, want) {
  const t = {};

  for (const d of settingsOf(c)) {
    const r = parseDuration(d.field, want[d.field] === '' ? d.default : want[d.field]);

    if (r.error) {
      return null;
    }
    t[d.field] = r.ns;
  }

  return t;
}

/**
 * plan is what `leasetune plan --set` answers for the writes that take
 * component's settings to want (a triple of strings, '' meaning the
 * default), given the ElectionStatus status: { before, after (the
 * components' triples), changes: [{ object, field, old, new, restarts }]
 * outside the clusters, clusterChanges: [{ count, restarts }] per group of
 * clusters whose spec.agentEnvVars change, clusterChangeCount, objects
 * (the objects outside the clusters written, sorted), leftAlone ({ kind:
 * judge, count } the agents' judgement; { kind: object, object, reason };
 * { kind: noRancher }; { kind: clusters, count, problem }), totals
 * (plan.Totals' JSON) }. writes are the writes (writeOrder): with none,
 * there is no "before" in the totals, as with `plan` without --set.
 */
export function plan(status, component, want, writes) {
  const before = triplesOf(status);
  const after = { ...before, [component]: proposedTimings(component, want) };
  const hasBefore = writes.length > 0;
  const ch = status.fleet?.channel || '';
  const out = {
    before, after, changes: [], clusterChanges: [], clusterChangeCount: 0, leftAlone: []
  };
  let agentRollout = false;

  // planFleet
  const ctrl = after['fleet-controller'];
  const agent = after['fleet-agent'];
  let agentOK = !!agent;

  if (agentOK) {
    const broken = judgeAgents(status, agent);

    if (broken > 0) {
      agentOK = false;
      out.leftAlone.push({ kind: 'judge', count: broken });
    }
  }
  const fleetChange = (target, prefix, t) => {
    if (!differs(target.env, prefix, t)) {
      return;
    }
    const name = target.object.replace(/^.*\//, '');

    envOf(prefix, t).forEach((e) => {
      const old = envValue(target.env, e.name);

      if (old === e.value || sameDuration(old, e.value)) {
        return;
      }
      let restarts = `a rollout of ${ name }`;

      if (prefix === FLEET_AGENT) {
        restarts += ', then every fleet-agent (fleet-agentmanagement re-renders every agent)';
        agentRollout = true;
      }
      out.changes.push({
        object: target.object, field: `container ${ target.container } env ${ e.name }`, old, new: e.value, restarts
      });
    });
  };

  if (ctrl && valid(ctrl)) {
    targetsOf(status, 'fleet-controller').forEach((t) => fleetChange(t, CATTLE, ctrl));
  }
  if (agentOK && valid(agent)) {
    targetsOf(status, 'fleet-agent').forEach((t) => fleetChange(t, FLEET_AGENT, agent));
  }

  // planRancherConfig. The status holds the triples as written and
  // whether leasetune leaves the ConfigMap alone with the triples in
  // effect; a key present with an empty value counts as absent here (the
  // status cannot tell the two apart).
  const rc = status.rancherConfig || {};

  if (rc.present && rc.problem) {
    out.leftAlone.push({ kind: 'object', object: rc.object, reason: rc.problem });
  } else if (rc.present) {
    const keep = (written, t) => written && FIELDS.every((f) => {
      const r = parseDuration(f, written[f] ?? '');

      return !r.error && r.ns === t[f];
    });
    const ctrlSet = ctrl && !(sameTimings(ctrl, FLEET_DEFAULTS) && !rc.controller);
    const agentSet = agent && !(sameTimings(agent, FLEET_DEFAULTS) && !rc.agent);

    if ((ctrlSet && !keep(rc.controller, ctrl)) || (agentSet && !keep(rc.agent, agent))) {
      out.changes.push({
        object: rc.object, field: 'data.fleet (leaderElection.*, agent.leaderElection.*)', old: '…', new: '(merged)', restarts: 'nothing now; Rancher\'s next Fleet chart upgrade keeps these values'
      });
    }
  }

  // planRancher
  const rancher = status.rancher || {};
  let rancherLockBefore = 0;
  let rancherLockAfter = 0;

  if (rancher.present) {
    const replicas = rancher.replicas || 0;
    const cost = (t) => (replicas < 1 ? 0 : lockCost(t, replicas - 1));
    const now = timingsOf(rancher.runs) || WRANGLER_DEFAULTS;

    rancherLockBefore = cost(now);
    rancherLockAfter = rancherLockBefore;
    const st = after.rancher;
    const target = targetsOf(status, 'rancher')[0];
    const env = target?.env || [];
    const ref = target?.object || 'Deployment rancher';
    const kind = (p) => (p || '').replace(/:.*$/s, '');
    const restarts = `a rollout of every Rancher replica (${ replicas })`;
    const fixed = ['no-container', 'version-unknown', 'unsupported'];

    if (fixed.includes(kind(rancher.problem))) {
      out.leftAlone.push({ kind: 'object', object: ref, reason: rancher.problem });
    } else if (st && valid(st)) {
      if (kind(rancher.problem) === 'foreign') {
        out.leftAlone.push({ kind: 'object', object: ref, reason: rancher.problem });
      } else {
        const atDefaults = sameTimings(st, WRANGLER_DEFAULTS);
        const held = fromEnv(env, CATTLE);
        const remove = env.length > 0 && atDefaults;
        const write = remove || (!atDefaults && (env.length === 0 || !(held.found && held.ok && sameTimings(held.t, st))));

        if (write && rancher.writeProblem) {
          out.leftAlone.push({ kind: 'object', object: ref, reason: rancher.writeProblem });
        } else if (remove) {
          FIELDS.map((f) => envName(CATTLE, f)).filter((n) => env.some((e) => e.name === n)).forEach((n) => out.changes.push({
            object: ref, field: `container rancher env ${ n }`, old: envValue(env, n), new: '(removed: Rancher\'s built-in 45s/30s/2s)', restarts
          }));
          rancherLockAfter = cost(WRANGLER_DEFAULTS);
        } else if (write) {
          envOf(CATTLE, st).forEach((e) => {
            const old = envValue(env, e.name);

            if (old !== e.value) {
              out.changes.push({
                object: ref, field: `container rancher env ${ e.name }`, old, new: e.value, restarts
              });
            }
          });
          rancherLockAfter = cost(st);
        }
      }
    }
  } else if (after.rancher && !sameTimings(after.rancher, WRANGLER_DEFAULTS)) {
    out.leftAlone.push({ kind: 'noRancher' });
  }

  // planClusters
  let agentLocksAfter = 0;
  let agentLocksBefore = 0;
  let retuned = 0;
  let kept = 0;
  const agentBefore = before['fleet-agent'];

  // Nothing is decided for a cluster while the channel is unknown
  // (evaluation.ClusterOf).
  if (agent && ch) {
    for (const g of (status.agents?.groups || [])) {
      const d = decideGroup(g, agent, ch);

      if (d.elects) {
        agentLocksAfter += g.count * lockCost(d.runs);
      }
      if (hasBefore && agentBefore) {
        const b = decideGroup(g, agentBefore, ch);

        if (b.elects) {
          agentLocksBefore += g.count * lockCost(b.runs);
        }
      }
      if (d.problem) {
        out.leftAlone.push({ kind: 'clusters', count: g.count, problem: d.problem });
      }
      if (d.change) {
        out.clusterChanges.push({ count: g.count, restarts: restartsOf(g), group: g });
        out.clusterChangeCount += g.count;
      }
      if (g.rancherManaged && g.clusterAgentReads && !g.malformed) {
        const entries = d.change ? d.env : (g.entries || []);

        if (entries.some((e) => owns(CATTLE, e.name))) {
          retuned += g.count;
        } else {
          kept += g.count;
        }
      }
    }
  }

  // Totals
  const objects = [...new Set(out.changes.map((c) => c.object))].sort();
  const processes = status.fleet?.processes || 0;
  const ctrlCost = (t) => (t ? processes * lockCost(t) : 0);
  const totals = {
    deploymentRollouts:            objects.filter((o) => o.startsWith('Deployment ')).length,
    fleetAgentRedeploys:           agentRollout ? (status.agents?.clusters || 0) : out.clusterChangeCount,
    clusterAgentRedeploys:         out.clusterChanges.filter((c) => c.group.rancherManaged).reduce((n, c) => n + c.count, 0),
    nodePlanClusters:              out.clusterChanges.filter((c) => c.group.replans).reduce((n, c) => n + c.count, 0),
    controllerLockRequestsPerHour: ctrlCost(ctrl),
    agentLockRequestsPerHour:      agentLocksAfter,
    rancherRollout:                out.changes.some((c) => c.object.startsWith('Deployment ') && c.restarts.includes('Rancher replica')),
    rancherLockRequestsPerHourBefore: rancherLockBefore,
    rancherLockRequestsPerHour:       rancherLockAfter,
    clusterAgentLocksRetuned:         retuned,
    clusterAgentLocksKept:            kept,
  };

  // The locks this Rancher installs that the settings do not reach: the
  // ElectionStatus carries them (pkg/locks, computed by the controller).
  if (rancher.present && (rancher.locksLeftAlone || []).length) {
    totals.locksLeftAlone = rancher.locksLeftAlone;
  }

  if (hasBefore) {
    totals.controllerLockRequestsPerHourBefore = ctrlCost(before['fleet-controller']);
    totals.agentLockRequestsPerHourBefore = agentLocksBefore;
  }
  out.objects = objects;
  out.totals = totals;

  return out;
}
