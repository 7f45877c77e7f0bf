#!/usr/bin/env node
// Drives Debian's chromium (puppeteer-core) through Rancher's real
// dashboard, served by the real Rancher, as a user would
// (tests/upstream/rancher, case 7): logs in on Rancher's login page, opens
// Global Settings, follows its "Leader election" entry (leasetune's UI
// extension, which the dashboard loads from its UIPlugin), and, when the
// page could read leasetune's data, types a value the page refuses, saves
// a valid triple, and tries one leasetune's webhook refuses. Each step is
// recorded, with a screenshot; it prints one JSON object with what it saw,
// and the Go test judges it.
//
// Environment: LT_RANCHER (Rancher's URL), LT_USER and LT_PASSWORD,
// CHROMIUM (the browser), LT_OUT (screenshots and the console log),
// LT_TRIPLE (the valid triple, "lease/renew/retry"), LT_REFUSED (a retry
// period the webhook refuses with that triple).
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const base = process.env.LT_RANCHER;
const out = process.env.LT_OUT;
const [lease, renew, retry] = (process.env.LT_TRIPLE || '//').split('/');
const card = '.triple-card[data-component="fleet-agent"]';
const field = (f) => `#fleet-agent-${ f }`;

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
  // The page's first reads end with its triple cards, or with its error
  // banner when leasetune's data cannot be read.
  await page.waitForFunction((sel) => document.querySelector(sel) || document.querySelector('.page-error, .banner.error, .error'), { timeout: 60000 }, card);
  await new Promise((r) => setTimeout(r, 2000));
  result.heading = await page.$eval('h1', (e) => e.textContent.replace(/\s+/g, ' ').trim()).catch(() => '');
  result.banners = await page.$$eval('.banner, .error, .page-error, .server-error, [role="alert"]',
    (es) => [...new Set(es.map((e) => e.textContent.replace(/\s+/g, ' ').trim()).filter((t) => t))]);
  result.inEffect = await page.$$eval('.triple-card', (cs) => cs.map((c) => `${ c.dataset.component }: ${ c.querySelector('.in-effect')?.textContent.replace(/\s+/g, ' ').trim() || '' }`));
  await page.screenshot({ path: path.join(out, 'leader-election.png'), fullPage: true });
  step('opened the page');
  result.pageUnread = !await page.$(card);
}

// saveAndRefuse types a value the page refuses, saves a valid triple and
// tries one the webhook refuses, recording what the page shows.
async function saveAndRefuse(page, result, shot) {
  const { step, text, type } = helpers(page, result);
  const confirm = async() => {
    await page.click(`${ card } .save`);
    await page.waitForSelector(`${ card } .save-preview, ${ card } .server-error`);
    if (await page.$(`${ card } .save-preview`)) {
      await page.click(`${ card } .confirm`);
    }
  };

  await type(field('retryPeriod'), '999ms');
  await page.waitForSelector(`${ card } [data-field="retryPeriod"] .field-errors`);
  result.clientError = await text(`${ card } [data-field="retryPeriod"] .field-errors`);
  await shot('4-invalid-value');
  step('typed an invalid value');

  await type(field('leaseDuration'), lease);
  await type(field('renewDeadline'), renew);
  await type(field('retryPeriod'), retry);
  await confirm();
  await page.waitForSelector(`${ card } .saved, ${ card } .server-error`);
  result.saved = await page.$eval(`${ card } .saved, ${ card } .server-error`, (e) => `${ e.className }: ${ e.textContent.replace(/\s+/g, ' ').trim() }`);
  await shot('5-saved');
  step('saved a valid triple');

  await type(field('retryPeriod'), process.env.LT_REFUSED);
  await confirm();
  await page.waitForSelector(`${ card } .server-error`);
  result.serverError = await text(`${ card } .server-error`);
  await shot('6-refused');
  step('saw the webhook refuse a value');
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
  const result = { steps: [] };
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

    await login(page, result, shot);
    await openPage(page, result, shot);
    if (!result.pageUnread) {
      await saveAndRefuse(page, result, shot);
    }
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
