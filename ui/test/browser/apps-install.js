#!/usr/bin/env node
// Installs or upgrades leasetune from Rancher's Apps pages in Rancher's real
// dashboard (tests/upstream/rancher, the Apps install case), as an operator
// does: opens the chart's page at a version (shell mixins/chart.js
// chartLocation: Apps → Charts → the card, with the version chosen), clicks
// Install or Upgrade, goes past the wizard's first step (the release's name
// and namespace, fixed by the chart's annotations), sets answers in the
// questions' form (components/Questions: a side tab per group, a row per
// question, data-testid "<type>-row-<variable>"), then edits the values as
// YAML where the form has no question (install.vue's "Edit YAML": the
// YamlEditor's CodeMirror), and clicks the wizard's finish button
// (install.vue finish: the ClusterRepo's install or upgrade action, which
// starts Rancher's helm operation). It reads back what the form showed
// before it changed anything. Every request is intercepted
// (./intercept.js).
//
// Environment: what ./session.js reads; LT_REPO (the ClusterRepo), LT_CHART
// (the chart's name), LT_VERSION, LT_ACTION (Install or Upgrade, the
// button's label), LT_ANSWERS (JSON: variable → value for the form), LT_YAML
// (JSON: [[regular expression, replacement], …] applied to the values'
// YAML).
const { base, squash, helpers, run } = require('./session');
const { showTab, readTabs } = require('./questions');

const repo = process.env.LT_REPO;
const chart = process.env.LT_CHART;
const version = process.env.LT_VERSION;
const action = process.env.LT_ACTION;
const answers = JSON.parse(process.env.LT_ANSWERS || '{}') || {};
const yamlEdits = JSON.parse(process.env.LT_YAML || '[]') || [];

// clickButton clicks the button under root whose text is label.
async function clickButton(page, root, label) {
  const b = await page.evaluateHandle((r, l) => [...document.querySelectorAll(`${ r } button`)].find((e) => e.textContent.replace(/\s+/g, ' ').trim() === l), root, label);

  if (!b.asElement()) {
    throw new Error(`no button "${ label }" in ${ root }`);
  }
  await b.click();
}

// showRow selects the tab that holds the question's row and returns the
// row's selector.
async function showRow(page, variable) {
  const { sel, panel } = await page.evaluate((v) => {
    const row = [...document.querySelectorAll('.step__values__content [data-testid*="-row-"]')].find((r) => r.dataset.testid.split(/-row-(.*)/s)[1] === v);

    if (!row) {
      return { sel: '', panel: '' };
    }
    const panel = row.closest('section[role="tabpanel"]');

    return { sel: `[data-testid="${ row.dataset.testid }"]`, panel: panel && panel.getAttribute('aria-hidden') !== 'false' ? panel.id : '' };
  }, variable);

  if (!sel) {
    throw new Error(`the form has no question ${ variable }`);
  }
  if (panel) {
    await showTab(page, panel);
  }
  await page.waitForFunction((s) => {
    const r = document.querySelector(s);

    return r && r.offsetParent !== null;
  }, {}, sel);

  return sel;
}

// answer sets one question: a checkbox to true or false, an input to the
// text.
async function answer(page, variable, value) {
  const sel = await showRow(page, variable);

  if (typeof value === 'boolean') {
    const checked = await page.$eval(sel, (r) => {
      const box = r.querySelector('input[type="checkbox"], [aria-checked]');

      return box.type === 'checkbox' ? box.checked : box.getAttribute('aria-checked') === 'true';
    });

    if (checked !== value) {
      await page.click(`${ sel } .checkbox-container, ${ sel } [aria-checked]`);
    }

    return;
  }
  const input = `${ sel } input:not([type="checkbox"])`;

  await page.click(input, { clickCount: 3 });
  await page.keyboard.press('Backspace');
  await page.type(input, String(value));
}

// readRows is every question's value the form shows, by variable.
async function readRows(page) {
  return Object.fromEntries((await readTabs(page)).flatMap((t) => t.rows.map((r) => [r.variable, r.value])));
}

run(async(page, result, shot) => {
  const { step } = helpers(page, result);
  const query = `repo-type=cluster&repo=${ encodeURIComponent(repo) }&chart=${ encodeURIComponent(chart) }&version=${ encodeURIComponent(version) }`;

  await page.goto(`${ base }/dashboard/c/local/apps/charts/chart?${ query }`, { waitUntil: 'networkidle2' });
  await page.waitForSelector('[data-testid="btn-chart-install"]', { timeout: 120000 });
  result.installButton = squash(await page.$eval('[data-testid="btn-chart-install"]', (e) => e.textContent));
  await shot('1-chart');
  step('opened the chart');

  await page.click('[data-testid="btn-chart-install"]');
  await page.waitForSelector('.install-steps .wizard');
  await page.waitForFunction(() => [...document.querySelectorAll('.install-steps button')].some((b) => b.textContent.trim() === 'Next'));
  result.wizardText = squash(await page.$eval('.install-steps', (e) => e.innerText)).slice(0, 600);
  await shot('2-basics');
  await clickButton(page, '.install-steps', 'Next');
  await page.waitForSelector('.step__values__content [data-testid*="-row-"]', { timeout: 60000 });
  result.before = await readRows(page);
  step('read the form');

  for (const [variable, value] of Object.entries(answers)) {
    await answer(page, variable, value);
  }
  result.after = await readRows(page);
  await shot('3-answered', true);
  step('answered the form');

  if (yamlEdits.length) {
    // "Edit YAML": the second option of the form/YAML button group.
    await page.evaluate(() => document.querySelectorAll('[data-testid="btn-group-options-view"] button')[1].click());
    await page.waitForSelector('.step__values__content .CodeMirror');
    result.yaml = await page.evaluate((edits) => {
      const cm = document.querySelector('.step__values__content .CodeMirror').CodeMirror;
      let text = cm.getValue();

      for (const [re, to] of edits) {
        const r = new RegExp(re, 'm');

        if (!r.test(text)) {
          throw new Error(`the values' YAML has no match for ${ re }`);
        }
        text = text.replace(r, to);
      }
      cm.setValue(text);

      return text;
    }, yamlEdits);
    await shot('4-yaml', true);
    step('edited the YAML');
  }

  await clickButton(page, '.install-steps', action);
  // install.vue finish: after the operation is created the page opens its
  // logs and leaves the wizard (done()).
  await page.waitForFunction(() => !document.querySelector('.install-steps .wizard'), { timeout: 120000 });
  result.afterURL = page.url();
  await shot('5-done');
  step(`clicked ${ action }`);
});
