#!/usr/bin/env node
// Drives Debian's chromium (puppeteer-core: it downloads no browser)
// through the Leader election page in the stand-in shell the Go test
// (tests/integration/uiplugin/browser_test.go) serves over HTTPS, as two
// users would, each in a browser context of its own with the session
// cookie the Go test gave it:
//   - an editor opens Global Settings, chooses Leader election, reads the
//     page, types an invalid value, tries a triple leasetune's webhook
//     refuses, saves a valid one and follows it through pending to in
//     effect (the page's watch: it reads nothing again);
//   - a viewer opens the page, finds it read-only, and forces a PUT of a
//     Setting through the page's own store path.
// Every request is intercepted (./intercept.js, strict). It prints one JSON
// object with what it saw; the Go test judges it and reads the Settings.
//
// Environment: LT_URL (the stand-in's base URL), CHROMIUM (the browser),
// LT_OUT (folder for screenshots and the browser's console log),
// LT_EDITOR and LT_VIEWER (the users' session cookies), LT_INVALID (a
// retry period the rules refuse), LT_REFUSED and LT_VALID (fleet-agent
// triples "lease/renew/retry": one the webhook refuses, one it accepts),
// LT_VALID_SHOWN (the accepted triple as the page shows it), LT_FORCED (the Setting the viewer's forced PUT writes, "name=value"),
// LT_PLAN (optional: a JSON array, the argv of `leasetune plan --output json`
// for this installation; run with the page's writes as --set at the preview).
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');
const { intercept } = require('./intercept');

const url = process.env.LT_URL;
const out = process.env.LT_OUT;
const card = '.triple-card[data-component="fleet-agent"]';
const field = (f) => `#fleet-agent-${ f }`;
const FIELDS = ['leaseDuration', 'renewDeadline', 'retryPeriod'];
const tripleOf = (s) => (s || '//').split('/');

// helpers reads and types on page, recording steps into r.
function helpers(page, r) {
  return {
    step: (name) => r.steps.push(name),
    text: (sel) => page.$eval(sel, (e) => e.textContent.replace(/\s+/g, ' ').trim()),
    type: async(sel, value) => {
      await page.click(sel, { clickCount: 3 });
      await page.keyboard.press('Backspace');
      await page.type(sel, value);
    },
    shot: (name, full = false) => page.screenshot({ path: path.join(out, `${ name }.png`), fullPage: full }),
  };
}

// view reads the page as it shows now.
function view(page) {
  return page.evaluate(() => {
    const txt = (e) => (e ? e.textContent.replace(/\s+/g, ' ').trim() : '');

    return {
      heading:  txt(document.querySelector('.leader-election h1')),
      readOnly: txt(document.querySelector('.read-only-banner')),
      status:   txt(document.querySelector('.status-error')),
      channel:  txt(document.querySelector('.channel')),
      errors:   [...document.querySelectorAll('.setting-error')].map(txt),
      cards:    [...document.querySelectorAll('.triple-card')].map((c) => ({
        component: c.dataset.component,
        title:     txt(c.querySelector('h2')),
        inEffect:  txt(c.querySelector('.in-effect')),
        pending:   txt(c.querySelector('.pending')),
        refused:   txt(c.querySelector('.refused')),
        save:      !!c.querySelector('.save'),
        fields:    [...c.querySelectorAll('.field[data-field]')].map((f) => ({
          field:    f.dataset.field,
          value:    f.querySelector('input') ? f.querySelector('input').value : '',
          disabled: f.querySelector('input') ? f.querySelector('input').disabled : true,
          meta:     txt(f.querySelector('.meta')),
          source:   txt(f.querySelector('.source')),
          reason:   txt(f.querySelector('.readonly-reason')),
        })),
        // Drawn: a blank canvas encodes to a few hundred bytes, a chart
        // with its axes, curves and markers to many thousands.
        chartDrawn: (() => {
          const cv = c.querySelector('canvas');

          return !!cv && cv.width > 0 && cv.toDataURL('image/png').length > 20000;
        })(),
      })),
      clusters:    txt(document.querySelector('.clusters-summary')),
      clusterRows: [...document.querySelectorAll('.clusters-table tr[data-cluster]')].map(txt),
    };
  });
}

// open goes to Global Settings and follows Leader election, and waits
// until the page has read the Settings and the ElectionStatus.
async function open(page, r) {
  const { step } = helpers(page, r);

  await page.goto(`${ url }/`, { waitUntil: 'networkidle0' });
  await page.waitForFunction('window.hostReady === true');
  r.hostErrors = await page.$eval('#errors', (e) => e.textContent.trim());
  r.nav = await page.$$eval('#nav a', (as) => as.map((a) => a.textContent.trim()));
  step('opened Global Settings');
  await page.click('a[data-nav="leader-election"]');
  await page.waitForFunction(() => document.querySelectorAll('.triple-card').length === 3 &&
    [...document.querySelectorAll('.triple-card .in-effect')].every((e) => !e.textContent.includes('not known')) &&
    document.querySelector('.clusters-summary') &&
    document.querySelectorAll('.tradeoff-summary').length === 3 &&
    [...document.querySelectorAll('.tradeoff-summary')].every((e) => e.textContent.includes('requests/h')), { timeout: 60000 });
  step('opened Leader election');
}

async function editor(browser, r) {
  const ctx = await browser.createBrowserContext();

  await ctx.setCookie({
    name: 'R_SESS', value: process.env.LT_EDITOR, domain: new URL(url).hostname, path: '/', httpOnly: true, secure: true
  });
  const page = await setUp(ctx, r, 'editor');
  const {
    step, text, type, shot
  } = helpers(page, r);
  const e = (r.editor = {});

  await open(page, r);
  e.view = await view(page);
  await shot('editor-view', true);
  step('read the page');

  // An invalid value: refused as it is typed, with the rules' message.
  await type(field('retryPeriod'), process.env.LT_INVALID);
  await page.waitForSelector(`${ card } [data-field="retryPeriod"] .field-errors`);
  e.invalid = await text(`${ card } [data-field="retryPeriod"] .field-errors`);
  e.saveDisabledWhenInvalid = await page.$eval(`${ card } .save`, (b) => b.disabled);
  await page.$eval(card, (c) => c.scrollIntoView({ block: 'start' }));
  await shot('invalid-value');
  step('typed an invalid value');

  // A triple valid on its own that the webhook refuses: it would leave a
  // cluster whose own entries set another lease with an invalid triple.
  const refused = tripleOf(process.env.LT_REFUSED);

  for (let i = 0; i < 3; i++) {
    await type(field(FIELDS[i]), refused[i]);
  }
  await page.click(`${ card } .save`);
  await page.waitForSelector(`${ card } .save-preview`);
  e.refusedPreview = await text(`${ card } .save-preview`);
  e.refusedWrites = await page.$$eval(`${ card } .write-order li`, (ls) => ls.map((l) => l.textContent.trim()));
  await page.click(`${ card } .confirm`);
  await page.waitForSelector(`${ card } .server-error`, { timeout: 60000 });
  e.refusal = await text(`${ card } .server-error`);
  await page.$eval(`${ card } .server-error`, (el) => el.scrollIntoView({ block: 'center' }));
  await shot('webhook-refusal');
  step('saw the webhook refuse a triple');

  // A valid triple, saved.
  const valid = tripleOf(process.env.LT_VALID);

  for (let i = 0; i < 3; i++) {
    await type(field(FIELDS[i]), valid[i]);
  }
  await page.click(`${ card } .save`);
  await page.waitForSelector(`${ card } .save-preview`);
  e.preview = await text(`${ card } .save-preview`);
  e.previewWrites = await page.$$eval(`${ card } .write-order li`, (ls) => ls.map((l) => l.textContent.trim()));
  e.previewChanges = await page.$$eval(`${ card } .changes tbody tr`, (rows) => rows.map((x) => [...x.cells].map((c) => c.textContent.replace(/\s+/g, ' ').trim()).join(' ')));
  e.previewTriples = await text(`${ card } .save-preview .triples`);
  e.previewTotals = await text(`${ card } .save-preview .totals`);
  e.previewLocks = await text(`${ card } .save-preview .locks`);
  if (process.env.LT_PLAN) {
    // `leasetune plan --set` for the page's writes, on the installation as
    // it is while the preview shows: what the page's plan must equal.
    const argv = JSON.parse(process.env.LT_PLAN);
    const sets = e.previewWrites.flatMap((w) => ['--set', w]);

    e.cliPlan = JSON.parse(execFileSync(argv[0], [...argv.slice(1), ...sets], { encoding: 'utf8' }));
  }
  await page.$eval(`${ card } .save-preview`, (el) => el.scrollIntoView({ block: 'center' }));
  await shot('save-preview');
  await page.click(`${ card } .confirm`);
  await page.waitForSelector(`${ card } .saved`, { timeout: 60000 });
  e.saved = await text(`${ card } .saved`);
  step('saved a valid triple');

  // What follows comes through the store's watch: the Settings' new
  // values, the triple pending until the settle time, then in effect.
  const want = process.env.LT_VALID_SHOWN;

  await page.waitForFunction((sel, w) => (document.querySelector(sel) || { textContent: '' }).textContent.includes(w),
    { timeout: 60000 }, `${ card } .pending`, want);
  e.pending = await text(`${ card } .pending`);
  await page.$eval(card, (c) => c.scrollIntoView({ block: 'start' }));
  await shot('pending');
  step('saw the triple pending');
  await page.waitForFunction((sel, w) => (document.querySelector(sel) || { textContent: '' }).textContent.includes(w),
    { timeout: 90000 }, `${ card } .in-effect`, want);
  e.after = await view(page);
  step('saw the triple in effect');

  await page.evaluate(() => window.scrollTo(0, 0));
  await shot('leader-election', true);
  e.loggedOut = await page.evaluate(() => !!window.hostLoggedOut);
  e.actions = await page.evaluate(() => window.hostActions);
  step('took the screenshot');
}

async function viewer(browser, r) {
  const ctx = await browser.createBrowserContext();

  await ctx.setCookie({
    name: 'R_SESS', value: process.env.LT_VIEWER, domain: new URL(url).hostname, path: '/', httpOnly: true, secure: true
  });
  const page = await setUp(ctx, r, 'viewer');
  const { step, shot } = helpers(page, r);
  const v = (r.viewer = {});

  await open(page, r);
  v.view = await view(page);
  await shot('read-only', true);
  step('viewer: read the read-only page');

  // A PUT of a Setting forced through the page's own path: the store's
  // request, as the page's Save makes it, with the Setting as read.
  const [name, value] = process.env.LT_FORCED.split('=');

  v.forced = await page.evaluate(async(name, value) => {
    const store = window.hostStore;
    const setting = JSON.parse(JSON.stringify(store.getters['management/byId']('management.cattle.io.setting', name)));

    try {
      await store.dispatch('management/request', {
        url: `/v1/management.cattle.io.settings/${ name }`, method: 'PUT', data: { ...setting, value }, redirectUnauthorized: false
      });

      return { status: 200 };
    } catch (e) {
      return { status: e._status || 0, body: JSON.parse(JSON.stringify(e)) };
    }
  }, name, value);
  v.loggedOut = await page.evaluate(() => !!window.hostLoggedOut);
  v.actions = await page.evaluate(() => window.hostActions);
  step('viewer: forced a PUT');
}

// setUp opens a page in ctx with interception and logging.
async function setUp(ctx, r, who) {
  const page = await ctx.newPage();

  page.on('console', (m) => r.console.push(`${ who } ${ m.type() }: ${ m.text() }`));
  page.on('pageerror', (e) => r.console.push(`${ who } pageerror: ${ e.message }`));
  page.on('requestfailed', (q) => r.console.push(`${ who } requestfailed: ${ q.method() } ${ q.url() } ${ q.failure() && q.failure().errorText }`));
  await page.setViewport({ width: 1280, height: 1000, deviceScaleFactor: 1 });
  page.setDefaultTimeout(30000);
  r.seen[who] = await intercept(page, { strict: true });
  r.pages.push(page);

  return page;
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath:      process.env.CHROMIUM,
    headless:            true,
    acceptInsecureCerts: true, // the stand-in's test certificate
    args:                ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--font-render-hinting=none'],
  });
  const r = {
    steps: [], console: [], seen: {}, pages: []
  };

  try {
    await editor(browser, r);
    await viewer(browser, r);
  } catch (e) {
    r.error = e.stack || String(e);
    for (const [i, p] of r.pages.entries()) {
      await p.screenshot({ path: path.join(out, `failed-${ i }.png`), fullPage: true }).catch(() => {});
      r[`failedText${ i }`] = await p.$eval('body', (b) => b.innerText.slice(0, 3000)).catch(() => '');
    }
  } finally {
    for (const p of r.pages) {
      await p.evaluate(() => {
        window.hostClosing = true;
      }).catch(() => {});
    }
    delete r.pages;
    fs.writeFileSync(path.join(out, 'console.log'), `${ r.console.join('\n') }\n`);
    await browser.close();
  }
  process.stdout.write(`${ JSON.stringify(r) }\n`);
}

main().catch((e) => {
  process.stdout.write(`${ JSON.stringify({ error: e.stack || String(e) }) }\n`);
  process.exit(0);
});
