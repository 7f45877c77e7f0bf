// A status over the cap of groups (pkg/electionstatus MaxGroups): the
// fleet-agent preview says how many clusters it leaves out and where every
// cluster is counted; the other components' previews do not.
import { mount, flushPromises } from '@vue/test-utils';
import LeaderElection from '../pages/LeaderElection.vue';
import golden from '../plan/golden.json';
import { mockStore, setting } from './store';

const AT_DEFAULTS = golden.cases.find((c) => c.name.startsWith('agentmanagement, at the defaults'));

function settingsOf(c) {
  const out = {};

  c.settings.forEach((s) => {
    out[s.name] = setting(s.name, s.value, { source: s.source || '' });
  });

  return out;
}

async function preview(status, component, field, value) {
  const store = mockStore({ settings: settingsOf(AT_DEFAULTS), status });
  const w = mount(LeaderElection, { global: { mocks: { $store: store }, provide: { store } } });

  await flushPromises();
  const c = w.find(`[data-component="${ component }"]`);

  await c.find(`input#${ component }-${ field }`).setValue(value);
  await c.find('button.save').trigger('click');
  await flushPromises();
  expect(c.find('.save-preview').exists()).toBe(true);

  return c;
}

describe('a status with groups beyond its cap', () => {
  const status = JSON.parse(JSON.stringify(AT_DEFAULTS.status));

  status.agents.groupsNotListed = 9003;
  status.agents.clustersNotGrouped = 9003;

  it('the fleet-agent preview says the counts leave those clusters out', async() => {
    const c = await preview(status, 'fleet-agent', 'retryPeriod', '12s');
    const note = c.find('.not-grouped');

    expect(note.exists()).toBe(true);
    expect(note.text()).toContain('9003 cluster(s) in 9003 group(s)');
    expect(note.text()).toContain('leasetune plan --set counts every cluster');
  });

  it('the fleet-controller preview does not', async() => {
    const c = await preview(status, 'fleet-controller', 'retryPeriod', '8s');

    expect(c.find('.not-grouped').exists()).toBe(false);
  });

  it('a status within the cap has no such note', async() => {
    const c = await preview(AT_DEFAULTS.status, 'fleet-agent', 'retryPeriod', '12s');

    expect(c.find('.not-grouped').exists()).toBe(false);
  });
});
