// The two backends: leasetune's server with a bearer token, and Rancher's
// store inside Rancher's UI.
import { directBackend, rancherBackend, ApiError } from '../api/backend';

function fakeFetch(answers) {
  const calls = [];
  const fn = jest.fn(async(url, init) => {
    calls.push({ url, init });
    const [status, body] = answers.shift();

    return {
      ok: status < 300, status, statusText: 'x', json: async() => body
    };
  });

  fn.calls = calls;

  return fn;
}

describe('directBackend', () => {
  it('sends the bearer token and the body, and reads JSON', async() => {
    const f = fakeFetch([[200, { components: [] }], [200, { writes: [] }], [200, { name: 'a' }]]);
    const b = directBackend({ baseURL: 'https://lt', token: 'tok', fetch: f });

    await b.overview();
    await b.plan('fleet-agent', { retryPeriod: '20s' });
    await b.saveSetting('fleet-agent-leader-election-retry-period', '20s');
    expect(f.calls[0].url).toBe('https://lt/leasetune/v1/overview');
    expect(f.calls[0].init.headers.Authorization).toBe('Bearer tok');
    expect(f.calls[1].init.method).toBe('POST');
    expect(JSON.parse(f.calls[1].init.body)).toEqual({ component: 'fleet-agent', values: { retryPeriod: '20s' } });
    expect(f.calls[2].url).toBe('https://lt/v3/settings/fleet-agent-leader-election-retry-period');
    expect(f.calls[2].init.method).toBe('PUT');
    expect(JSON.parse(f.calls[2].init.body)).toEqual({ value: '20s' });
  });

  it('rejects with the server\'s error as it came', async() => {
    const msg = 'fleet-agent-leader-election-retry-period="999ms" refused: retryPeriod 999ms must be at least 1s';
    const b = directBackend({
      token: 't', fetch: fakeFetch([[422, {
        type: 'error', status: 422, code: 'InvalidBodyContent', message: msg, fieldName: 'value'
      }]])
    });
    const e = await b.saveSetting('fleet-agent-leader-election-retry-period', '999ms').catch((x) => x);

    expect(e).toBeInstanceOf(ApiError);
    expect(e.message).toBe(msg);
    expect(e.status).toBe(422);
    expect(e.code).toBe('InvalidBodyContent');
  });

  it('says when the server does not answer', async() => {
    const b = directBackend({
      token: 't',
      fetch: async() => {
        throw new TypeError('Failed to fetch');
      }
    });

    await expect(b.overview()).rejects.toThrow('leasetune\'s server did not answer: Failed to fetch');
  });
});

describe('rancherBackend', () => {
  function fakeStore({ saveError } = {}) {
    const dispatched = [];
    const setting = { value: '10s', save: jest.fn(async() => {
      if (saveError) {
        throw saveError;
      }

      return setting;
    }) };
    const store = {
      dispatched,
      setting,
      dispatch: jest.fn(async(action, arg) => {
        dispatched.push([action, arg]);
        switch (action) {
        case 'management/request':
          if (arg.url === '/v1/uiplugins') {
            return { entries: { leasetune: { metadata: { 'leasetune.io/api-proxy': '/k8s/clusters/local/api/v1/namespaces/lt/services/https:leasetune-webhook:443/proxy' } } } };
          }

          return { ok: true };
        case 'rancher/request':
          return { token: 'token-abc:secret' };
        case 'management/find':
          return setting;
        }
      }),
    };

    return store;
  }

  function memoryStorage() {
    const m = {};

    return { getItem: (k) => m[k] || null, setItem: (k, v) => { m[k] = v; } };
  }

  it('reaches leasetune through Rancher\'s proxy with a Rancher token of the user, made once', async() => {
    const store = fakeStore();
    const b = rancherBackend(store, { storage: memoryStorage() });

    await b.overview();
    await b.clusters();
    const calls = store.dispatched.filter(([a, arg]) => a === 'management/request' && arg.url !== '/v1/uiplugins');

    expect(calls.map(([, arg]) => arg.url)).toEqual([
      '/k8s/clusters/local/api/v1/namespaces/lt/services/https:leasetune-webhook:443/proxy/leasetune/v1/overview',
      '/k8s/clusters/local/api/v1/namespaces/lt/services/https:leasetune-webhook:443/proxy/leasetune/v1/clusters',
    ]);
    expect(calls[0][1].headers['X-Leasetune-Token']).toBe('token-abc:secret');
    const tokens = store.dispatched.filter(([a]) => a === 'rancher/request');

    expect(tokens).toHaveLength(1);
    expect(tokens[0][1].url).toBe('/v3/tokens');
    expect(tokens[0][1].data.ttl).toBe(3600000);
  });

  it('saves a Setting through Rancher\'s store, and passes its refusal on', async() => {
    const store = fakeStore();
    const b = rancherBackend(store, { storage: memoryStorage() });

    await b.saveSetting('fleet-agent-leader-election-retry-period', '20s');
    expect(store.dispatched[0]).toEqual(['management/find', { type: 'management.cattle.io.setting', id: 'fleet-agent-leader-election-retry-period', opt: { force: true } }]);
    expect(store.setting.value).toBe('20s');
    expect(store.setting.save).toHaveBeenCalled();

    const denied = {
      _status: 400, type: 'error', code: 'BadRequest', message: 'admission webhook "settings.leasetune.io" denied the request: retryPeriod 999ms must be at least 1s'
    };
    const b2 = rancherBackend(fakeStore({ saveError: denied }), { storage: memoryStorage() });
    const e = await b2.saveSetting('fleet-agent-leader-election-retry-period', '999ms').catch((x) => x);

    expect(e.message).toBe(denied.message);
    expect(e.status).toBe(400);
  });
});
