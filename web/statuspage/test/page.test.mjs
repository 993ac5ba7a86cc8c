// The status page in a real browser (docs/testing.md §14): headless Chromium driven by
// playwright-core against a real cluster of the plait binary that
// tests/multiprocess/statuspage_test.go starts and hands over in the environment:
//
//   PLAIT_PAGE_URL      the page of node A (B and C are its peers; A, B, C all write)
//   PLAIT_API_URL       A's HTTP API, for the writes made while B is stopped
//   PLAIT_STOP_PID      B's process id: SIGSTOP, then SIGCONT
//   PLAIT_STOP_NAME     B's name
//   PLAIT_TOKEN_URL     the page of node D, whose API needs a token
//   PLAIT_TOKEN         a read token of D
//   PLAIT_SCREENSHOTS   where each state's screenshot goes
//   PLAIT_CHROMIUM      the browser (Debian's chromium)
//   PLAIT_LIVENESS_MS   the liveness timeout the health must change within
//
// It prints RESULT lines (name=value) the Go test checks, and exits 1 with the reason on
// the first failed check. Every wait polls with a bound; none sleeps a fixed time to pass.
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
const stopName = env('PLAIT_STOP_NAME');
const stopPid = Number(env('PLAIT_STOP_PID'));
const liveness = Number(env('PLAIT_LIVENESS_MS'));

function fail(msg) {
  console.error('FAIL ' + msg);
  process.exitCode = 1;
  throw new Error(msg);
}

// until polls cond (async) every 100 ms until it returns a truthy value, or fails after ms.
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
let writing = false;
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  page.on('pageerror', (e) => fail(`the page threw: ${e.message}`));
  await page.goto(env('PLAIT_PAGE_URL'));

  // The node, its two peers and three origins, each healthy, with lag 0; the cluster map
  // published on A and the three nodes' protocol versions.
  const rows = () => page.evaluate(() => ({
    node: document.querySelector('#node-name').textContent,
    peers: [...document.querySelectorAll('#peers tbody tr')].map((r) => ({ name: r.dataset.peer, health: r.querySelector('.health').textContent })),
    origins: [...document.querySelectorAll('#origins tbody tr')].map((r) => ({ name: r.dataset.origin, health: r.querySelector('.health').textContent, lag: r.querySelector('.lag').textContent })),
    graph: window.plait.topology ? window.plait.topology.nodes().map((n) => n.data('label')).sort() : [],
    map: document.querySelector('#map-facts').textContent,
    versions: [...document.querySelectorAll('#versions tbody tr')].map((r) => `${r.dataset.node}:${r.children[1].textContent}`),
  }));
  const first = await until('the page showing A, its healthy peers B and C and three origins at lag 0', 20000, async () => {
    const r = await rows();
    const ok = r.node === 'A' && r.peers.length === 2 && r.peers.every((p) => p.health === 'healthy') &&
      r.origins.length === 3 && r.origins.every((o) => o.health === 'healthy' && o.lag === '0') && r.graph.length === 3 &&
      r.map.startsWith('generation 1') && r.versions.length === 3;
    return ok && r;
  });
  console.log('RESULT nodes=' + first.origins.map((o) => o.name).sort().join(','));
  console.log('RESULT graph=' + first.graph.join(','));
  console.log('RESULT map_generation=' + first.map.match(/^generation (\d+)/)[1]);
  console.log('RESULT versions=' + first.versions.join(','));
  await page.screenshot({ path: join(shots, '1-cluster.png'), fullPage: true });

  // Writes on A, ten a second, while B is stopped and after.
  writing = true;
  let writes = 0;
  (async () => {
    while (writing) {
      const resp = await fetch(`${env('PLAIT_API_URL')}/v1/tables/t/records/k${writes}`, { method: 'PUT', body: 'v' }).catch(() => null);
      if (resp && resp.ok) writes++;
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const peerLag = () => page.evaluate((name) => {
    const c = window.plait.charts.peers;
    const i = c.names.indexOf(name);
    return i < 0 ? [] : c.plot.data[i + 1].filter((v) => v != null);
  }, stopName);
  const peerHealth = () => page.evaluate((name) => {
    const r = document.querySelector(`#peers tr[data-peer="${name}"] .health`);
    return r && r.textContent;
  }, stopName);

  process.kill(stopPid, 'SIGSTOP');
  const stoppedAt = Date.now();
  const changed = await until(`${stopName}'s health to change from healthy`, liveness + 3000, async () => {
    const h = await peerHealth();
    return h && h !== 'healthy' && h;
  });
  const changedAfter = Date.now() - stoppedAt;
  console.log(`RESULT health_changed_to=${changed}`);
  console.log(`RESULT health_changed_after_ms=${changedAfter}`);
  const risen = await until(`the chart of ${stopName}'s lag to rise above 10`, 20000, async () => {
    const s = await peerLag();
    return s.length && s[s.length - 1] > 10 && s[s.length - 1];
  });
  console.log(`RESULT lag_while_stopped=${risen}`);
  await page.screenshot({ path: join(shots, '2-peer-stopped.png'), fullPage: true });

  process.kill(stopPid, 'SIGCONT');
  const resumedAt = Date.now();
  await until(`the chart of ${stopName}'s lag to fall back below 5 and its health to be healthy`, 30000, async () => {
    const s = await peerLag();
    return s.length && s[s.length - 1] < 5 && (await peerHealth()) === 'healthy';
  });
  console.log(`RESULT recovered_after_ms=${Date.now() - resumedAt}`);
  const series = await peerLag();
  console.log(`RESULT lag_max=${Math.max(...series)} lag_last=${series[series.length - 1]}`);
  await page.screenshot({ path: join(shots, '3-peer-resumed.png'), fullPage: true });
  writing = false;
  console.log(`RESULT writes=${writes}`);

  // D's API needs a token: the page asks for one, then shows D.
  const tpage = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  tpage.on('pageerror', (e) => fail(`the token page threw: ${e.message}`));
  await tpage.goto(env('PLAIT_TOKEN_URL'));
  await until('the page asking for a token', 10000, () => tpage.evaluate(() =>
    !document.querySelector('#token-form').hidden && document.querySelector('#main').hidden &&
    document.querySelector('#node-name').textContent === 'plait'));
  await tpage.screenshot({ path: join(shots, '4-token-asked.png'), fullPage: true });
  await tpage.fill('#token', env('PLAIT_TOKEN'));
  await tpage.click('#token-form button');
  const shown = await until('the page showing D once given the token', 10000, () => tpage.evaluate(() =>
    !document.querySelector('#main').hidden && document.querySelector('#node-name').textContent));
  console.log(`RESULT token_page_node=${shown}`);
  const kept = await tpage.evaluate(() => localStorage.getItem('plait-token') !== null);
  console.log(`RESULT token_kept_in_browser=${kept}`);
  // D dials a peer nobody listens for: its row says why the dial failed.
  const dial = await until('D\'s peer Gone showing its last dial error', 10000, () => tpage.evaluate(() => {
    const c = document.querySelector('#peers tr[data-peer="Gone"] .dial-err');
    return c && c.textContent !== '-' && c.textContent;
  }));
  console.log(`RESULT dial_error=${dial.split(':')[0]}`);
  await tpage.screenshot({ path: join(shots, '5-token-given.png'), fullPage: true });
} finally {
  writing = false;
  try { process.kill(stopPid, 'SIGCONT'); } catch { /* already running or gone */ }
  await browser.close();
}
