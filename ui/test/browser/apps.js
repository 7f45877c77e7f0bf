#!/usr/bin/env node
// Drives Debian's chromium (puppeteer-core) through the Apps pages of
// Rancher's real dashboard, served by the real Rancher, as an operator
// installing leasetune would (tests/upstream/rancher, the Apps case): logs
// in, opens Apps → Charts of the local cluster (shell
// pages/c/_cluster/apps/charts/index.vue), where leasetune's chart comes
// from a ClusterRepo the Go test made, clicks its card (chart.vue: the
// chart's README), then Install (or Upgrade, where the release is already
// installed: mixins/chart.js finds the App at the chart's
// catalog.cattle.io/namespace and release-name), and reads the wizard
// (install.vue): the release's name and namespace on its first step, then
// on its second the form Rancher makes of the chart's questions.yaml
// (components/Questions: a side tab per group, a row per question,
// data-testid "<type>-row-<variable>"). It reads each tab's rows: the
// variable, the text (label and description) and the value shown. It
// installs nothing. Every request is intercepted (./intercept.js).
//
// Environment: what ./session.js reads, and LT_CHART (the chart's display
// name, catalog.cattle.io/display-name).
const {
  base, squash, helpers, run
} = require('./session');
const { readTabs } = require('./questions');

const chartName = process.env.LT_CHART;

// openCharts opens Apps → Charts and clicks leasetune's card.
async function openCharts(page, result, shot) {
  const { step } = helpers(page, result);
  const titles = '[data-testid="app-chart-cards-container"] [data-testid="item-card-header-title"]';

  await page.goto(`${ base }/dashboard/c/local/apps/charts`, { waitUntil: 'networkidle2' });
  await page.waitForFunction((sel, name) => [...document.querySelectorAll(sel)].some((e) => e.textContent.includes(name)),
    { timeout: 120000 }, titles, chartName);
  result.cards = await page.$$eval(titles, (es) => es.map((e) => e.textContent.replace(/\s+/g, ' ').trim()));
  await shot('2-charts');
  step('saw the chart in Apps');

  const card = await page.evaluateHandle((sel, name) => [...document.querySelectorAll(sel)].find((e) => e.textContent.includes(name)), titles, chartName);

  await card.click();
  await page.waitForSelector('[data-testid="chart-header-title"]');
  await page.waitForFunction(() => document.querySelector('.chart-body__readme')?.textContent.trim(), { timeout: 60000 }).catch(() => {});
  result.chartHeader = squash(await page.$eval('[data-testid="chart-header-title"]', (e) => e.textContent));
  result.chartReadme = squash(await page.$eval('.chart-body__readme', (e) => e.innerText).catch(() => '')).slice(0, 4000);
  result.installButton = squash(await page.$eval('[data-testid="btn-chart-install"]', (e) => e.textContent));
  await shot('3-chart', true);
  step('opened the chart');
}

// readForm clicks Install, reads the wizard's first step, goes on to the
// values and reads every tab of the questions' form.
async function readForm(page, result, shot) {
  const { step } = helpers(page, result);

  await page.click('[data-testid="btn-chart-install"]');
  await page.waitForSelector('.install-steps .wizard');
  await page.waitForFunction(() => [...document.querySelectorAll('.install-steps button')].some((b) => b.textContent.trim() === 'Next'));
  result.installURL = page.url();
  // The wizard's heading ("<chart> <version> Install: Step 1", or Edit
  // for an installed release) and the step's text.
  result.wizardText = squash(await page.$eval('.install-steps', (e) => e.innerText)).slice(0, 600);
  // The release's name and namespace: shown, fixed by the chart's
  // annotations, for a new install; an installed release's are its own and
  // not shown (install.vue showNameEditor).
  const name = await page.$('[data-testid="NameNsDescriptionNameInput"] input, input[data-testid="NameNsDescriptionNameInput"]');

  if (name) {
    result.name = await name.evaluate((i) => ({ value: i.value, disabled: i.disabled }));
    result.namespace = squash(await page.$eval('[data-testid$="-namespace"], [data-testid$="-namespace-create"]',
      (e) => `${ e.innerText } ${ [...e.querySelectorAll('input')].map((i) => i.value).join(' ') }`).catch(() => ''));
  }
  await shot('4-install-basics');
  step('opened the install form');

  const next = await page.evaluateHandle(() => [...document.querySelectorAll('.install-steps button')].find((b) => b.textContent.replace(/\s+/g, ' ').trim() === 'Next'));

  if (!next.asElement()) {
    throw new Error('the wizard has no Next button');
  }
  await next.click();
  await page.waitForSelector('.step__values__content [data-testid*="-row-"]', { timeout: 60000 });
  result.tabs = await readTabs(page, (n) => shot(`5-values-${ n }`, true));
  step('read the questions form');
}

run(async(page, result, shot) => {
  await openCharts(page, result, shot);
  await readForm(page, result, shot);
});
