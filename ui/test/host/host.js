// A stand-in for Rancher's shell, for the browser test: Rancher's real
// dashboard needs a whole Rancher behind it (tests/upstream runs that one).
// It does what the shell (rancher/dashboard @rancher/shell 3.0.x) does to
// an extension and to a page, with the same calls, and nothing else:
//
//   - the store (./store.js): the `management` store of the local cluster
//     over steve's /v1 as the logged-in user, with its schemas loaded and
//     its /v1/subscribe websocket open, as the dashboard has them before
//     any page shows; the `i18n` store over the shell's own translations
//     (shell/assets/translations/en-us.yaml);
//   - lists the installed extensions from /v1/uiplugins (the index Rancher
//     serves from the UIPlugins: shell/plugins/plugin.js) and skips one
//     without catalog.cattle.io/ui-extensions-version (shell/config/
//     uiplugins.js shouldNotLoadPlugin);
//   - loads each one's script from /v1/uiplugins/<name>/<version>/plugin/
//     <main> with a script tag whose id is <name>-<version>, then calls
//     window[id].default(plugin) with a Plugin (shell/core/extension-
//     manager-impl.js loadPluginAsync, loadAsync); the script's chunks load
//     from beside it;
//   - applies the plugin: its l10n loaders into the i18n store (store/
//     i18n.js mergeLoad), its products' init(plugin, store) with a DSL that
//     records virtualType and basicType (shell/core/plugin.ts DSL,
//     addProduct; shell/store/type-map.js), and its routes (addRoutes with
//     { parent, route });
//   - shows the Global Settings ("settings") product's side menu with the
//     virtual types the user may see (ifHaveType: the store has the
//     schema), labelled by labelKey, and renders a route's component when
//     its entry is chosen, with window.Vue (shell/core/plugins-loader.js)
//     in an app that has what the shell gives every page: the store
//     (app.use: $store and provide('store')), the i18n plugin's t() and <t>
//     (shell/plugins/i18n.js), and the clean-html and clean-tooltip
//     directives (shell/directives), over Rancher's own CSS.
(function() {
  const Vue = window.Vue;
  const registry = {
    virtualTypes: {}, basicTypes: {}, routes: [], plugins: [], errors: []
  };
  let store;

  // Plugin is the part of shell/core/plugin.ts an extension calls.
  class Plugin {
    constructor(id) {
      this.id = id;
      this.name = id;
      this.products = [];
      this.routes = [];
      this.l10n = {};
      this.types = {};
      this._metadata = {};
    }

    get metadata() {
      return this._metadata;
    }

    set metadata(v) {
      this._metadata = v;
      this.name = v.name || this.id;
    }

    addProduct(p) {
      this.products.push(p);
    }

    addRoutes(routes) {
      routes.forEach((r) => this.routes.push(Object.keys(r).includes('parent') ? r : { parent: 'default', route: r }));
    }

    addRoute(parent, route) {
      this.routes.push(route ? { parent, route } : { parent: 'default', route: parent });
    }

    // register: l10n loaders accumulate per locale; other types replace.
    register(type, name, fn) {
      if (type === 'l10n') {
        (this.l10n[name] = this.l10n[name] || []).push(fn);

        return;
      }
      (this.types[type] = this.types[type] || {})[name] = fn;
    }

    DSL(store, product) {
      const vt = (registry.virtualTypes[product] = registry.virtualTypes[product] || []);
      const bt = (registry.basicTypes[product] = registry.basicTypes[product] || []);
      const noop = () => {};

      return {
        virtualType:     (o) => vt.push(o),
        basicType:       (names) => bt.push(...(Array.isArray(names) ? names : [names])),
        product:         noop,
        configureType:   noop,
        headers:         noop,
        weightType:      noop,
        weightGroup:     noop,
        mapGroup:        noop,
        mapType:         noop,
        spoofedType:     noop,
        hideBulkActions: noop,
      };
    }

    // The rest of IPlugin: nothing this host shows.
    addL10n() {}
    addLocale() {}
    addAction() {}
    addTab() {}
    addPanel() {}
    addCard() {}
    addTableColumn() {}
    addNavHooks() {}
    addUninstallHook() {}
  }

  function loadAsync(entry) {
    const id = `${ entry.name }-${ entry.version }`;
    const main = (entry.metadata && entry.metadata.main) || `${ id }.umd.min.js`;
    const url = `/v1/uiplugins/${ entry.name }/${ entry.version }/plugin/${ main }`;

    return new Promise((resolve, reject) => {
      const el = document.createElement('script');

      el.src = url;
      el.async = true;
      el.id = id;
      el.dataset.purpose = 'extension';
      el.onload = () => {
        if (!window[id] || typeof window[id].default !== 'function') {
          return reject(new Error(`Could not load plugin code: window["${ id }"] has no default export`));
        }
        const plugin = new Plugin(id);

        window[id].default(plugin, {});
        registry.plugins.push({ id, plugin, module: window[id] });
        resolve();
      };
      el.onerror = () => reject(new Error(`Failed to load script from '${ url }'`));
      document.head.appendChild(el);
    });
  }

  // The shell's i18n plugin: t(key, args, raw) on every component (HTML
  // escaped unless raw; %key% when missing), <t k="..."/> and v-t.
  function escapeHtml(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({
      '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'
    })[c]);
  }

  function stringFor(key, args, raw) {
    const translation = store.getters['i18n/t'](key, args);
    let out = translation;

    if (translation === undefined) {
      if (args && Object.keys(args).length) {
        out = `%${ key }(${ Object.keys(args).map((k) => `${ k }: ${ args[k] }`).join(', ') })%`;
        raw = true;
      } else {
        out = `%${ key }%`;
      }
    }

    return raw ? out : escapeHtml(out);
  }

  const purify = (html) => window.DOMPurify.sanitize(String(html === undefined || html === null ? '' : html));

  function setUpApp(app) {
    app.use(store);
    app.config.globalProperties.t = (key, args, raw) => stringFor(key, args, raw);
    app.component('t', {
      inheritAttrs: false,
      props:        {
        k: { type: String, required: true }, raw: { type: Boolean, default: false }, tag: { type: [String, Object], default: 'span' }
      },
      render() {
        const msg = stringFor(this.k, this.$attrs, this.raw);

        return this.raw ? Vue.h(this.tag, { innerHTML: msg }) : Vue.h(this.tag, {}, msg);
      },
    });
    const tDirective = (el, binding) => {
      const str = stringFor(binding.value, {}, binding.modifiers && binding.modifiers.raw);

      if (binding.arg) {
        el.setAttribute(binding.arg, str);
      } else {
        el.innerHTML = str;
      }
    };

    app.directive('t', { beforeMount: tDirective, updated: tDirective });
    app.directive('clean-html', {
      mounted(el, b) {
        el.innerHTML = purify(b.value);
      },
      updated(el, b) {
        el.innerHTML = purify(b.value);
      },
      unmounted(el) {
        el.innerHTML = '';
      },
    });
    // The shell's is floating-vue's tooltip over purified content; here the
    // content is the element's title.
    const tooltip = (el, b) => {
      const v = b.value;
      const content = v && typeof v === 'object' ? v.content : v;

      if (content) {
        el.setAttribute('title', purify(content).replace(/<[^>]*>/g, ''));
      } else {
        el.removeAttribute('title');
      }
    };

    app.directive('clean-tooltip', { mounted: tooltip, updated: tooltip });
  }

  function routeFor(path) {
    for (const { route } of registry.routes) {
      const re = new RegExp(`^${ route.path.replace(/:[a-zA-Z]+/g, '[^/]+') }$`);

      if (re.test(path)) {
        return route;
      }
    }

    return null;
  }

  function pathOf(name) {
    const r = registry.routes.find((x) => x.route.name === name);

    return r ? r.route.path.replace(':cluster', '_') : null;
  }

  let app;

  function render() {
    const main = document.getElementById('main');
    const path = location.hash.replace(/^#/, '') || '/';
    const route = routeFor(path);

    document.querySelectorAll('#nav a').forEach((a) => a.classList.toggle('active', a.getAttribute('href') === `#${ path }`));
    if (app) {
      app.unmount();
      app = null;
    }
    if (!route) {
      main.innerHTML = '<p class="empty">Choose a page of Global Settings.</p>';

      return;
    }
    main.innerHTML = '<div id="page"></div>';
    app = Vue.createApp({ render: () => Vue.h(route.component) });
    setUpApp(app);
    app.mount('#page');
  }

  function nav() {
    const ul = document.getElementById('nav');
    const builtin = ['Settings', 'Feature Flags', 'Branding', 'Banners', 'Performance', 'Links', 'Fleet Settings'];

    ul.innerHTML = builtin.map((b) => `<li><span class="builtin">${ b }</span></li>`).join('');
    const types = (registry.virtualTypes.settings || []).filter((t) => (registry.basicTypes.settings || []).includes(t.name) &&
      (!t.ifHaveType || store.getters['management/schemaFor'](t.ifHaveType)));

    types.sort((a, b) => (b.weight || 0) - (a.weight || 0));
    for (const t of types) {
      const li = document.createElement('li');
      const a = document.createElement('a');

      a.textContent = t.labelKey ? stringFor(t.labelKey, {}, true) : t.label;
      a.dataset.nav = t.name;
      a.href = `#${ pathOf(t.route.name) }`;
      li.appendChild(a);
      ul.appendChild(li);
    }
  }

  async function start() {
    const en = await (await fetch('/shell-en-us.json')).json();

    store = window.leasetuneHostStore(en);
    window.hostStore = store;
    await store.connect();
    await store.dispatch('management/loadSchemas');
    const res = await fetch('/v1/uiplugins', { headers: { accept: 'application/json' } });
    const idx = await res.json();
    const entries = idx.entries || idx.Entries || {};

    for (const entry of Object.values(entries)) {
      if (!entry.metadata || !entry.metadata['catalog.cattle.io/ui-extensions-version']) {
        registry.errors.push(`${ entry.name }: plugins.error.apiAnnotationMissing`);
        continue;
      }
      try {
        await loadAsync(entry);
      } catch (e) {
        registry.errors.push(`${ entry.name }: ${ e.message }`);
      }
    }
    for (const { plugin } of registry.plugins) {
      for (const fn of plugin.l10n['en-us'] || []) {
        await store.dispatch('i18n/mergeLoad', { locale: 'en-us', module: fn });
      }
      plugin.products.forEach((p) => p.init(plugin, store));
      registry.routes.push(...plugin.routes);
    }
    document.getElementById('errors').textContent = registry.errors.join('\n');
    nav();
    window.addEventListener('hashchange', render);
    render();
    window.hostReady = true;
  }

  window.hostRegistry = registry;
  window.addEventListener('beforeunload', () => {
    window.hostClosing = true;
  });
  start().catch((e) => {
    document.getElementById('errors').textContent = `host: ${ e.message }`;
  });
})();
