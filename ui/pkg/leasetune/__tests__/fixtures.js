// Answers of leasetune's API as pkg/uiapi shapes them (the browser test
// checks the real ones), for the component tests.
export function setting(name, field, def, extra = {}) {
  return {
    name, field, description: `the ${ field }`, default: def, value: '', exists: true, resolved: def, source: 'default', readOnly: false, envVar: `CATTLE_${ name.toUpperCase().replace(/-/g, '_') }`, ...extra
  };
}

export function overview({ agentRetry = {}, rancherLease = {} } = {}) {
  const comp = (component, title, prefix, [l, r, t], over = {}) => ({
    component,
    title,
    restarts:     `restarts ${ component }`,
    inEffect:     { leaseDuration: l, renewDeadline: r, retryPeriod: t },
    inEffectFrom: 'record',
    pending:      null,
    settings:     [
      setting(`${ prefix }-leader-election-lease-duration`, 'leaseDuration', l, over.leaseDuration),
      setting(`${ prefix }-leader-election-renew-deadline`, 'renewDeadline', r, over.renewDeadline),
      setting(`${ prefix }-leader-election-retry-period`, 'retryPeriod', t, over.retryPeriod),
    ],
  });

  return {
    components: [
      comp('fleet-controller', 'Fleet controllers', 'fleet', ['30s', '25s', '10s']),
      comp('fleet-agent', 'Fleet agents', 'fleet-agent', ['30s', '25s', '10s'], { retryPeriod: agentRetry }),
      comp('rancher', 'Rancher server', 'rancher', ['45s', '30s', '2s'], { leaseDuration: rancherLease }),
    ],
    channel:        'agentmanagement',
    channelExplain: 'Fleet v0.13+',
    notes:          [],
  };
}

export function tradeoff(component) {
  return {
    component,
    locks:     { count: 6, followers: 0, what: '6 fleet Clusters (one fleet-agent lock each)' },
    behaviour: 'client-go < v0.30 (leader gets and updates)',
    curve:     [1, 2, 5, 10, 20].map((r) => ({
      triple: { leaseDuration: `${ 2 * r + 1 }s`, renewDeadline: `${ 2 * r }s`, retryPeriod: `${ r }s` }, retryPeriodSeconds: r, requestsPerHour: 6 * 7200 / r, failoverSeconds: 2 * r + 1 + 4.4 * r, failover: 'x'
    })),
    current: {
      triple: { leaseDuration: '30s', renewDeadline: '25s', retryPeriod: '10s' }, retryPeriodSeconds: 10, requestsPerHour: 4320, failoverSeconds: 74, failover: '1m14s'
    },
    maxFailover: '1m30s',
    recommended: {
      triple: { leaseDuration: '32s', renewDeadline: '31s', retryPeriod: '13s' }, retryPeriodSeconds: 13, requestsPerHour: 3323, failoverSeconds: 89.2, failover: '1m29.2s'
    },
  };
}

export const clusters = {
  global:    { leaseDuration: '30s', renewDeadline: '25s', retryPeriod: '10s' },
  channel:   'cluster-env-v0.9',
  total:     6,
  differing: 2,
  truncated: false,
  notes:     [],
  clusters:  [
    {
      cluster: 'fleet-default/edge-1', source: 'clusters.fleet.cattle.io fleet-default/edge-1', overrides: { retryPeriod: '20s' }, effective: { leaseDuration: '50s', renewDeadline: '45s', retryPeriod: '20s' }, runs: { leaseDuration: '50s', renewDeadline: '45s', retryPeriod: '20s' }, elects: true, ignored: []
    },
    {
      cluster: 'fleet-default/edge-2', source: 'clusters.fleet.cattle.io fleet-default/edge-2', overrides: { retryPeriod: '30s' }, effective: null, runs: null, elects: false, problem: 'invalid', reason: 'renewDeadline 25s must exceed 1.2 × retryPeriod 30s = 36s', status: 'invalid override', ignored: []
    },
  ],
};

// fakeBackend records calls; refuse maps a setting name to the message the
// server refuses it with.
export function fakeBackend({ ov = overview(), refuse = {}, planFor } = {}) {
  const calls = [];

  return {
    calls,
    overview: jest.fn(async() => ov),
    tradeoff: jest.fn(async(c) => tradeoff(c)),
    clusters: jest.fn(async() => clusters),
    plan:     jest.fn(async(component, values) => (planFor ? planFor(component, values) : {
      component,
      writes:    ov.components.find((c) => c.component === component).settings
        .filter((s) => values[s.field] !== s.resolved).map((s) => ({ name: s.name, value: values[s.field] })),
      before:    { leaseDuration: '30s', renewDeadline: '25s', retryPeriod: '10s' },
      after:     values,
      changes:   [{
        object: 'Deployment cattle-fleet-system/fleet-controller', field: 'container fleet-agentmanagement env FLEET_AGENT_ELECTION_RETRY_PERIOD', old: '10s', new: values.retryPeriod, restarts: 'a rollout of fleet-controller, then every fleet-agent'
      }],
      totals: {
        deploymentRollouts: 1, fleetAgentRedeploys: 6, clusterAgentRedeploys: 0, nodePlanClusters: 0, controllerLockRequestsPerHour: 3600, agentLockRequestsPerHour: 2160, agentLockRequestsPerHourBefore: 4320, rancherLockRequestsPerHour: 0, rancherLockRequestsPerHourBefore: 0
      },
      leftAlone: [],
    })),
    saveSetting: jest.fn(async(name, value) => {
      calls.push([name, value]);
      if (refuse[name]) {
        const e = new Error(refuse[name]);

        e.status = 422;
        throw e;
      }

      return { name, value };
    }),
  };
}
