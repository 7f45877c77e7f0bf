// The page's only way to Rancher: the dashboard's Vuex store of the local
// cluster ("management": steve's /v1, as the logged-in user), so that
// Rancher's RBAC, Rancher's audit log and leasetune's webhook apply. No
// fetch of its own, no token, no proxy, no header of its own. Every call
// carries redirectUnauthorized: false, so that a 401 or a 403 is shown on
// the page and never logs the user out (rancher/dashboard
// shell/plugins/steve/actions.js request's onError dispatches auth/logout
// on a 401 unless it is false).
//
// The calls, all of them:
//   getters['management/schemaFor'](SETTING)                           may the user PUT Settings?
//   dispatch('management/find', { type: SETTING, id: NAME, opt })      each of the nine
//   dispatch('management/find', { type: STATUS, id: STATUS_ID, opt })  the ElectionStatus
//   getters['management/byId'](SETTING | STATUS, id)                   read reactively: find
//       watches (shell/plugins/dashboard-store/actions.js find, opt.watch !== false)
//   dispatch('management/request', { url: SETTINGS_URL + NAME, method: 'PUT', data, redirectUnauthorized: false })
// with opt = { redirectUnauthorized: false }.

/** SETTING is MANAGEMENT.SETTING (rancher/dashboard shell/config/types.js). */
export const SETTING = 'management.cattle.io.setting';
/** STATUS and STATUS_ID are leasetune's ElectionStatus object as steve serves it (pkg/electionstatus). */
export const STATUS = 'leasetune.io.electionstatus';
export const STATUS_ID = 'leasetune';
/** SETTINGS_URL is steve's path of the Settings. */
export const SETTINGS_URL = '/v1/management.cattle.io.settings/';

const opt = () => ({ redirectUnauthorized: false });

/**
 * schemaAllowsPut says whether the user may write Settings at all: the
 * schema's resourceMethods include PUT (steve sets it when the user may
 * update any Setting, e.g. the nine by name: steve pkg/schema/factory.go;
 * rancher/dashboard shell/pages/c/_cluster/settings/banners.vue mode()
 * reads it the same way).
 */
export function schemaAllowsPut(store) {
  const schema = store.getters['management/schemaFor'](SETTING);

  return !!schema?.resourceMethods?.includes('PUT');
}

/**
 * objectAllowsUpdate is one Setting's own answer: its links.update, which
 * steve removes where the user may not update that object and sets to
 * "blocked" where steve blocks PUT (pkg/resources/common/formatter.go).
 */
export function objectAllowsUpdate(setting) {
  const link = setting?.links?.update;

  return !!link && link !== 'blocked';
}

/** findSetting reads one Setting (and watches it). */
export function findSetting(store, name) {
  return store.dispatch('management/find', { type: SETTING, id: name, opt: opt() });
}

/** findStatus reads the ElectionStatus object (and watches it). */
export function findStatus(store) {
  return store.dispatch('management/find', { type: STATUS, id: STATUS_ID, opt: opt() });
}

/** settingOf is the Setting as the store holds it now (undefined when not read). */
export function settingOf(store, name) {
  return store.getters['management/byId'](SETTING, name);
}

/** statusOf is the ElectionStatus object's status as the store holds it now (null when not read). */
export function statusOf(store) {
  return store.getters['management/byId'](STATUS, STATUS_ID)?.status || null;
}

// plain is the Setting as read, as JSON: its fields, without the model.
function plain(setting) {
  const raw = typeof setting?.toJSON === 'function' ? setting.toJSON() : setting;

  return JSON.parse(JSON.stringify(raw || {}));
}

/**
 * saveSetting writes one Setting's value with a PUT of the object as read
 * (its resourceVersion with it, so that a Setting changed in between is
 * refused with a conflict rather than overwritten). It resolves with the
 * saved object; it rejects with what the store rejects with (errorOf).
 */
export function saveSetting(store, setting, value) {
  const data = { ...plain(setting), value };
  const name = setting?.metadata?.name || setting?.id;

  return store.dispatch('management/request', {
    url: `${ SETTINGS_URL }${ encodeURIComponent(name) }`, method: 'PUT', data, redirectUnauthorized: false
  });
}

/**
 * errorOf is what the store rejected with, for a person: { status,
 * message }. Steve answers errors as { status, code, message } (a
 * webhook's refusal comes as the API server's message, as Rancher passes
 * it on); the store adds _status; other failures are Errors.
 */
export function errorOf(e) {
  const d = e?.data && typeof e.data === 'object' && !Array.isArray(e.data) ? e.data : e;
  const status = e?._status || d?.status || e?.response?.status || 0;
  let message = d?.message || e?.message || '';

  if (!message) {
    message = typeof e === 'string' ? e : JSON.stringify(d);
  }

  return { status: Number(status) || 0, message };
}

/**
 * viewOf is what checkChange and writeOrder read (settings.View): the
 * Setting objects ({ name, value, source }), the values leasetune
 * remembers for a missing object, and which settings an env var on
 * leasetune's pod sets (read-only), both from the status.
 */
export function viewOf(settings, status) {
  const remembered = {};
  const readOnly = new Set();

  (status?.components || []).forEach((c) => (c.settings || []).forEach((s) => {
    if (s.source === 'remembered') {
      remembered[s.name] = s.value;
    }
    if (s.readOnly) {
      readOnly.add(s.name);
    }
  }));

  return {
    objects: (settings || []).filter(Boolean).map((s) => ({
      name: s.metadata?.name || s.name || s.id, value: s.value ?? '', source: s.source || ''
    })),
    remembered,
    envSet: (d) => readOnly.has(d.name),
  };
}
