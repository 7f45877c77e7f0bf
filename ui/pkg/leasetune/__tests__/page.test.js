// The Leader election page, mounted with Vue Test Utils over a stand-in of
// the dashboard's store (./store.js) that fails on any call outside the
// page's contract: what it reads and how (the nine Settings and the
// ElectionStatus, found once and then followed through the store's
// watch), read-only where the schema or the object says so, 401 and 403
// shown and never a logout, the rules as typed, Save's preview computed in
// the browser (equal to the Go plan of the golden cases), the writes in
// order and a refusal shown as it came.
import { mount, flushPromises } from '@vue/test-utils';
import LeaderElection from '../pages/LeaderElection.vue';
import golden from '../plan/golden.json';
import { REGISTRY } from '../plan/registry';
import { SETTING, STATUS, STATUS_ID } from '../api/store';
import {
  mockStore, setting, apiError, t
} from './store';

const FIELDS = ['leaseDuration', 'renewDeadline', 'retryPeriod'];
const caseNamed = (prefix) => golden.cases.find((c) => c.name.startsWith(prefix));
const AT_DEFAULTS = caseNamed('agentmanagement, at the defaults');

// settingsOf are a golden case's Setting objects as steve serves them.
function settingsOf(c, extra = {}) {
  const out = {};

  c.settings.forEach((s) => {
    out[s.name] = setting(s.name, s.value, { source: s.source || '', ...(extra[s.name] || {}) });
  });

  return out;
}

async function mountPage(store) {
  const w = mount(LeaderElection, { global: { mocks: { $store: store }, provide: { store } } });

  await flushPromises();

  return w;
}

const card = (w, c) => w.find(`[data-component="${ c }"]`);
const input = (w, c, f) => card(w, c).find(`input#${ c }-${ f }`);

// Every dispatch is one of the contract's, and carries redirectUnauthorized: false.
function expectContract(store) {
  expect(store.unknown).toEqual([]);
  store.dispatch.mock.calls.forEach(([action, payload]) => {
    if (action === 'management/find') {
      expect(payload.opt).toEqual(expect.objectContaining({ redirectUnauthorized: false }));
      expect([SETTING, STATUS]).toContain(payload.type);
    } else {
      expect(action).toBe('management/request');
      expect(payload.redirectUnauthorized).toBe(false);
    }
  });
}

let fetchSpy;

beforeEach(() => {
  // No request of its own: fetch and XMLHttpRequest are not to be used.
  fetchSpy = jest.fn(() => {
    throw new Error('the page called fetch');
  });
  global.fetch = fetchSpy;
  jest.spyOn(global, 'XMLHttpRequest').mockImplementation(() => {
    throw new Error('the page made an XMLHttpRequest');
  });
});

afterEach(() => {
  expect(fetchSpy).not.toHaveBeenCalled();
  jest.restoreAllMocks();
});

describe('LeaderElection page: its reads', () => {
  it('finds the nine Settings and the ElectionStatus once, through the store, and shows the three triples', async() => {
    const store = mockStore({ settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status });
    const w = await mountPage(store);

    expect(store.dispatch.mock.calls).toEqual([
      ...REGISTRY.map((d) => ['management/find', { type: SETTING, id: d.name, opt: { redirectUnauthorized: false } }]),
      ['management/find', { type: STATUS, id: STATUS_ID, opt: { redirectUnauthorized: false } }],
    ]);
    expectContract(store);
    expect(w.findAll('.triple-card')).toHaveLength(3);
    expect(card(w, 'fleet-controller').find('h2').text()).toBe('Fleet controllers');
    expect(card(w, 'rancher').find('.in-effect').text()).toBe('In effect: 45s / 30s / 2s');
    expect(input(w, 'fleet-agent', 'retryPeriod').element.value).toBe('10s');
    const row = card(w, 'fleet-agent').find('[data-field="retryPeriod"]');

    expect(row.find('.unit').text()).toContain('A duration');
    expect(row.find('.meta').text()).toContain('Default 10s · in effect 10s · value 10s from');
    expect(row.find('.source').text()).toBe('default');
    expect(w.find('.channel').text()).toContain('Fleet agent channel: agentmanagement');
    expect(card(w, 'fleet-agent').find('.tradeoff-summary').text()).toContain('4 fleet Clusters (one fleet-agent lock each)');
    expect(w.find('.clusters-summary').text()).toContain('of 4 fleet Cluster(s) listed');
    expect(w.find('.read-only-banner').exists()).toBe(false);
  });

  it('follows the status through the store\'s watch, with no polling', async() => {
    jest.useFakeTimers();
    const store = mockStore({ settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status });
    const w = await mountPage(store);
    const calls = store.dispatch.mock.calls.length;

    jest.advanceTimersByTime(60000);
    await flushPromises();
    expect(store.dispatch.mock.calls.length).toBe(calls); // no timer reads again
    expect(card(w, 'fleet-agent').find('.pending').exists()).toBe(false);

    // The leader rewrites the object: the store's watch brings it.
    const next = JSON.parse(JSON.stringify(AT_DEFAULTS.status));
    const agent = next.components.find((c) => c.component === 'fleet-agent');

    agent.pending = { leaseDuration: '1m0s', renewDeadline: '50s', retryPeriod: '20s' };
    agent.settlesAt = '2026-01-02T03:04:05Z';
    store.watchEvent(next);
    await flushPromises();
    expect(card(w, 'fleet-agent').find('.pending').text()).toContain('Pending: 1m0s / 50s / 20s takes effect once the three settings have been unchanged for the settle time');
    expect(store.dispatch.mock.calls.length).toBe(calls);
    jest.useRealTimers();
  });

  it.each([401, 403])('shows a %d of a find and never logs the user out', async(code) => {
    const msg = code === 401 ? 'must authenticate' : 'settings.management.cattle.io "fleet-leader-election-lease-duration" is forbidden: User "bob" cannot get resource "settings"';
    const store = mockStore({
      settings: settingsOf(AT_DEFAULTS),
      status:   AT_DEFAULTS.status,
      findErrors: { 'fleet-leader-election-lease-duration': apiError(code, msg), [STATUS_ID]: apiError(code, `electionstatuses "leasetune": ${ msg }`) },
    });
    const w = await mountPage(store);

    expectContract(store);
    expect(store.dispatch.mock.calls.map((c) => c[0])).not.toContain('auth/logout');
    expect(w.find('.setting-error').text()).toBe(`The Setting fleet-leader-election-lease-duration could not be read: ${ msg }`);
    expect(w.find('.status-error').text()).toContain(msg);
    expect(card(w, 'fleet-controller').find('[data-field="leaseDuration"] .readonly-reason').text()).toBe('Read-only: the Setting could not be read');
    expect(input(w, 'fleet-controller', 'leaseDuration').attributes('disabled')).toBeDefined();
    expect(card(w, 'fleet-controller').find('.in-effect').text()).toBe('In effect: not known (leasetune\'s status could not be read)');
  });

  it('says when the user may not read the status', async() => {
    const store = mockStore({
      settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status, findErrors: { [STATUS_ID]: new Error('Unknown schema for type: leasetune.io.electionstatus') }
    });
    const w = await mountPage(store);

    expect(w.find('.status-error').text()).toContain('Your role does not let you read what leasetune knows of the installation (Rancher shows you no type leasetune.io.electionstatus');
    expect(card(w, 'fleet-agent').find('.tradeoff').exists()).toBe(false);
    expect(w.find('.clusters-unknown').exists()).toBe(true);
  });

  it('says when leasetune has not published its status yet', async() => {
    const store = mockStore({ settings: settingsOf(AT_DEFAULTS), status: null });
    const w = await mountPage(store);

    expect(w.find('.status-error').text()).toContain('there is no ElectionStatus object leasetune');
    expect(input(w, 'fleet-agent', 'retryPeriod').attributes('disabled')).toBeUndefined();
  });
});

describe('LeaderElection page: read-only', () => {
  it('is read-only where the schema has no PUT: inputs disabled, no Save, the reason shown', async() => {
    const store = mockStore({ schema: { id: SETTING, resourceMethods: ['GET'] }, settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status });
    const w = await mountPage(store);

    expect(w.find('.read-only-banner').text()).toContain('You can see these settings but not change them: your role does not allow updating Settings');
    w.findAll('.triple-card').forEach((c) => {
      expect(c.find('.save').exists()).toBe(false);
      expect(c.findAll('input.duration-input, .duration-input input').length).toBe(3);
      c.findAll('.duration-input input, input.duration-input').forEach((i) => expect(i.attributes('disabled')).toBeDefined());
    });
    expectContract(store);
  });

  it('keeps a Setting without an update link read-only, saying why', async() => {
    const store = mockStore({
      settings: settingsOf(AT_DEFAULTS, { 'fleet-agent-leader-election-retry-period': { noUpdate: true } }),
      status:   AT_DEFAULTS.status,
    });
    const w = await mountPage(store);
    const row = card(w, 'fleet-agent').find('[data-field="retryPeriod"]');

    expect(input(w, 'fleet-agent', 'retryPeriod').attributes('disabled')).toBeDefined();
    expect(row.find('.readonly-reason').text()).toBe('Read-only: your role does not allow updating this Setting (Rancher gives it no update link)');
    expect(input(w, 'fleet-agent', 'leaseDuration').attributes('disabled')).toBeUndefined();
    expect(card(w, 'fleet-agent').find('.save').exists()).toBe(true);
  });

  it('keeps env-sourced settings read-only with the status\' reason', async() => {
    const c = caseNamed('no Fleet');
    const store = mockStore({ settings: settingsOf(c), status: c.status });
    const w = await mountPage(store);
    const st = c.status.components[0].settings[2];
    const row = card(w, 'fleet-controller').find('[data-field="retryPeriod"]');

    expect(st.readOnly).toBe(true);
    expect(input(w, 'fleet-controller', 'retryPeriod').attributes('disabled')).toBeDefined();
    expect(input(w, 'fleet-controller', 'retryPeriod').element.value).toBe('15s');
    expect(row.find('.source').text()).toBe('env');
    expect(row.find('.readonly-reason').text()).toBe(`Read-only: ${ st.readOnlyReason }`);
    expect(input(w, 'fleet-controller', 'leaseDuration').attributes('disabled')).toBeUndefined();
    // The missing Setting: its remembered value is shown, it cannot be written.
    const missing = card(w, 'fleet-agent').find('[data-field="leaseDuration"]');

    expect(input(w, 'fleet-agent', 'leaseDuration').element.value).toBe('45s');
    expect(missing.find('.source').text()).toBe('user: leasetune\'s record of your value, while the Setting object is missing');
    expect(missing.find('.readonly-reason').text()).toBe('Read-only: the Setting object is not there (leasetune creates it again)');
    expect(card(w, 'fleet-controller').find('.refused').text()).toContain('The settings as they are now are refused');
  });
});

describe('LeaderElection page: typing and saving', () => {
  it('checks values as they are typed, with the server\'s rules and messages', async() => {
    const w = await mountPage(mockStore({ settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status }));
    const c = () => card(w, 'fleet-agent');

    await input(w, 'fleet-agent', 'retryPeriod').setValue('999ms');
    expect(c().find('[data-field="retryPeriod"] .field-errors').text()).toContain('retryPeriod 999ms must be at least 1s');
    expect(input(w, 'fleet-agent', 'retryPeriod').attributes('aria-invalid')).toBe('true');
    expect(c().find('.save').attributes('disabled')).toBeDefined();

    await input(w, 'fleet-agent', 'retryPeriod').setValue('25s');
    expect(c().find('.triple-errors').text()).toContain('renewDeadline 25s must exceed 1.2 × retryPeriod 25s = 30s');

    await input(w, 'fleet-agent', 'retryPeriod').setValue('10');
    expect(c().find('[data-field="retryPeriod"] .field-errors').text()).toBe('retryPeriod "10" is not a duration: time: missing unit in duration "10"');

    await input(w, 'fleet-agent', 'retryPeriod').setValue('');
    expect(c().find('.field-errors').exists()).toBe(false);
    expect(c().find('.save').attributes('disabled')).toBeDefined(); // empty is the default: nothing changed
  });

  it('shows first what a save writes and restarts, then writes the Settings one at a time in that order', async() => {
    const store = mockStore({ settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status });
    const w = await mountPage(store);
    const c = () => card(w, 'fleet-agent');
    const reads = store.dispatch.mock.calls.length;

    await input(w, 'fleet-agent', 'leaseDuration').setValue('60s');
    await input(w, 'fleet-agent', 'renewDeadline').setValue('50s');
    await input(w, 'fleet-agent', 'retryPeriod').setValue('20s');
    expect(c().find('.live-cost').text()).toMatch(/^Proposed: 720 requests\/h for 4 fleet Clusters/);
    await c().find('.save').trigger('click');
    await flushPromises();

    expect(store.dispatch.mock.calls.length).toBe(reads); // the preview is computed here, nothing is read or written
    const preview = c().find('.save-preview');

    expect(preview.findAll('.write-order li').map((li) => li.text())).toEqual([
      'fleet-agent-leader-election-lease-duration=60s', 'fleet-agent-leader-election-renew-deadline=50s', 'fleet-agent-leader-election-retry-period=20s',
    ]);
    expect(preview.find('.if-refused').text()).toContain('If a step is refused, the page stops there');
    expect(preview.find('.totals').text()).toBe('Restarts: 1 Deployment rollout(s), 4 fleet-agent redeploy(s), 0 cattle-cluster-agent redeploy(s), 0 cluster(s) whose nodes are re-planned.');
    expect(preview.find('.changes').text()).toContain('FLEET_AGENT_ELECTION_RETRY_PERIOD');
    await preview.find('.confirm').trigger('click');
    await flushPromises();

    const puts = store.dispatch.mock.calls.slice(reads);

    expect(puts.map(([action, p]) => [action, p.method, p.url, p.data.value, p.data.metadata.name, p.redirectUnauthorized])).toEqual([
      ['management/request', 'PUT', '/v1/management.cattle.io.settings/fleet-agent-leader-election-lease-duration', '60s', 'fleet-agent-leader-election-lease-duration', false],
      ['management/request', 'PUT', '/v1/management.cattle.io.settings/fleet-agent-leader-election-renew-deadline', '50s', 'fleet-agent-leader-election-renew-deadline', false],
      ['management/request', 'PUT', '/v1/management.cattle.io.settings/fleet-agent-leader-election-retry-period', '20s', 'fleet-agent-leader-election-retry-period', false],
    ]);
    // The object as read, its value changed (its resourceVersion with it).
    expect(puts[0][1].data).toEqual({ ...setting('fleet-agent-leader-election-lease-duration'), value: '60s' });
    expect(c().find('.saved').text()).toContain('1m0s / 50s / 20s takes effect once the settings have been unchanged for the settle time');
    expectContract(store);
  });

  it('writes the Settings as they were when the preview was made: one changed since is refused, not overwritten', async() => {
    const store = mockStore({ settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status });
    const w = await mountPage(store);
    const c = () => card(w, 'fleet-agent');
    const name = 'fleet-agent-leader-election-retry-period';

    await input(w, 'fleet-agent', 'retryPeriod').setValue('8s');
    await c().find('.save').trigger('click');
    await flushPromises();
    const reads = store.dispatch.mock.calls.length;

    // Someone else saves the same Setting while the preview is shown: the
    // store's watch brings the object with its new resourceVersion.
    store.held.settings[name] = { ...store.held.settings[name], value: '12s', metadata: { name, resourceVersion: '101' } };
    await flushPromises();
    await c().find('.save-preview .confirm').trigger('click');
    await flushPromises();

    const puts = store.dispatch.mock.calls.slice(reads);

    expect(puts.map(([, p]) => [p.url, p.data.value])).toEqual([[`/v1/management.cattle.io.settings/${ name }`, '8s']]);
    // The resourceVersion the preview was made from: the kube-apiserver
    // answers 409 Conflict rather than overwrite the other save.
    expect(puts[0][1].data.metadata.resourceVersion).toBe('100');
    expectContract(store);
  });

  it('saves again before the store shows its own save: on the saved objects, not a conflict with itself', async() => {
    // Found beside the real Rancher: a second save 0.6 s after the first
    // was refused as "the object has been modified" (409), the store's
    // watch not having brought the first save's objects yet.
    const store = mockStore({ settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status, watchLag: true });
    const w = await mountPage(store);
    const c = () => card(w, 'fleet-agent');
    const saveTriple = async(ld, rd, rp) => {
      await input(w, 'fleet-agent', 'leaseDuration').setValue(ld);
      await input(w, 'fleet-agent', 'renewDeadline').setValue(rd);
      await input(w, 'fleet-agent', 'retryPeriod').setValue(rp);
      await c().find('.save').trigger('click');
      await flushPromises();
      await c().find('.save-preview .confirm').trigger('click');
      await flushPromises();
    };

    await saveTriple('60s', '50s', '20s');
    expect(c().find('.saved').exists()).toBe(true);
    const first = store.dispatch.mock.calls.filter(([a]) => a === 'management/request').length;

    await saveTriple('40s', '30s', '10s');
    const puts = store.dispatch.mock.calls.filter(([a]) => a === 'management/request').slice(first);

    expect(c().find('.server-error').exists()).toBe(false);
    expect(puts.length).toBeGreaterThan(0);
    for (const [, p] of puts) {
      expect(p.data.metadata.resourceVersion).toBe('101');
    }
    expect(c().find('.saved').text()).toContain('40s / 30s / 10s');
    expectContract(store);
  });

  it('shows the webhook\'s refusal as it came, stops writing and says what was written', async() => {
    const msg = 'admission webhook "settings.leasetune.io" denied the request: fleet-agent-leader-election-renew-deadline="50s" refused: the agent triple would leave the fleet-agent of 1 cluster(s) with an invalid triple';
    const store = mockStore({
      settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status, putErrors: { 'fleet-agent-leader-election-renew-deadline': apiError(400, msg, 'BadRequest') }
    });
    const w = await mountPage(store);

    await input(w, 'fleet-agent', 'leaseDuration').setValue('60s');
    await input(w, 'fleet-agent', 'renewDeadline').setValue('50s');
    await input(w, 'fleet-agent', 'retryPeriod').setValue('20s');
    await card(w, 'fleet-agent').find('.save').trigger('click');
    await card(w, 'fleet-agent').find('.confirm').trigger('click');
    await flushPromises();

    const err = card(w, 'fleet-agent').find('.server-error');

    expect(err.attributes('role')).toBe('alert');
    expect(err.text()).toContain(`The change was refused: ${ msg }`);
    expect(err.find('.written').text()).toContain('Written before the refusal: fleet-agent-leader-election-lease-duration. They stay written and make a valid triple');
    expect(store.dispatch.mock.calls.filter((c) => c[0] === 'management/request').map((c) => c[1].data.metadata.name)).toEqual([
      'fleet-agent-leader-election-lease-duration', 'fleet-agent-leader-election-renew-deadline',
    ]);
  });

  it.each([401, 403])('shows a %d of a save and never logs the user out', async(code) => {
    const msg = code === 401 ? 'Unauthorized 401: must authenticate' : 'settings.management.cattle.io "fleet-leader-election-retry-period" is forbidden: User "bob" cannot update resource "settings"';
    const store = mockStore({ settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status, putErrors: { 'fleet-leader-election-retry-period': apiError(code, msg) } });
    const w = await mountPage(store);

    await input(w, 'fleet-controller', 'retryPeriod').setValue('12s');
    await card(w, 'fleet-controller').find('.save').trigger('click');
    await card(w, 'fleet-controller').find('.confirm').trigger('click');
    await flushPromises();

    expect(card(w, 'fleet-controller').find('.server-error').text()).toContain(msg);
    expect(card(w, 'fleet-controller').find('.written').text()).toBe('Nothing was written.');
    expectContract(store);
    expect(store.dispatch.mock.calls.map((c) => c[0])).not.toContain('auth/logout');
  });

  it('writes around a setting an env var sets: only the others are written', async() => {
    const c = caseNamed('no Fleet');
    const store = mockStore({ settings: settingsOf(c), status: c.status });
    const w = await mountPage(store);
    const reads = store.dispatch.mock.calls.length;

    // The env-set retry period (15s) is read-only and stays as it is.
    await input(w, 'fleet-controller', 'leaseDuration').setValue('60s');
    await input(w, 'fleet-controller', 'renewDeadline').setValue('50s');
    await card(w, 'fleet-controller').find('.save').trigger('click');
    await flushPromises();
    expect(card(w, 'fleet-controller').findAll('.write-order li').map((li) => li.text())).toEqual([
      'fleet-leader-election-lease-duration=60s', 'fleet-leader-election-renew-deadline=50s',
    ]);
    expect(store.dispatch.mock.calls.length).toBe(reads);
  });

  it('says what a change leaves alone, and why', async() => {
    const c = caseNamed('agentmanagement, settings pending');
    const w = await mountPage(mockStore({ settings: settingsOf(c), status: c.status }));

    // rke2-1's fleet Cluster carries CATTLE_ELECTION_LEASE_DURATION=55s of its own: with a
    // renew deadline of 1m its agent would run an invalid triple.
    await input(w, 'fleet-agent', 'leaseDuration').setValue('1m30s');
    await input(w, 'fleet-agent', 'renewDeadline').setValue('1m');
    await card(w, 'fleet-agent').find('.save').trigger('click');
    const left = card(w, 'fleet-agent').findAll('.left-alone').map((p) => p.text());

    expect(left).toContain('Left alone: fleet-agentmanagement\'s FLEET_AGENT_ELECTION_*: this agent triple would leave the fleet-agent of 1 cluster(s) with an invalid triple (their own CATTLE_ELECTION_* entries mix with it), so the agents keep theirs');
    expect(left).toContain('Left alone: 1 cluster(s), left alone: someone else\'s CATTLE_ELECTION_* entries');
    expect(card(w, 'fleet-agent').find('.totals').text()).toContain('0 fleet-agent redeploy(s)');
  });

  it('fills in recommend\'s triple for the failover target', async() => {
    const w = await mountPage(mockStore({ settings: settingsOf(AT_DEFAULTS), status: AT_DEFAULTS.status }));
    const c = card(w, 'fleet-agent');

    expect(c.find('.recommendation').text()).toContain('Cheapest valid triple within 1m30s: 32s / 31s / 13s');
    await c.find('.target-input').setValue('2m');
    await c.find('.recommend').trigger('click');
    expect(c.find('.recommendation').text()).toContain('Cheapest valid triple within 2m0s: 40s / 39s / 18s');
    await c.find('.use-recommended').trigger('click');
    expect(input(w, 'fleet-agent', 'leaseDuration').element.value).toBe('40s');
    expect(input(w, 'fleet-agent', 'retryPeriod').element.value).toBe('18s');
  });
});

// The page's plan for a typed triple is the Go plan of the same
// installation: for each golden installation, the first proposal of each
// component that writes something, typed into the page.
const pagePlans = golden.cases.flatMap((c) => ['fleet-controller', 'fleet-agent', 'rancher'].map((comp) => {
  // The page writes only Settings that are there (a missing one is read-only until leasetune creates it again).
  const writable = (x) => x.writes.every((w) => c.settings.some((s) => s.name === w.name));
  const p = c.proposals.find((x) => x.component === comp && x.plan && x.writes.length && writable(x) && FIELDS.every((f) => x.values[f] !== ''));

  return p ? [c.name, comp, c, p] : null;
}).filter(Boolean));

describe('LeaderElection page: its plan is `leasetune plan --set` of the golden cases', () => {
  it.each(pagePlans)('%s: %s', async(name, comp, c, p) => {
    const store = mockStore({ settings: settingsOf(c), status: c.status });
    const w = await mountPage(store);

    for (const f of FIELDS) {
      if (input(w, comp, f).attributes('disabled') === undefined) {
        await input(w, comp, f).setValue(p.values[f]);
      }
    }
    await card(w, comp).find('.save').trigger('click');
    await flushPromises();
    const preview = card(w, comp).find('.save-preview');
    const tot = p.plan.totals;

    expect(preview.findAll('.write-order li').map((li) => li.text())).toEqual(p.writes.map((x) => `${ x.name }=${ x.value || '(default)' }`));
    expect(preview.find('.totals').text()).toBe(t('leasetune.preview.restarts', {
      rollouts: tot.deploymentRollouts, agents: tot.fleetAgentRedeploys, clusterAgents: tot.clusterAgentRedeploys, nodes: tot.nodePlanClusters
    }));
    const objects = preview.findAll('.changes tbody tr:not(.cluster-change) td:first-child').map((td) => td.text());

    expect([...new Set(objects)].sort()).toEqual(p.plan.objects);
    const clusters = preview.findAll('.changes .cluster-change td:first-child').map((td) => Number(td.text().replace(/ .*/, '')));

    expect(clusters.reduce((a, b) => a + b, 0)).toBe(p.plan.clusterChanges);
    expectContract(store);
  });
});
