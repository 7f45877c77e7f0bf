// Where the page's data comes from and where its writes go.
//
// A backend has five methods, each returning a promise:
//   overview()                    GET  /leasetune/v1/overview
//   tradeoff(component, maxFailover) GET /leasetune/v1/tradeoff
//   clusters()                    GET  /leasetune/v1/clusters
//   plan(component, values)       POST /leasetune/v1/plan
//   saveSetting(name, value)      the Setting's value, through an API that
//                                 the admission webhook guards
// and rejects with an ApiError { status, code, message, fieldName } that
// carries the server's message as it came.
//
// directBackend talks to leasetune's own HTTPS server (pkg/uiapi and the
// Rancher-compatible pkg/settingsapi) with a Kubernetes bearer token:
// installations without Rancher, and the browser test's host page.
// rancherBackend is the one inside Rancher's UI: Settings through Rancher's
// own store (Steve; the webhook's refusal comes back through Rancher), and
// leasetune's API through Rancher's proxy of the local cluster to the
// leasetune-webhook Service, with a short-lived Rancher token of the user
// in X-Leasetune-Token (Rancher's proxy consumes Authorization), which
// leasetune uses against Rancher's /k8s/clusters/local (--ui-api-upstream):
// Rancher, and Kubernetes RBAC behind it, decide what the user may read.

export class ApiError extends Error {
  constructor({
    status = 0, code = '', message = '', fieldName = ''
  }) {
    super(message || `request failed (${ status || 'no answer' })`);
    this.status = status;
    this.code = code;
    this.fieldName = fieldName;
  }
}

async function asApiError(res) {
  let body = {};

  try {
    body = await res.json();
  } catch (e) {
    body = { message: `${ res.status } ${ res.statusText }` };
  }

  return new ApiError({
    status: res.status, code: body.code, message: body.message, fieldName: body.fieldName
  });
}

/**
 * directBackend({ baseURL, token, fetch }): leasetune's server at baseURL
 * ('' for the page's own origin), with the bearer token.
 */
export function directBackend({ baseURL = '', token, fetch: fetchFn = globalThis.fetch.bind(globalThis) }) {
  async function call(method, path, body) {
    const headers = { Accept: 'application/json', Authorization: `Bearer ${ token }` };

    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
    }
    let res;

    try {
      res = await fetchFn(`${ baseURL }${ path }`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (e) {
      throw new ApiError({ message: `leasetune's server did not answer: ${ e.message }` });
    }
    if (!res.ok) {
      throw await asApiError(res);
    }

    return res.json();
  }

  return {
    kind:        'leasetune',
    overview:    () => call('GET', '/leasetune/v1/overview'),
    clusters:    () => call('GET', '/leasetune/v1/clusters'),
    tradeoff:    (component, maxFailover) => call('GET', `/leasetune/v1/tradeoff?component=${ encodeURIComponent(component) }&maxFailover=${ encodeURIComponent(maxFailover || '') }`),
    plan:        (component, values) => call('POST', '/leasetune/v1/plan', { component, values }),
    saveSetting: (name, value) => call('PUT', `/v3/settings/${ encodeURIComponent(name) }`, { value }),
  };
}

// The Rancher Setting type and the UIPlugin index (rancher/dashboard
// shell/config/types.js MANAGEMENT.SETTING; shell/config/uiplugins.js
// UI_PLUGIN_BASE_URL at shell-pkg-v3.0.8).
const SETTING_TYPE = 'management.cattle.io.setting';
const PLUGIN_INDEX = '/v1/uiplugins';
const TOKEN_KEY = 'leasetune.page-token';
const TOKEN_TTL_MS = 60 * 60 * 1000;

// storeError is the message Rancher's store rejects with (a Steve or
// norman error object, or an Error).
function storeError(e) {
  const d = e?.data || e;

  return new ApiError({
    status:    e?._status || e?.status || d?.status || 0,
    code:      d?.code || '',
    message:   d?.message || e?.message || String(e),
    fieldName: d?.fieldName || '',
  });
}

/**
 * rancherBackend(store, { name }): inside Rancher's UI, with its Vuex store.
 * name is the extension's name ('leasetune'), whose UIPlugin metadata
 * (leasetune.io/api-proxy) says where leasetune's API is behind Rancher.
 */
export function rancherBackend(store, { name = 'leasetune', storage = globalThis.sessionStorage } = {}) {
  let proxy;

  async function apiBase() {
    if (!proxy) {
      const idx = await store.dispatch('management/request', { url: PLUGIN_INDEX, method: 'GET', headers: { accept: 'application/json' } });
      const entry = (idx?.entries || idx?.Entries || {})[name];

      proxy = entry?.metadata?.['leasetune.io/api-proxy'];
      if (!proxy) {
        throw new ApiError({ message: `the UIPlugin ${ name } names no leasetune.io/api-proxy: is leasetune's Service reachable, and its UIPlugin current?` });
      }
    }

    return proxy;
  }

  // token is a Rancher API token of the current user, made for this page
  // and kept for the browser session until it expires.
  async function token() {
    try {
      const kept = JSON.parse(storage?.getItem(TOKEN_KEY) || 'null');

      if (kept && kept.expires > Date.now() + 60000) {
        return kept.token;
      }
    } catch (e) {}
    let made;

    try {
      made = await store.dispatch('rancher/request', {
        url:    '/v3/tokens',
        method: 'post',
        data:   {
          type: 'token', description: 'leasetune: the Leader election page reads with this (expires in 1h)', ttl: TOKEN_TTL_MS
        },
      });
    } catch (e) {
      throw storeError(e);
    }
    storage?.setItem(TOKEN_KEY, JSON.stringify({ token: made.token, expires: Date.now() + TOKEN_TTL_MS }));

    return made.token;
  }

  async function call(method, path, data) {
    const [base, tok] = await Promise.all([apiBase(), token()]);

    try {
      return await store.dispatch('management/request', {
        url: `${ base }${ path }`, method, data, headers: { accept: 'application/json', 'X-Leasetune-Token': tok }
      });
    } catch (e) {
      throw storeError(e);
    }
  }

  return {
    kind:        'rancher',
    overview:    () => call('GET', '/leasetune/v1/overview'),
    clusters:    () => call('GET', '/leasetune/v1/clusters'),
    tradeoff:    (component, maxFailover) => call('GET', `/leasetune/v1/tradeoff?component=${ encodeURIComponent(component) }&maxFailover=${ encodeURIComponent(maxFailover || '') }`),
    plan:        (component, values) => call('POST', '/leasetune/v1/plan', { component, values }),
    async saveSetting(settingName, value) {
      try {
        const s = await store.dispatch('management/find', { type: SETTING_TYPE, id: settingName, opt: { force: true } });

        s.value = value;

        return await s.save();
      } catch (e) {
        throw storeError(e);
      }
    },
  };
}
