// A stand-in for Rancher's shell (rancher/dashboard @rancher/shell at
// shell-pkg-v3.0.8), for the browser test: Rancher's real UI needs a whole
// Rancher behind it. It does what the shell does to an extension, with the
// same calls, and nothing else:
//
//   - lists the installed extensions from /v1/uiplugins (the index Rancher
//     serves from the UIPlugins: shell/plugins/plugin.js) and skips one
//     without catalog.cattle.io/ui-extensions-version, as
//     shell/config/uiplugins.js shouldNotLoadPlugin does;
//   - loads each one's script from /v1/uiplugins/<name>/<version>/plugin/
//     <name>-<version>.umd.min.js with a script tag whose id is
//     <name>-<version>, then calls window[id].default(plugin) with a Plugin
//     (shell/core/extension-manager-impl.js loadPluginAsync, loadAsync);
//   - applies the plugin: its products' init(plugin, store) with a DSL that
//     records virtualType and basicType (shell/core/plugin.ts DSL,
//     addProduct; shell/store/type-map.js), and its routes (addRoutes with
//     { parent, route });
//   - shows the Global Settings ("settings") product's side menu with the
//     virtual types, and renders a route's component when its menu entry is
//     chosen, with window.Vue (shell/core/plugins-loader.js sets it).
//
// Where the shell would give the page Rancher's store, this host provides
// the extension's own directBackend, talking to leasetune's API through
// the same kind of proxy path Rancher's local-cluster proxy gives it.
(function() {
  const cfg = window.leasetuneHost;
  const Vue = window.Vue;
  const registry = { virtualTypes: {}, basicTypes: {}, routes: [], plugins: [], errors: [] };

  // Plugin is the part of shell/core/plugin.ts an extension calls.
  class Plugin {
    constructor(id) {
      this.id = id;
      this.name = id;
      this.products = [];
      this.routes = [];
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

    DSL(store, product) {
      const vt = (registry.virtualTypes[product] = registry.virtualTypes[product] || []);
      const bt = (registry.basicTypes[product] = registry.basicTypes[product] || []);
      const noop = () => {};

      return {
        virtualType: (o) => vt.push(o),
        basicType:   (names) => bt.push(...(Array.isArray(names) ? names : [names])),
        product:     noop,
        configureType: noop,
        headers:     noop,
        weightType:  noop,
        weightGroup: noop,
        mapGroup:    noop,
        mapType:     noop,
        spoofedType: noop,
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
    register() {}
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
    const { module } = registry.plugins.find((p) => p.plugin.routes.some((r) => r.route === route));

    app = Vue.createApp({ render: () => Vue.h(route.component) });
    app.provide('leasetuneBackend', module.directBackend({ baseURL: cfg.apiBase, token: cfg.token }));
    app.mount('#page');
  }

  function nav() {
    const ul = document.getElementById('nav');
    const builtin = ['Settings', 'Feature Flags', 'Branding', 'Banners', 'Performance', 'Links', 'Fleet Settings'];

    ul.innerHTML = builtin.map((b) => `<li><span class="builtin">${ b }</span></li>`).join('');
    const types = (registry.virtualTypes.settings || []).filter((t) => (registry.basicTypes.settings || []).includes(t.name));

    types.sort((a, b) => (b.weight || 0) - (a.weight || 0));
    for (const t of types) {
      const li = document.createElement('li');
      const a = document.createElement('a');

      a.textContent = t.label || t.labelKey;
      a.dataset.nav = t.name;
      a.href = `#${ pathOf(t.route.name) }`;
      li.appendChild(a);
      ul.appendChild(li);
    }
  }

  async function start() {
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
      plugin.products.forEach((p) => p.init(plugin, {}));
      registry.routes.push(...plugin.routes);
    }
    document.getElementById('errors').textContent = registry.errors.join('\n');
    nav();
    window.addEventListener('hashchange', render);
    render();
    window.hostReady = true;
  }

  window.hostRegistry = registry;
  start().catch((e) => {
    document.getElementById('errors').textContent = `host: ${ e.message }`;
  });
})();
