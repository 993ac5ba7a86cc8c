// The status page of a hub and of its leaf (docs/contract.md §6.5, §26.6) in headless
// Chromium, against a real cluster of the plait binary that
// tests/multiprocess/statuspage_test.go (TestStatusPageHubs) starts:
//
//   PLAIT_HUB_URL       the page of hub H (A is the core; the leaf L dials H)
//   PLAIT_LEAF_URL      the page of leaf L, which wrote PLAIT_LEAF_WRITES records
//   PLAIT_LEAF_WRITES   how many
//   PLAIT_SCREENSHOTS   where each page's screenshot goes
//   PLAIT_CHROMIUM      the browser (Debian's chromium)
//
// It prints RESULT lines (name=value) the Go test checks, and exits 1 with the reason on
// the first failed check. Every wait polls with a bound.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const shots = env('PLAIT_SCREENSHOTS');
mkdirSync(shots, { recursive: true });
const writes = env('PLAIT_LEAF_WRITES');

function fail(msg) {
  console.error('FAIL ' + msg);
  process.exitCode = 1;
  throw new Error(msg);
}

async function until(what, ms, cond) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try {
      last = await cond();
      if (last) return last;
    } catch (e) {
      last = e.message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  fail(`${what}: not within ${ms} ms (last: ${JSON.stringify(last)})`);
}

const browser = await chromium.launch({ executablePath: env('PLAIT_CHROMIUM'), args: ['--no-sandbox'] });
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  page.on('pageerror', (e) => fail(`the page threw: ${e.message}`));

  // The hub: its leaves section shows the one leaf connected, the four lag bands with the
  // leaf in one of them, and no hub section (a hub is no leaf).
  await page.goto(env('PLAIT_HUB_URL'));
  const hub = await until('the hub page showing its one leaf in the lag bands', 20000, () => page.evaluate(() => {
    const view = document.querySelector('#leaves-view');
    const bands = [...document.querySelectorAll('#leaf-lag tbody tr')].map((r) => `${r.dataset.band}:${r.children[1].textContent}`);
    const total = bands.reduce((n, b) => n + Number(b.split(':')[1]), 0);
    const ok = !view.hidden && document.querySelector('#hub-view').hidden && bands.length === 4 && total === 1 &&
      document.querySelector('#leaves-facts').textContent.startsWith('1 of ');
    return ok && { bands: bands.join(','), facts: document.querySelector('#leaves-facts').textContent };
  }));
  console.log('RESULT hub_bands=' + hub.bands);
  console.log('RESULT hub_connected=' + hub.facts.match(/^(\d+) of/)[1]);
  await page.screenshot({ path: join(shots, 'hub-leaves.png'), fullPage: true });

  // The leaf: its hub section shows the hub connected and the write checkpoint reached: the
  // core has every write of the leaf; no leaves section (a leaf is no hub).
  await page.goto(env('PLAIT_LEAF_URL'));
  const leaf = await until('the leaf page showing its hub and every write in the core', 20000, () => page.evaluate(() => {
    const cp = document.querySelector('#checkpoint');
    const ok = !document.querySelector('#hub-view').hidden && document.querySelector('#leaves-view').hidden &&
      document.querySelector('#hub-facts').textContent.includes('connected') && cp.dataset.own !== '0' && cp.dataset.own === cp.dataset.core;
    return ok && { own: cp.dataset.own, core: cp.dataset.core, text: document.querySelector('#checkpoint-text').textContent };
  }));
  if (leaf.own !== writes) fail(`the leaf's own seq ${leaf.own}, want ${writes}`);
  console.log(`RESULT leaf_own=${leaf.own} leaf_core=${leaf.core}`);
  console.log('RESULT leaf_text=' + JSON.stringify(leaf.text));
  await page.screenshot({ path: join(shots, 'leaf-hub.png'), fullPage: true });
} finally {
  await browser.close();
}
