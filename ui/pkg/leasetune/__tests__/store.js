// A stand-in for the dashboard's Vuex store as the page uses it: the
// management store's find (which watches), request, schemaFor and byId,
// and the i18n getters (the shell's t, over the extension's
// l10n/en-us.yaml). Any other action, mutation or getter fails the test:
// the page makes no request outside its contract (../api/store.js).
import { reactive } from 'vue';
import fs from 'fs';
import path from 'path';
import yaml from 'js-yaml';
import IntlMessageFormat from 'intl-messageformat';
import { SETTING, STATUS, STATUS_ID, SETTINGS_URL } from '../api/store';

const translations = yaml.load(fs.readFileSync(path.join(__dirname, '..', 'l10n', 'en-us.yaml'), 'utf8'));

function lookup(key) {
  return key.split('.').reduce((o, k) => (o && typeof o === 'object' ? o[k] : undefined), translations);
}

// t is the shell's i18n/t getter (shell/store/i18n.js): the message,
// through IntlMessageFormat when it has arguments; undefined when missing.
export function t(key, args) {
  const msg = lookup(key);

  if (typeof msg !== 'string') {
    return undefined;
  }

  return msg.includes('{') ? new IntlMessageFormat(msg, 'en-us').format(args || {}) : msg;
}

/** apiError is what the store rejects with for an HTTP error (steve's error body, with _status). */
export function apiError(status, message, code = '') {
  const e = { type: 'error', status, code, message };

  Object.defineProperty(e, '_status', { value: status });

  return e;
}

/** setting is a Setting as steve serves it (links.update unless noUpdate). */
export function setting(name, value = '', { source = '', noUpdate = false } = {}) {
  const links = { self: `/v1/management.cattle.io.settings/${ name }`, view: `/v1/management.cattle.io.settings/${ name }` };

  if (!noUpdate) {
    links.update = links.self;
  }

  return {
    id: name, type: SETTING, metadata: { name, resourceVersion: '100' }, value, source, default: '', links
  };
}

const ALLOWED = new Set(['management/find', 'management/request']);

/**
 * mockStore is a store holding settings (name → Setting) and status (the
 * ElectionStatus object's status, or null: none). schema is the Setting
 * schema schemaFor answers; findErrors (id → error) and putErrors (name →
 * error) make a find or a PUT fail.
 */
export function mockStore({
  schema = { id: SETTING, resourceMethods: ['GET', 'DELETE', 'PUT', 'PATCH'] }, settings = {}, status = null, findErrors = {}, putErrors = {}, watchLag = false
} = {}) {
  const held = reactive({ settings: {}, status: null });
  const server = { settings: { ...settings }, status };
  const unknown = [];

  const dispatch = jest.fn(async(action, payload) => {
    if (!ALLOWED.has(action)) {
      unknown.push(action);
      throw new Error(`the page dispatched ${ action }, which is not part of its contract`);
    }
    if (action === 'management/find') {
      const { type, id } = payload;

      if (findErrors[id]) {
        throw findErrors[id];
      }
      if (type === SETTING && server.settings[id]) {
        held.settings[id] = server.settings[id];

        return held.settings[id];
      }
      if (type === STATUS && id === STATUS_ID && server.status) {
        held.status = { id, type: STATUS, status: server.status };

        return held.status;
      }
      throw apiError(404, `${ type } "${ id }" not found`, 'NotFound');
    }
    // management/request: a PUT of a Setting.
    const name = decodeURIComponent(payload.url.replace(SETTINGS_URL, ''));

    if (payload.method !== 'PUT' || !payload.url.startsWith(SETTINGS_URL) || !server.settings[name]) {
      throw new Error(`the page requested ${ payload.method } ${ payload.url }, which is not part of its contract`);
    }
    if (putErrors[name]) {
      throw putErrors[name];
    }
    // The server's object: a PUT on another resourceVersion is a conflict
    // (the kube-apiserver's 409); the saved object has the next one.
    // watchLag: the store's watch has not brought it yet (held unchanged).
    const stored = server.settings[name];
    const rv = stored.metadata?.resourceVersion;

    if (watchLag && payload.data.metadata?.resourceVersion !== rv) {
      throw apiError(409, `Operation cannot be fulfilled on settings.management.cattle.io "${ name }": the object has been modified; please apply your changes to the latest version and try again`, 'Conflict');
    }
    const saved = { ...stored, value: payload.data.value, metadata: { ...stored.metadata, resourceVersion: String(Number(rv || 0) + 1) } };

    server.settings[name] = saved;
    if (watchLag) {
      return JSON.parse(JSON.stringify(saved));
    }
    held.settings[name] = { ...held.settings[name], value: payload.data.value };

    return held.settings[name];
  });
  const known = {
    'management/schemaFor': (type) => (type === SETTING ? schema : null),
    'management/byId':      (type, id) => (type === SETTING ? held.settings[id] : (type === STATUS && id === STATUS_ID ? held.status : undefined)),
    'i18n/t':               t,
    'i18n/exists':          (key) => lookup(key) !== undefined,
  };
  const getters = new Proxy(known, {
    get(target, key) {
      if (!(key in target)) {
        unknown.push(`getter ${ String(key) }`);
        throw new Error(`the page read the getter ${ String(key) }, which is not part of its contract`);
      }

      return target[key];
    },
  });

  return {
    getters,
    dispatch,
    commit: jest.fn((m) => {
      unknown.push(`commit ${ m }`);
      throw new Error(`the page committed ${ m }`);
    }),
    state:  {},
    held,
    unknown,
    /** watchEvent is an update the store's watch brings: the status object as the leader rewrote it. */
    watchEvent(nextStatus) {
      held.status = { id: STATUS_ID, type: STATUS, status: nextStatus };
    },
  };
}
