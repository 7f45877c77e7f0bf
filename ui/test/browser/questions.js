// The questions' form of Rancher's install wizard, as apps.js and
// apps-install.js read it (shell components/Questions: a side tab per
// group, a row per question, data-testid "<type>-row-<variable>").
const TABS = '.step__values__content ul[role="tablist"] li a';
const PANELS = '.step__values__content section[role="tabpanel"]';

// showTab selects the tab whose panel is name and waits until it shows.
async function showTab(page, name) {
  await page.evaluate((sel, n) => [...document.querySelectorAll(sel)].find((a) => a.getAttribute('aria-controls') === n).click(), TABS, name);
  await page.waitForFunction((sel, n) => [...document.querySelectorAll(sel)]
    .some((s) => s.id === n && s.getAttribute('aria-hidden') === 'false'), {}, PANELS, name);
}

// readTabs reads every tab's rows in order: [{ name, rows: [{ type,
// variable, text (label and description), value (a checkbox's "true" or
// "false") }] }]; afterTab(n) runs after the n-th tab is read.
async function readTabs(page, afterTab = async() => {}) {
  const tabs = [];
  const names = await page.$$eval(TABS, (as) => as.map((a) => a.getAttribute('aria-controls')));

  for (const name of names) {
    await showTab(page, name);
    const rows = await page.evaluate((sel, n) => {
      const panel = [...document.querySelectorAll(sel)].find((s) => s.id === n);

      return [...panel.querySelectorAll('[data-testid*="-row-"]')].map((r) => {
        const [type, variable] = r.dataset.testid.split(/-row-(.*)/s);
        const box = r.querySelector('input[type="checkbox"], [aria-checked]');
        const input = r.querySelector('input:not([type="checkbox"]), textarea');
        let value = input ? input.value : '';

        if (type === 'boolean' && box) {
          value = String(box.type === 'checkbox' ? box.checked : box.getAttribute('aria-checked') === 'true');
        }

        return {
          type, variable, text: r.innerText.replace(/\s+/g, ' ').trim(), value
        };
      });
    }, PANELS, name);

    tabs.push({ name, rows });
    await afterTab(tabs.length);
  }

  return tabs;
}

module.exports = { TABS, PANELS, showTab, readTabs };
