#!/usr/bin/env node
// Drives Debian's chromium (puppeteer-core) through Rancher's real
// dashboard, served by the real Rancher, as a user would
// (tests/upstream/rancher, case 7): logs in on Rancher's login page, opens
// Global Settings, follows its "Leader election" entry (leasetune's UI
// extension, which the dashboard loads from its UIPlugin), waits until the
// page has read the Settings and leasetune's ElectionStatus through the
// dashboard's store, types a value the page refuses, saves a valid triple,
// and tries one leasetune's webhook refuses. Every request is intercepted
// (./intercept.js): no Rancher token minted (Rancher's own login, POST
// /v3-public/localProviders/local?action=login, is not one), no proxy
// path, no credential header. Each step is recorded, with a screenshot; it
// prints one JSON object with what it saw, and the Go test judges it.
//
// Environment: LT_RANCHER (Rancher's URL), LT_USER and LT_PASSWORD,
// CHROMIUM (the browser), LT_OUT (screenshots and the console log),
// LT_INVALID (a retry period the rules refuse), LT_TRIPLE (the valid
// triple, "lease/renew/retry"), LT_REFUSED (a triple the webhook refuses
// after that one).
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');
const { intercept } = require('./intercept');

const base = process.env.LT_RANCHER;
const out = process.env.LT_OUT;
const card = '.triple-card[data-component="fleet-agent"]';
const field = (f) => `#fleet-agent-${ f }`;
const FIELDS = ['leaseDuration', 'renewDeadline', 'retryPeriod'];
const tripleOf = (s) => (s || '//').split('/');

function helpers(page, result) {
  return {
    step: (name) => result.steps.push(name),
    text: (sel) => page.$eval(sel, (e) => e.textContent.replace(/\s+/g, ' ').trim()),
    type: async(sel, value) => {
      await page.click(sel, { clickCount: 3 });
      await page.keyboard.press('Backspace');
      await page.type(sel, value);
    },
  };
}

// login logs in on Rancher's login page (shell pages/auth/login.vue).
async function login(page, result, shot) {
  const { step } = helpers(page, result);

  await page.goto(`${ base }/dashboard/auth/login`, { waitUntil: 'networkidle2' });
  await page.waitForSelector('input[data-testid="local-login-username"], [data-testid="local-login-username"] input');
  await shot('1-login');
  const user = await page.$('input[data-testid="local-login-username"]') || await page.$('[data-testid="local-login-username"] input');

  await user.type(process.env.LT_USER);
  const pw = await page.$('input[data-testid="local-login-password"]') || await page.$('[data-testid="local-login-password"] input');

  await pw.type(process.env.LT_PASSWORD);
  await page.click('[data-testid="login-submit"]');
  await page.waitForFunction(() => !location.pathname.includes('/auth/'), { timeout: 90000 });
  step('logged in');
}

// openPage goes to Global Settings and follows the Leader election entry.
async function openPage(page, result, shot) {
  const { step } = helpers(page, result);
  const links = 'nav a, .side-nav a';

  await page.goto(`${ base }/dashboard/c/_/settings/management.cattle.io.setting`, { waitUntil: 'networkidle2' });
  await page.waitForFunction((sel) => [...document.querySelectorAll(sel)].some((a) => a.textContent.includes('Leader election')), { timeout: 90000 }, links);
  result.settingsNav = await page.$$eval(links, (as) => as.map((a) => a.textContent.replace(/\s+/g, ' ').trim()).filter((t) => t));
  await shot('2-global-settings');
  step('saw Leader election in Global Settings');

  const entry = await page.evaluateHandle((sel) => [...document.querySelectorAll(sel)].find((a) => a.textContent.includes('Leader election')), links);

  await entry.click();
  await page.waitForFunction(() => location.pathname.endsWith('/settings/leader-election'));
  // The page's first reads end with its three triple cards, what is in
  // effect (from the ElectionStatus) and the clusters; or with an error.
  await page.waitForFunction((sel) => (document.querySelectorAll('.triple-card').length === 3 &&
    [...document.querySelectorAll('.triple-card .in-effect')].every((e) => !e.textContent.includes('not known')) &&
    document.querySelector('.clusters-summary')) || document.querySelector('.leader-election .status-error, .leader-election .setting-error'),
  { timeout: 90000 }, card);
  await new Promise((r) => setTimeout(r, 2000));
  result.heading = await page.$eval('.leader-election h1', (e) => e.textContent.replace(/\s+/g, ' ').trim()).catch(() => '');
  // What would stop or limit the admin (a read-only page, a Setting or
  // the ElectionStatus not read), and the page's notes.
  result.banners = await page.$$eval('.leader-election .read-only-banner, .leader-election .setting-error, .leader-election .status-error',
    (es) => es.map((e) => e.textContent.replace(/\s+/g, ' ').trim()));
  result.notes = await page.$$eval('.leader-election .note', (es) => es.map((e) => e.textContent.replace(/\s+/g, ' ').trim()));
  result.inEffect = await page.$$eval('.triple-card', (cs) => cs.map((c) => `${ c.dataset.component }: ${ c.querySelector('.in-effect')?.textContent.replace(/\s+/g, ' ').trim() || '' }`));
  result.clusters = await page.$eval('.clusters-summary', (e) => e.textContent.replace(/\s+/g, ' ').trim()).catch(() => '');
  result.editable = await page.$$eval(`${ card } .field input`, (is) => is.map((i) => !i.disabled));
  await page.screenshot({ path: path.join(out, 'leader-election.png'), fullPage: true });
  step('opened the page');
}

// outcome is a save's banner: "saved: <text>" or "refused: <text>".
function outcome(e) {
  return `${ e.classList.contains('saved') ? 'saved' : 'refused' }: ${ e.textContent.replace(/\s+/g, ' ').trim() }`;
}

// saveAndRefuse types a value the page refuses, saves a valid triple and
// tries one the webhook refuses, recording what the page shows.
async function saveAndRefuse(page, result, shot) {
  const { step, text, type } = helpers(page, result);
  const typeTriple = async(s) => {
    const t = tripleOf(s);

    for (let i = 0; i < 3; i++) {
      await type(field(FIELDS[i]), t[i]);
    }
  };
  const confirm = async() => {
    await page.click(`${ card } .save`);
    await page.waitForSelector(`${ card } .save-preview, ${ card } .order-error`);
    result.previews.push(await page.$eval(`${ card } .save-preview, ${ card } .order-error`, (e) => e.textContent.replace(/\s+/g, ' ').trim()));
    if (await page.$(`${ card } .save-preview`)) {
      await page.click(`${ card } .confirm`);
    }
  };

  await type(field('retryPeriod'), process.env.LT_INVALID);
  await page.waitForSelector(`${ card } [data-field="retryPeriod"] .field-errors`);
  result.clientError = await text(`${ card } [data-field="retryPeriod"] .field-errors`);
  result.saveDisabledWhenInvalid = await page.$eval(`${ card } .save`, (b) => b.disabled);
  await shot('4-invalid-value');
  step('typed an invalid value');

  await typeTriple(process.env.LT_TRIPLE);
  await confirm();
  await page.waitForSelector(`${ card } .saved, ${ card } .server-error`, { timeout: 60000 });
  result.saved = await page.$eval(`${ card } .saved, ${ card } .server-error`, outcome);
  await shot('5-saved');
  step('saved a valid triple');

  await typeTriple(process.env.LT_REFUSED);
  await confirm();
  await page.waitForSelector(`${ card } .server-error, ${ card } .saved`, { timeout: 60000 });
  result.serverError = await page.$eval(`${ card } .server-error, ${ card } .saved`, outcome);
  await page.$eval(`${ card } .server-error, ${ card } .saved`, (e) => e.scrollIntoView({ block: 'center' }));
  await shot('6-refused');
  step('saw the webhook refuse a triple');
  result.loggedOut = await page.evaluate(() => location.pathname.includes('/auth/'));
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath:      process.env.CHROMIUM,
    headless:            true,
    acceptInsecureCerts: true, // Rancher's own CA, on loopback
    args:                ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--font-render-hinting=none'],
  });
  const log = [];
  const result = { steps: [], previews: [] };
  const pending = new Map(); // requests still without an answer, for a step that waits forever
  let page;
  const shot = async(name) => {
    try {
      await page.screenshot({ path: path.join(out, `${ name }.png`), fullPage: false });
    } catch (e) {
      log.push(`screenshot ${ name }: ${ e.message }`);
    }
  };

  try {
    page = await browser.newPage();
    page.on('console', (m) => log.push(`${ m.type() }: ${ m.text() }`));
    page.on('pageerror', (e) => log.push(`pageerror: ${ e.message }`));
    page.on('requestfailed', (r) => {
      pending.delete(r);
      log.push(`requestfailed: ${ r.url() } ${ r.failure()?.errorText }`);
    });
    page.on('request', (r) => pending.set(r, Date.now()));
    page.on('requestfinished', (r) => pending.delete(r));
    page.on('response', (r) => {
      if (r.status() >= 400) {
        log.push(`response ${ r.status() }: ${ r.request().method() } ${ r.url() }`);
      }
    });
    await page.setViewport({ width: 1400, height: 1000, deviceScaleFactor: 1 });
    page.setDefaultTimeout(60000);
    result.seen = await intercept(page, { strict: false });

    await login(page, result, shot);
    await openPage(page, result, shot);
    await saveAndRefuse(page, result, shot);
  } catch (e) {
    result.error = e.stack || String(e);
    result.pendingRequests = [...pending.entries()].map(([r, t]) => `${ r.method() } ${ r.url() } (${ Math.round((Date.now() - t) / 1000) }s)`);
    await shot('failed');
    try {
      result.url = page.url();
      result.bodyText = (await page.$eval('body', (b) => b.innerText)).slice(0, 3000);
    } catch (e2) {
      // the page is gone
    }
  }
  fs.writeFileSync(path.join(out, 'console.log'), `${ log.join('\n') }\n`);
  result.console = log.slice(-80);
  await browser.close();
  process.stdout.write(`${ JSON.stringify(result) }\n`);
}

main().catch((e) => {
  process.stdout.write(`${ JSON.stringify({ error: e.stack || String(e) }) }\n`);
  process.exit(0);
});
