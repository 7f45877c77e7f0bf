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
// Environment: what ./session.js reads (LT_RANCHER, LT_USER, LT_PASSWORD,
// CHROMIUM, LT_OUT), and LT_INVALID (a retry period the rules refuse), LT_TRIPLE (the valid
// triple, "lease/renew/retry"), LT_REFUSED (a triple the webhook refuses
// after that one).
const path = require('path');
const {
  base, out, helpers, run
} = require('./session');

const card = '.triple-card[data-component="fleet-agent"]';
const field = (f) => `#fleet-agent-${ f }`;
const FIELDS = ['leaseDuration', 'renewDeadline', 'retryPeriod'];
const tripleOf = (s) => (s || '//').split('/');

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

run(async(page, result, shot) => {
  result.previews = [];
  await openPage(page, result, shot);
  await saveAndRefuse(page, result, shot);
});
