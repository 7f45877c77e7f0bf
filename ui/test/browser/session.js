// What the scripts that drive Rancher's real dashboard share
// (tests/upstream/rancher: rancher.js for leasetune's page, apps.js for the
// chart's install form, apps-install.js for an install and an upgrade;
// questions.js reads the form): Debian's chromium through puppeteer-core, every
// request intercepted (./intercept.js), Rancher's own login page, a
// screenshot per step, and one JSON object on stdout with what was seen,
// which the Go test judges.
//
// Environment: LT_RANCHER (Rancher's URL), LT_USER and LT_PASSWORD,
// CHROMIUM (the browser), LT_OUT (screenshots and the console log).
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');
const { intercept } = require('./intercept');

const base = process.env.LT_RANCHER;
const out = process.env.LT_OUT;

// squash is an element's text as a user reads it: runs of white space as
// one space, trimmed.
const squash = (s) => (s || '').replace(/\s+/g, ' ').trim();

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

// session launches the browser, opens a page whose every request is
// intercepted and logged, logs in, runs steps(page, result, shot) and
// prints result as one JSON object; result.seen holds the requests, the
// websockets and the violations. A step that throws ends the session with
// result.error, the page's URL and text, the requests still unanswered and
// a screenshot, failed.png. Never exits non-zero: the Go test reads the
// JSON.
async function session(steps) {
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
  const shot = async(name, fullPage = false) => {
    try {
      await page.screenshot({ path: path.join(out, `${ name }.png`), fullPage });
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
    await steps(page, result, shot);
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

// run runs session(steps) as a script's main.
function run(steps) {
  session(steps).catch((e) => {
    process.stdout.write(`${ JSON.stringify({ error: e.stack || String(e) }) }\n`);
    process.exit(0);
  });
}

module.exports = {
  base, out, squash, helpers, login, run
};
