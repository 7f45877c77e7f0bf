// The stand-in shell's Vuex store (real Vuex 4, as the dashboard uses): a
// `management` module that behaves as rancher/dashboard's store of the
// local cluster does (steve's /v1) for the calls an extension page makes
// of it — getters schemaFor, byId; actions find, request, watch, load —
// and the `i18n` module's getters t and exists, written from
// rancher/dashboard at v2.12.12 (@rancher/shell 3.0.5):
//   shell/plugins/dashboard-store/actions.js   find, load
//   shell/plugins/dashboard-store/getters.js   schemaFor, byId, urlFor
//   shell/plugins/steve/actions.js             request (its onError: a 401
//                                              logs the user out unless
//                                              redirectUnauthorized is false)
//   shell/plugins/steve/subscribe.js           watch, the ws.resource.* handlers
//   shell/utils/socket.js                      the /v1/subscribe websocket
//   shell/plugins/axios.js                     Accept: application/json, the
//                                              session cookie, x-api-csrf
//   shell/store/i18n.js                        t, exists, mergeLoad
// Everything goes to the stand-in's /v1 (tests/integration/framework
// Steve, which acts on the kube-apiserver as the user of the session
// cookie). What the store did is recorded for the test: window.hostActions
// (every action dispatched, with its payload) and window.hostLoggedOut.
window.leasetuneHostStore = function(shellTranslations) {
  const { createStore } = window.Vuex;
  const IntlMessageFormat = window.IntlMessageFormat.IntlMessageFormat || window.IntlMessageFormat.default;

  function cookie(name) {
    const m = document.cookie.split(';').map((c) => c.trim()).find((c) => c.startsWith(`${ name }=`));

    return m ? decodeURIComponent(m.slice(name.length + 1)) : null;
  }

  // http is the dashboard's $axios: JSON, the browser's cookies (the
  // session), and the CSRF cookie's value in x-api-csrf. It rejects as
  // axios does, with the answer in err.response.
  async function http(opt) {
    const headers = { Accept: 'application/json', ...(opt.headers || {}) };
    const csrf = cookie('CSRF');
    let body;

    if (csrf) {
      headers['x-api-csrf'] = csrf;
    }
    if (opt.data !== undefined) {
      body = JSON.stringify(opt.data);
      headers['Content-Type'] = 'application/json';
    }
    const res = await fetch(opt.url, {
      method: (opt.method || 'get').toUpperCase(), headers, body, credentials: 'same-origin'
    });
    const text = await res.text();
    let data = text;

    try {
      data = text ? JSON.parse(text) : null;
    } catch (e) {
      // not JSON: the text as it came
    }
    const out = {
      status: res.status, statusText: res.statusText, data, headers: {}
    };

    if (!res.ok) {
      const err = new Error(`Request failed with status code ${ res.status }`);

      err.response = out;
      throw err;
    }

    return out;
  }

  // responseObject is steve/actions.js's: the body, with _status,
  // _statusText, _headers and _url beside it.
  function responseObject(res, url) {
    let out = res.data;

    if (res.status === 204 || out === null) {
      out = {};
    }
    if (typeof out !== 'object') {
      out = { data: out };
    }
    Object.defineProperties(out, {
      _status:     { value: res.status },
      _statusText: { value: res.statusText },
      _headers:    { value: res.headers },
      _url:        { value: url },
    });

    return out;
  }

  const keyOf = (m) => [m.type, m.namespace || '', m.id || '', m.selector || ''].join('/');

  let socket = null;
  let socketOpen = false;
  const queued = [];

  const management = {
    namespaced: true,

    state: () => ({ schemas: {}, types: {}, started: {} }),

    getters: {
      normalizeType: () => (type) => (type || '').toLowerCase(),
      schemaFor:     (state, getters) => (type) => state.schemas[getters.normalizeType(type)],
      byId:          (state, getters) => (type, id) => (state.types[getters.normalizeType(type)] || {})[id],
      // urlFor: the schema's collection link and the id; no schema is
      // "Unknown schema for type", no collection link "You don't have
      // permission to list this type".
      urlFor:        (state, getters) => (type, id) => {
        const schema = getters.schemaFor(type);

        if (!schema) {
          throw new Error(`Unknown schema for type: ${ type }`);
        }
        let url = schema.links && schema.links.collection;

        if (!url) {
          throw new Error(`You don't have permission to list this type: ${ type }`);
        }
        if (id) {
          url += `/${ id }`;
        }

        return url;
      },
      watchStarted: (state) => (m) => !!state.started[keyOf(m)],
    },

    mutations: {
      loadSchemas(state, list) {
        list.forEach((s) => {
          state.schemas[s.id.toLowerCase()] = s;
        });
      },
      // load keeps one object per type and id, updated in place.
      load(state, data) {
        const type = data.type.toLowerCase();
        const map = state.types[type] || (state.types[type] = {});
        const have = map[data.id];

        if (have) {
          Object.keys(have).forEach((k) => {
            if (!(k in data)) {
              delete have[k];
            }
          });
          Object.assign(have, data);
        } else {
          map[data.id] = data;
        }
      },
      remove(state, data) {
        const map = state.types[(data.type || '').toLowerCase()];

        if (map) {
          delete map[data.id];
        }
      },
      setWatchStarted(state, m) {
        state.started[keyOf(m)] = true;
      },
      setWatchStopped(state, m) {
        delete state.started[keyOf(m)];
      },
    },

    actions: {
      async loadSchemas({ dispatch, commit }) {
        const res = await dispatch('request', { url: '/v1/schemas' });

        commit('loadSchemas', res.data || []);
      },

      async request({ dispatch }, pOpt) {
        const opt = pOpt.opt || pOpt;

        opt.url = opt.url.replace(/\/*$/g, '');
        try {
          return responseObject(await http(opt), opt.url);
        } catch (err) {
          let out = err;

          if (err && err.response) {
            if (opt.redirectUnauthorized !== false && err.response.status === 401) {
              dispatch('auth/logout', opt.logoutOnError, { root: true });
            }
            if (typeof err.response.data !== 'undefined') {
              out = responseObject(err.response, opt.url);
            }
          }

          return Promise.reject(out);
        }
      },

      async find({ getters, dispatch }, { type, id, opt }) {
        opt = opt || {};
        type = getters.normalizeType(type);
        if (opt.force !== true) {
          const out = getters.byId(type, id);

          if (out) {
            if (opt.watch !== false) {
              dispatch('watch', { type, id, revision: opt.revision || '' });
            }

            return out;
          }
        }
        opt.url = getters.urlFor(type, id);
        const res = await dispatch('request', { opt, type });

        await dispatch('load', { data: res });
        if (opt.watch !== false) {
          dispatch('watch', { type, id, revision: (opt.revision !== undefined ? opt.revision : res && res.metadata && res.metadata.resourceVersion) || '' });
        }

        return getters.byId(type, id);
      },

      load({ commit }, { data }) {
        commit('load', data);
      },

      // watch sends a subscription for the type and id, unless the type
      // has no watch verb or the watch is started.
      watch({ getters, dispatch }, params) {
        const type = getters.normalizeType(params.type);
        const schema = getters.schemaFor(type);
        let revision = params.revision;

        if (schema && schema.attributes && Array.isArray(schema.attributes.verbs) && !schema.attributes.verbs.includes('watch')) {
          return;
        }
        if (!params.stop && getters.watchStarted({ ...params, type })) {
          return;
        }
        if (revision === undefined) {
          const have = getters.byId(type, params.id);

          revision = have && have.metadata ? have.metadata.resourceVersion : '';
        }
        const msg = { resourceType: type };

        if (revision) {
          msg.resourceVersion = `${ revision }`;
        }
        if (params.namespace) {
          msg.namespace = params.namespace;
        }
        if (params.stop) {
          msg.stop = true;
        }
        if (params.id) {
          msg.id = params.id;
        }
        if (params.selector) {
          msg.selector = params.selector;
        }

        return dispatch('send', msg);
      },

      send(ctx, msg) {
        if (socketOpen) {
          socket.send(JSON.stringify(msg));
        } else {
          queued.push(msg);
        }
      },

      'ws.resource.start'({ commit }, msg) {
        commit('setWatchStarted', { type: msg.resourceType, id: msg.id, namespace: msg.namespace, selector: msg.selector });
      },
      'ws.resource.create'({ dispatch }, msg) {
        if (msg.data && msg.data.id) {
          dispatch('load', { data: msg.data });
        }
      },
      'ws.resource.change'({ dispatch }, msg) {
        if (msg.data && msg.data.id) {
          dispatch('load', { data: msg.data });
        }
      },
      'ws.resource.remove'({ commit }, msg) {
        if (msg.data) {
          commit('remove', msg.data);
        }
      },
      'ws.resource.error'(ctx, msg) {
        console.warn('Resource error [management]', msg.resourceType, ':', msg.data && msg.data.error); // eslint-disable-line no-console
      },
      // A stopped watch that was started is watched again, from the
      // revision held (subscribe.js ws.resource.stop).
      'ws.resource.stop'({ getters, commit, dispatch }, msg) {
        const m = {
          type: msg.resourceType, id: msg.id, namespace: msg.namespace, selector: msg.selector
        };

        if (getters.schemaFor(m.type) && getters.watchStarted(m)) {
          commit('setWatchStopped', m);
          dispatch('watch', m);
        }
      },
    },
  };

  function lookup(translations, key) {
    return key.split('.').reduce((o, k) => (o && typeof o === 'object' ? o[k] : undefined), translations);
  }

  function merge(into, from) {
    Object.keys(from).forEach((k) => {
      if (from[k] && typeof from[k] === 'object' && !Array.isArray(from[k]) && into[k] && typeof into[k] === 'object') {
        merge(into[k], from[k]);
      } else {
        into[k] = from[k];
      }
    });
  }

  const i18n = {
    namespaced: true,
    state:      () => ({ default: 'en-us', selected: 'en-us', translations: { 'en-us': shellTranslations } }),
    getters:    {
      // t: the message of the selected locale (else the default's);
      // through ICU MessageFormat when it has a {, with vendor and
      // appName beside the arguments; undefined when missing.
      t: (state) => (key, args, language) => {
        const locale = language || state.selected;
        let msg = lookup(state.translations[locale], key);

        if (!msg) {
          msg = lookup(state.translations[state.default], key);
        }
        if (msg === undefined) {
          return undefined;
        }
        if (typeof msg === 'object') {
          console.error('Translation for', `${ locale }/${ key }`, 'is an object'); // eslint-disable-line no-console

          return undefined;
        }
        if (!msg.includes('{')) {
          return msg;
        }

        return new IntlMessageFormat(msg, locale).format({ vendor: 'Rancher', appName: 'Rancher', ...args });
      },
      exists: (state) => (key, language) => {
        const locale = language || state.selected;

        return lookup(state.translations[state.default], key) !== undefined || lookup(state.translations[locale], key) !== undefined;
      },
    },
    mutations: {
      mergeLoadTranslations(state, { locale, translations }) {
        if (!state.translations[locale]) {
          state.translations[locale] = translations;
        } else {
          merge(state.translations[locale], translations);
        }
      },
    },
    actions: {
      // mergeLoad: an extension's l10n loader (plugin.register('l10n',
      // locale, fn)): a module whose default is the translations.
      async mergeLoad({ commit }, { locale, module }) {
        const loaded = await (typeof module === 'function' ? module() : module);

        commit('mergeLoadTranslations', { locale, translations: loaded.default || loaded });
      },
    },
  };

  const auth = {
    namespaced: true,
    actions:    {
      logout() {
        window.hostLoggedOut = true;
      },
    },
  };

  const store = createStore({ modules: { management, i18n, auth } });

  window.hostActions = [];
  store.subscribeAction((action) => {
    let payload;

    try {
      payload = JSON.parse(JSON.stringify(action.payload === undefined ? null : action.payload));
    } catch (e) {
      payload = String(action.payload);
    }
    window.hostActions.push({ type: action.type, payload });
  });

  // The one socket of the management store (Socket: wss on an https page,
  // a sockId parameter), its messages as ws.<name> actions.
  store.connect = () => new Promise((resolve, reject) => {
    socket = new WebSocket(`${ location.origin.replace(/^http/, 'ws') }/v1/subscribe?sockId=1`);
    socket.onopen = () => {
      socketOpen = true;
      queued.splice(0).forEach((m) => socket.send(JSON.stringify(m)));
      resolve();
    };
    socket.onerror = () => reject(new Error('the /v1/subscribe websocket failed'));
    socket.onclose = () => {
      socketOpen = false;
      if (!window.hostClosing) {
        console.warn('the /v1/subscribe websocket closed'); // eslint-disable-line no-console
      }
    };
    socket.onmessage = (e) => {
      const msg = JSON.parse(e.data);

      if (msg.name && msg.name.startsWith('resource.')) {
        store.dispatch(`management/ws.${ msg.name }`, msg);
      }
    };
  });

  return store;
};
