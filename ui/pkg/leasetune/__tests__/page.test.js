// The Leader election page's behaviour, mounted with Vue Test Utils over a
// fake backend: it loads, checks values as they are typed with the
// server's rules and messages, shows the server's refusal as it came,
// saves a triple (preview first, then the writes in the planned order),
// and keeps env-sourced settings read-only with the reason.
import { mount, flushPromises } from '@vue/test-utils';
import LeaderElection from '../pages/LeaderElection.vue';
import { fakeBackend, overview } from './fixtures';

beforeAll(() => {
  // jsdom has no canvas: the chart draws nothing, the page works without it.
  HTMLCanvasElement.prototype.getContext = () => null;
});

async function mountPage(backend) {
  const w = mount(LeaderElection, { global: { provide: { leasetuneBackend: backend } } });

  await flushPromises();

  return w;
}

const card = (w, c) => w.find(`[data-component="${ c }"]`);
const input = (w, c, f) => card(w, c).find(`#${ c }-${ f }`);

describe('LeaderElection page', () => {
  it('loads the three triples with units, defaults, values in effect and sources', async() => {
    const b = fakeBackend();
    const w = await mountPage(b);

    expect(b.overview).toHaveBeenCalledTimes(1);
    expect(w.findAll('.triple-card')).toHaveLength(3);
    expect(card(w, 'fleet-controller').find('h2').text()).toBe('Fleet controllers');
    expect(card(w, 'rancher').find('.in-effect').text()).toContain('45s / 30s / 2s');
    expect(input(w, 'fleet-agent', 'retryPeriod').element.value).toBe('10s');
    const row = card(w, 'fleet-agent').find('[data-field="retryPeriod"]');

    expect(row.find('.unit').text()).toContain('duration');
    expect(row.find('.meta').text()).toContain('default 10s');
    expect(row.find('.meta').text()).toContain('in effect 10s');
    expect(row.find('.source').text()).toBe('default');
    expect(b.tradeoff).toHaveBeenCalledWith('fleet-agent', '');
    expect(w.find('.clusters-summary').text()).toContain('2 of 6 fleet Cluster(s) differ');
    expect(w.find('[data-cluster="fleet-default/edge-2"]').text()).toContain('renewDeadline 25s must exceed 1.2 × retryPeriod 30s = 36s');
  });

  it('refuses an invalid value as it is typed, with the server\'s messages', async() => {
    const w = await mountPage(fakeBackend());

    await input(w, 'fleet-agent', 'retryPeriod').setValue('999ms');
    const c = card(w, 'fleet-agent');

    expect(c.find('[data-field="retryPeriod"] .field-errors').text()).toContain('retryPeriod 999ms must be at least 1s');
    expect(input(w, 'fleet-agent', 'retryPeriod').attributes('aria-invalid')).toBe('true');
    expect(c.find('.save').attributes('disabled')).toBeDefined();

    await input(w, 'fleet-agent', 'retryPeriod').setValue('25s');
    expect(c.find('.triple-errors').text()).toContain('renewDeadline 25s must exceed 1.2 × retryPeriod 25s = 30s');
    expect(c.find('.triple-errors').text()).toContain('renewDeadline 25s must be at least 2 × retryPeriod 25s = 50s, so the leader gets a second renewal attempt');

    await input(w, 'fleet-agent', 'retryPeriod').setValue('10');
    expect(c.find('[data-field="retryPeriod"] .field-errors').text()).toBe('retryPeriod "10" is not a duration: time: missing unit in duration "10"');

    await input(w, 'fleet-agent', 'retryPeriod').setValue(' 10s');
    expect(c.find('[data-field="retryPeriod"] .field-errors').text()).toContain('leading or trailing white space or invisible characters are not allowed');
  });

  it('treats an empty field as the default, as a Setting\'s empty value is', async() => {
    const w = await mountPage(fakeBackend());

    await input(w, 'fleet-agent', 'retryPeriod').setValue('');
    expect(card(w, 'fleet-agent').find('.field-errors').exists()).toBe(false);
    expect(card(w, 'fleet-agent').find('.save').attributes('disabled')).toBeDefined(); // nothing changed
  });

  it('shows what a save restarts first, then writes the settings in the planned order', async() => {
    const b = fakeBackend();
    const w = await mountPage(b);
    const c = () => card(w, 'fleet-agent');

    await input(w, 'fleet-agent', 'leaseDuration').setValue('60s');
    await input(w, 'fleet-agent', 'renewDeadline').setValue('50s');
    await input(w, 'fleet-agent', 'retryPeriod').setValue('20s');
    expect(c().find('.live-cost').text()).toContain('Proposed');
    expect(c().find('.live-cost').text()).toContain('requests/h');
    await c().find('.save').trigger('click');
    await flushPromises();

    expect(b.plan).toHaveBeenCalledWith('fleet-agent', { leaseDuration: '60s', renewDeadline: '50s', retryPeriod: '20s' });
    expect(b.saveSetting).not.toHaveBeenCalled();
    const preview = c().find('.save-preview');

    expect(preview.text()).toContain('1 Deployment rollout(s), 6 fleet-agent redeploy(s)');
    expect(preview.find('.changes').text()).toContain('FLEET_AGENT_ELECTION_RETRY_PERIOD');
    await preview.find('.confirm').trigger('click');
    await flushPromises();

    expect(b.calls).toEqual([
      ['fleet-agent-leader-election-lease-duration', '60s'],
      ['fleet-agent-leader-election-renew-deadline', '50s'],
      ['fleet-agent-leader-election-retry-period', '20s'],
    ]);
    expect(b.overview).toHaveBeenCalledTimes(2); // reloaded after the save
  });

  it('shows the server\'s refusal as it came and stops writing', async() => {
    const msg = 'admission webhook "settings.leasetune.io" denied the request: fleet-agent-leader-election-renew-deadline="50s" refused: the agent triple 60s/50s/20s would leave the fleet-agent of 1 cluster(s) with an invalid triple';
    const b = fakeBackend({ refuse: { 'fleet-agent-leader-election-renew-deadline': msg } });
    const w = await mountPage(b);

    await input(w, 'fleet-agent', 'leaseDuration').setValue('60s');
    await input(w, 'fleet-agent', 'renewDeadline').setValue('50s');
    await input(w, 'fleet-agent', 'retryPeriod').setValue('20s');
    await card(w, 'fleet-agent').find('.save').trigger('click');
    await flushPromises();
    await card(w, 'fleet-agent').find('.confirm').trigger('click');
    await flushPromises();

    const err = card(w, 'fleet-agent').find('.server-error');

    expect(err.attributes('role')).toBe('alert');
    expect(err.text()).toContain(msg);
    expect(err.text()).toContain('written before the refusal: fleet-agent-leader-election-lease-duration');
    expect(b.calls.map((c) => c[0])).toEqual(['fleet-agent-leader-election-lease-duration', 'fleet-agent-leader-election-renew-deadline']);
  });

  it('shows a refusal of the plan as it came, writing nothing', async() => {
    const b = fakeBackend({
      planFor: () => {
        throw new Error('no order of the writes is accepted: setting fleet-leader-election-retry-period is set by an env var and read-only');
      }
    });
    const w = await mountPage(b);

    await input(w, 'fleet-controller', 'retryPeriod').setValue('5s');
    await card(w, 'fleet-controller').find('.save').trigger('click');
    await flushPromises();
    expect(card(w, 'fleet-controller').find('.server-error').text()).toContain('no order of the writes is accepted');
    expect(b.saveSetting).not.toHaveBeenCalled();
  });

  it('keeps env-sourced settings read-only and says why', async() => {
    const reason = 'set by the env var CATTLE_RANCHER_LEADER_ELECTION_LEASE_DURATION on leasetune\'s pod (chart value settingsEnv): change or remove it there';
    const ov = overview({
      rancherLease: {
        readOnly: true, source: 'env', resolved: '60s', value: '60s', readOnlyReason: reason
      }
    });
    const w = await mountPage(fakeBackend({ ov }));
    const row = card(w, 'rancher').find('[data-field="leaseDuration"]');

    expect(input(w, 'rancher', 'leaseDuration').attributes('readonly')).toBeDefined();
    expect(input(w, 'rancher', 'leaseDuration').element.value).toBe('60s');
    expect(row.find('.source').text()).toBe('env');
    expect(row.find('.readonly-reason').text()).toBe(`Read-only: ${ reason }`);
    // The other two stay editable.
    expect(input(w, 'rancher', 'retryPeriod').attributes('readonly')).toBeUndefined();
  });

  it('fills in the recommended triple', async() => {
    const w = await mountPage(fakeBackend());

    await card(w, 'fleet-agent').find('.use-recommended').trigger('click');
    expect(input(w, 'fleet-agent', 'leaseDuration').element.value).toBe('32s');
    expect(input(w, 'fleet-agent', 'retryPeriod').element.value).toBe('13s');
  });

  it('says when the settings cannot be read', async() => {
    const b = fakeBackend();

    b.overview = jest.fn(async() => {
      throw new Error('settings.management.cattle.io "fleet-leader-election-lease-duration" is forbidden: User "bob" cannot get resource "settings"');
    });
    const w = await mountPage(b);

    expect(w.find('.load-error').text()).toContain('is forbidden: User "bob"');
  });
});
