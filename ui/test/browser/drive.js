#!/usr/bin/env node
// Drives Debian's chromium (puppeteer-core: it downloads no browser)
// through the Leader election page in the stand-in shell the Go test
// (tests/integration/uiplugin/browser_test.go) serves, as a user would:
// opens Global Settings, chooses Leader election, types an invalid value,
// tries a triple the server refuses, saves a valid one. It prints one JSON
// object with what it saw; the Go test judges it and reads the Settings.
//
// Environment: LT_URL (the stand-in's base URL), CHROMIUM (the browser),
// LT_OUT (folder for screenshots and the browser's console log).
const fs = require('fs');
const path = require('path');
const puppeteer = require('puppeteer-core');

const url = process.env.LT_URL;
const out = process.env.LT_OUT;
const card = '.triple-card[data-component="fleet-agent"]';
const field = (f) => `#fleet-agent-${ f }`;

async function main() {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM,
    headless:       true,
    args:           ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--font-render-hinting=none'],
  });
  const log = [];
  const result = { steps: [] };

  try {
    const page = await browser.newPage();

    page.on('console', (m) => log.push(`${ m.type() }: ${ m.text() }`));
    page.on('pageerror', (e) => log.push(`pageerror: ${ e.message }`));
    page.on('requestfailed', (r) => log.push(`requestfailed: ${ r.url() } ${ r.failure()?.errorText }`));
    await page.setViewport({ width: 1280, height: 1000, deviceScaleFactor: 1 });
    page.setDefaultTimeout(30000);

    const step = (name) => result.steps.push(name);
    const text = (sel) => page.$eval(sel, (e) => e.textContent.replace(/\s+/g, ' ').trim());
    const type = async(sel, value) => {
      await page.click(sel, { clickCount: 3 });
      await page.keyboard.press('Backspace');
      await page.type(sel, value);
    };

    await page.goto(`${ url }/`, { waitUntil: 'networkidle0' });
    await page.waitForFunction('window.hostReady === true');
    result.hostErrors = await text('#errors');
    step('opened Global Settings');

    await page.click('a[data-nav="leader-election"]');
    await page.waitForSelector(`${ card } .in-effect`);
    await page.waitForSelector('.clusters-summary');
    await page.waitForFunction(() => document.querySelectorAll('.tradeoff-summary').length === 3 &&
      [...document.querySelectorAll('.tradeoff-summary')].every((e) => e.textContent.includes('requests/h')));
    result.view = await page.$$eval('.triple-card', (cards) => cards.map((c) => ({
      component: c.dataset.component,
      title:     c.querySelector('h2').textContent.trim(),
      inEffect:  c.querySelector('.in-effect b').textContent.trim(),
      fields:    [...c.querySelectorAll('tr[data-field]')].map((r) => ({
        field:  r.dataset.field,
        value:  r.querySelector('input').value,
        meta:   r.querySelector('.meta').textContent.replace(/\s+/g, ' ').trim(),
        source: r.querySelector('.source').textContent.trim(),
        readOnly: r.querySelector('input').readOnly,
        reason: r.querySelector('.readonly-reason')?.textContent.trim() || '',
      })),
      chartDrawn: (() => {
        const cv = c.querySelector('canvas');

        // Drawn: a blank canvas encodes to a few hundred bytes, a chart
        // with its axes, curves and markers to many thousands.
        return !!cv && cv.width > 0 && cv.toDataURL('image/png').length > 20000;
      })(),
    })));
    result.clusters = await text('.clusters-summary');
    result.clusterRows = await page.$$eval('.clusters-table tr[data-cluster]', (rows) => rows.map((r) => r.textContent.replace(/\s+/g, ' ').trim()));
    step('viewed the page');

    // An invalid value: refused as it is typed, with the server's message.
    await type(field('retryPeriod'), '999ms');
    await page.waitForSelector(`${ card } [data-field="retryPeriod"] .field-errors`);
    result.clientError = await text(`${ card } [data-field="retryPeriod"] .field-errors`);
    result.saveDisabledWhenInvalid = await page.$eval(`${ card } .save`, (b) => b.disabled);
    await page.screenshot({ path: path.join(out, 'invalid-value.png'), fullPage: false });
    step('typed an invalid value');

    // A triple valid on its own that the server refuses: it would leave a
    // cluster whose own entries set a 35s lease with an invalid triple.
    await type(field('leaseDuration'), '60s');
    await type(field('renewDeadline'), '40s');
    await type(field('retryPeriod'), '15s');
    result.liveCost = await text(`${ card } .live-cost`);
    await page.click(`${ card } .save`);
    await page.waitForSelector(`${ card } .save-preview`);
    result.refusedPreview = await text(`${ card } .save-preview`);
    await page.click(`${ card } .confirm`);
    await page.waitForSelector(`${ card } .server-error`);
    result.serverError = await text(`${ card } .server-error`);
    await page.$eval(`${ card } .server-error`, (e) => e.scrollIntoView({ block: 'center' }));
    await page.screenshot({ path: path.join(out, 'server-refusal.png'), fullPage: false });
    step('saw the server refuse a triple');

    // A valid triple, saved.
    await type(field('renewDeadline'), '30s');
    await page.click(`${ card } .save`);
    await page.waitForSelector(`${ card } .save-preview`);
    result.preview = await text(`${ card } .save-preview`);
    result.previewChanges = await page.$$eval(`${ card } .changes tbody tr`, (rows) => rows.map((r) => r.textContent.replace(/\s+/g, ' ').trim()));
    await page.$eval(`${ card } .save-preview`, (e) => e.scrollIntoView({ block: 'center' }));
    await page.screenshot({ path: path.join(out, 'save-preview.png'), fullPage: false });
    await page.click(`${ card } .confirm`);
    await page.waitForSelector(`${ card } .saved`);
    result.saved = await text(`${ card } .saved`);
    step('saved a valid triple');
    // The page reads again after the save, and while the triple waits for
    // the settle time, until it is in effect.
    await page.waitForFunction((sel) => document.querySelector(sel)?.textContent.includes('1m0s / 30s / 15s'), { timeout: 60000 }, `${ card } .in-effect b`);
    result.inEffectAfter = await text(`${ card } .in-effect b`);
    result.fieldsAfter = await page.$$eval(`${ card } tr[data-field] .meta`, (ms) => ms.map((m) => m.textContent.replace(/\s+/g, ' ').trim()));
    step('saw the saved triple in effect');

    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(out, 'leader-election.png'), fullPage: true });
    step('took the screenshot');
  } catch (e) {
    result.error = e.stack || String(e);
  } finally {
    fs.writeFileSync(path.join(out, 'console.log'), `${ log.join('\n') }\n`);
    result.console = log;
    await browser.close();
  }
  process.stdout.write(`${ JSON.stringify(result) }\n`);
}

main().catch((e) => {
  process.stdout.write(`${ JSON.stringify({ error: e.stack || String(e) }) }\n`);
  process.exit(0);
});
