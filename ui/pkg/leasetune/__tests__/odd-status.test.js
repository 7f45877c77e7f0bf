// The page given an ElectionStatus it does not expect: an object without
// its status filled in, fields null or missing (the CRD requires none but
// a component's name and a setting's), a Fleet channel, a source and a
// cluster problem a later leasetune might write. It shows
// what it can, never throws, and still previews a save.
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

const odd = {
  'an empty status':         {},
  'null fields':             {
    components: null, fleet: null, rancherConfig: null, rancher: null, agents: null, clusters: null
  },
  'a component without its lists':  { components: [{ component: 'fleet-agent' }] },
  'unknown channel, source and problem': (() => {
    const s = JSON.parse(JSON.stringify(AT_DEFAULTS.status));

    s.fleet.channel = 'some-future-channel';
    s.components[0].settings[0].source = 'some-future-source';
    s.components[1].inEffect = { leaseDuration: '30s' }; // fields missing
    s.clusters = [{ name: 'fleet-default/x', problem: 'some-future-problem', overrides: { someFutureField: '1s' } }, {}];
    s.agents.groups = [{}, { count: 1 }];

    return s;
  })(),
};

let errors;

beforeEach(() => {
  errors = [];
  jest.spyOn(console, 'error').mockImplementation((...a) => errors.push(a.join(' ')));
  jest.spyOn(console, 'warn').mockImplementation((...a) => errors.push(a.join(' ')));
});

afterEach(() => {
  jest.restoreAllMocks();
});

describe.each(Object.entries(odd))('LeaderElection page given %s', (name, status) => {
  it('shows the three triples and previews a save without an error', async() => {
    const store = mockStore({ settings: settingsOf(AT_DEFAULTS), status });
    const w = mount(LeaderElection, { global: { mocks: { $store: store }, provide: { store } } });

    await flushPromises();
    expect(w.findAll('.triple-card')).toHaveLength(3);
    const c = w.find('[data-component="fleet-controller"]');

    await c.find('input#fleet-controller-retryPeriod').setValue('8s');
    await c.find('button.save').trigger('click');
    await flushPromises();
    expect(c.find('.order-error').exists()).toBe(false);
    expect(c.find('.save-preview').exists()).toBe(true);
    expect(errors).toEqual([]);
  });
});
