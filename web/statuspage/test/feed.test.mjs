// The status page's view of a table's changes in a real browser (docs/testing.md §14):
// headless Chromium driven by playwright-core. tests/multiprocess/statuspage_test.go
// (TestStatusPageFeed) starts two nodes of the plait binary and hands them over:
//
//   PLAIT_FEED_URL          a node without API tokens: the page reads the feed through EventSource
//   PLAIT_FEED_TOKEN_URL    a node with API tokens: the page reads it through fetch() (NDJSON)
//   PLAIT_FEED_READ_TOKEN   a read token of the second, given to the page
//   PLAIT_FEED_WRITE_TOKEN  a write token of the second, for this script's writes
//   PLAIT_SCREENSHOTS       where the screenshots go
//   PLAIT_CHROMIUM          the browser (Debian's chromium)
//
// On each node it writes records through the API and checks, in the DOM, that each write
// to the watched table shows as an event (origin, seq, op, key, won) and no other does,
// that the position shown advances to the last write's seq, that the view keeps at most its
// bound of events, that changing the table and closing the view close the stream (the
// node's status counts its open feeds), and that across a restart of the node (asked of
// the Go test: a RESTART NAME line on stdout, answered on stdin) the page opens the feed
// again from its position and shows what follows once. Then, against a stand-in node (fakefeed.mjs) that
// can drop or close its streams on demand, in both forms: a dropped stream is opened again
// from the last position (the request says since=POSITION) and no event shows twice, a
// close for shutting-down is reconnected, one for purged stops the view and shows why.
//
// It prints RESULT lines (name=value) and exits 1 with the reason on the first failed
// check. Every wait polls with a bound; none sleeps a fixed time to pass.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { startFake } from './fakefeed.mjs';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};
const shots = env('PLAIT_SCREENSHOTS');
mkdirSync(shots, { recursive: true });

function fail(msg) {
  console.error('FAIL ' + msg);
  process.exitCode = 1;
  throw new Error(msg);
}

// until polls cond (async) every 100 ms until it returns a truthy value, or fails after ms
// saying what show (async, optional) then finds: what the page showed, say.
async function until(what, ms, cond, show) {
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
  if (show) last = await show().catch((e) => e.message);
  fail(`${what}: not within ${ms} ms (last: ${JSON.stringify(last)})`);
}

function check(what, ok, got) {
  if (!ok) fail(`${what} (got ${JSON.stringify(got)})`);
}

// write puts (or deletes) table/key through the API and answers the write's origin_seq.
async function write(api, token, table, key, method = 'PUT') {
  const headers = token ? { Authorization: 'Bearer ' + token } : {};
  const resp = await fetch(`${api}/v1/tables/${table}/records/${key}`, { method, headers, body: method === 'PUT' ? 'v' : undefined });
  if (!resp.ok) fail(`${method} ${table}/${key}: ${resp.status} ${await resp.text()}`);
  return (await resp.json()).origin_seq;
}

async function openFeeds(api, token) {
  const headers = token ? { Authorization: 'Bearer ' + token } : {};
  const st = await (await fetch(`${api}/v1/status`, { headers })).json();
  if (!st.feeds) fail('the status has no feeds object');
  return st.feeds.open;
}

// What the view shows: its events (newest first), its state and the position.
const events = (page) => page.evaluate(() => [...document.querySelectorAll('#feed tbody.feed-event')].map((g) => ({
  kind: g.dataset.kind, origin: g.dataset.origin, seq: Number(g.dataset.seq), reason: g.dataset.reason,
  ops: [...g.querySelectorAll('tr')].map((r) => `${r.querySelector('.op').textContent} ${r.querySelector('.key').textContent} ${r.querySelector('.won')?.textContent}`),
})));
const feedState = (page) => page.evaluate(() => {
  const s = document.querySelector('#feed-state');
  return { state: s.dataset.state, mode: s.dataset.mode, reason: s.dataset.reason, text: s.textContent };
});
const shownSeq = (page, origin) => page.evaluate((o) => {
  const s = document.querySelector(`#feed-position span[data-origin="${o}"]`);
  return s ? Number(s.dataset.seq) : 0;
}, origin);
const keysOf = (evs) => evs.map((e) => e.ops.join('+'));
// seen is what a failed wait reports: the view's state, position and newest events.
const seen = (page) => async () => ({
  state: (await feedState(page)).text,
  position: await page.evaluate(() => document.querySelector('#feed-position').dataset.position),
  events: keysOf(await events(page)).slice(0, 8),
});

async function watch(page, table, mode) {
  await page.fill('#feed-table', table);
  await page.click('#feed-form button[type=submit]');
  return until(`the view of ${table} open through ${mode}`, 10000, async () => {
    const s = await feedState(page);
    return s.state === 'open' && s.mode === mode && s.text.startsWith(table + ':') && s;
  }, () => feedState(page));
}

// openPage loads the page at url (giving it token when the node asks for one) and waits
// for the status to show.
async function openPage(browser, url, token) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1400 } });
  page.on('pageerror', (e) => fail(`the page threw: ${e.message}`));
  await page.goto(url);
  if (token) {
    await until('the page asking for a token', 10000, () => page.evaluate(() => !document.querySelector('#token-form').hidden));
    await page.fill('#token', token);
    await page.click('#token-form button');
  }
  const name = await until('the page showing the node', 10000, () => page.evaluate(() =>
    !document.querySelector('#main').hidden && window.plait.status && document.querySelector('#node-name').textContent));
  return { page, name };
}

// restart asks the Go test to restart the node name (a RESTART line on stdout) and answers
// its reply (a line on stdin: restarted, or why not).
let stdinReader, stdinLines; // closed at the end: an open stdin would keep the script running
async function restart(name) {
  stdinReader ??= createInterface({ input: process.stdin });
  stdinLines ??= stdinReader[Symbol.asyncIterator]();
  console.log(`RESTART ${name}`);
  const { value, done } = await stdinLines.next();
  return done ? 'no reply' : value.trim();
}

// onNode runs the checks against one real node; mode is the way the page must read it.
async function onNode(browser, label, { url, api, readToken, writeToken, mode }) {
  const { page, name } = await openPage(browser, url, readToken);
  const max = await page.evaluate(() => window.plait.feed.max);
  await watch(page, 'f', mode);

  // One write, its event, and the position at its seq.
  const s1 = await write(api, writeToken, 'f', 'a0');
  await until(`${label}: the event of f/a0`, 10000, async () => {
    const e = await events(page);
    return e.length === 1 && e[0].seq === s1 && e[0].origin === name && e[0].ops.join() === 'put a0 yes' && e;
  }, seen(page));
  const p1 = await until(`${label}: the position at ${name}:${s1}`, 10000, async () => (await shownSeq(page, name)) === s1 && s1, seen(page));

  // A write to another table shows nothing; the others show newest first, the position
  // moves to the last one's seq.
  await write(api, writeToken, 'other', 'x');
  const seqs = [s1];
  for (const k of ['a1', 'a2', 'a3']) seqs.push(await write(api, writeToken, 'f', k));
  seqs.push(await write(api, writeToken, 'f', 'a0', 'DELETE'));
  const want = ['delete a0 yes', 'put a3 yes', 'put a2 yes', 'put a1 yes', 'put a0 yes'];
  const shown = await until(`${label}: the five events of f, newest first`, 10000, async () => {
    const e = await events(page);
    return e.length === 5 && e;
  }, seen(page));
  check(`${label}: the events' ops, keys and won`, JSON.stringify(keysOf(shown)) === JSON.stringify(want), keysOf(shown));
  check(`${label}: the events' seqs are the writes' to f`, JSON.stringify(shown.map((e) => e.seq)) === JSON.stringify([...seqs].reverse()), shown.map((e) => e.seq));
  check(`${label}: every event's origin is ${name}`, shown.every((e) => e.origin === name), shown.map((e) => e.origin));
  const p2 = await until(`${label}: the position at the last write's seq ${seqs[4]}`, 10000, async () => (await shownSeq(page, name)) === seqs[4] && seqs[4], seen(page));
  check(`${label}: the position advanced`, p2 > p1, [p1, p2]);
  console.log(`RESULT ${label}_name=${name} ${label}_mode=${mode} ${label}_events=${shown.length} ${label}_position_first=${p1} ${label}_position_last=${p2}`);
  await page.screenshot({ path: join(shots, `feed-${label}-1-events.png`), fullPage: true });

  // More writes than the view keeps: the newest max events stay, the oldest go.
  let last = 0;
  for (let i = 0; i < max + 5; i++) last = await write(api, writeToken, 'f', `b${i}`);
  const kept = await until(`${label}: the newest ${max} events kept`, 20000, async () => {
    const e = await events(page);
    return e.length && e[0].seq === last && e;
  }, seen(page));
  check(`${label}: the view keeps ${max} events`, kept.length === max, kept.length);
  check(`${label}: the oldest kept is b5`, kept[max - 1].ops.join() === 'put b5 yes', kept[max - 1].ops);
  console.log(`RESULT ${label}_kept=${kept.length} ${label}_max=${max}`);

  // Another table: the view empties and shows only that table's writes; the node's open
  // feeds are the view's one.
  await watch(page, 'g', mode);
  const empty = await events(page);
  check(`${label}: the view emptied for g`, empty.length === 0, keysOf(empty));
  await write(api, writeToken, 'f', 'c0');
  const g = await write(api, writeToken, 'g', 'd0');
  const gs = await until(`${label}: the event of g/d0`, 10000, async () => {
    const e = await events(page);
    return e.length && e[0].seq === g && e;
  }, seen(page));
  check(`${label}: the view of g shows only g's write`, JSON.stringify(keysOf(gs)) === '["put d0 yes"]', keysOf(gs));
  const open1 = await until(`${label}: the node's open feeds at 1 after the table changed`, 10000, async () => (await openFeeds(api, writeToken)) === 1 && 1, () => openFeeds(api, writeToken));

  // The node restarts (the Go test stops it with SIGTERM and starts it again on its data
  // and addresses): the page opens the feed again itself from its position, which the
  // node takes; what is written after shows once, and nothing before it shows again.
  const restarted = await restart(name);
  check(`${label}: ${name} restarted`, restarted === 'restarted', restarted);
  const g2 = await write(api, writeToken, 'g', 'd1');
  const after = await until(`${label}: g/d1 shown after the restart`, 30000, async () => {
    const e = await events(page);
    return e.length && e[0].seq === g2 && (await shownSeq(page, name)) === g2 && e;
  }, seen(page));
  check(`${label}: d0 and d1 shown once each after the restart`, JSON.stringify(keysOf(after)) === '["put d1 yes","put d0 yes"]', keysOf(after));

  // Closed: the node's stream closes with it.
  await page.click('#feed-stop');
  await until(`${label}: the view stopped`, 10000, async () => (await feedState(page)).state === 'stopped');
  const open0 = await until(`${label}: the node's open feeds at 0 after the view closed`, 10000, async () => (await openFeeds(api, writeToken)) === 0 && 'zero', () => openFeeds(api, writeToken));
  console.log(`RESULT ${label}_open_after_switch=${open1} ${label}_open_after_close=${open0 === 'zero' ? 0 : open0} ${label}_after_restart=${after.length}`);
  await page.close();
}

// onFake runs the checks of reconnects and closes against the stand-in node.
async function onFake(browser, label, token) {
  const fake = await startFake({ dist: resolve('../../shells/native/statuspage/dist'), token });
  try {
    const mode = token ? 'fetch' : 'EventSource';
    const { page, name } = await openPage(browser, fake.url + '/', token);
    const requests = async () => (await fetch(`${fake.url}/fake/requests`)).json();
    await watch(page, 'f', mode);
    const s1 = await write(fake.url, token, 'f', 'e0');
    await until(`${label}: the event of f/e0`, 10000, async () => (await shownSeq(page, name)) === s1, seen(page));

    // The stream drops: the page opens it again from its position, and what was written
    // meanwhile shows once.
    await fetch(`${fake.url}/fake/drop`, { method: 'POST' });
    const s2 = await write(fake.url, token, 'f', 'e1');
    const after = await until(`${label}: e1 shown after the drop`, 15000, async () => {
      const e = await events(page);
      return e.length && e[0].seq === s2 && e;
    }, seen(page));
    check(`${label}: e0 and e1 shown once each`, JSON.stringify(keysOf(after)) === '["put e1 yes","put e0 yes"]', keysOf(after));
    const reqs = await requests();
    const again = reqs[reqs.length - 1];
    const pos = `0123456789abcdef0123456789abcdef:${s1}`;
    check(`${label}: the second request resumes from the position`, reqs.length === 2 && again.url === `/v1/tables/f/changes?since=${encodeURIComponent(pos)}`, reqs);
    check(`${label}: the requests ${token ? 'carry the token, as NDJSON' : 'carry no token, as SSE'}`,
      reqs.every((r) => r.authorization === (token ? 'Bearer ' + token : '') && r.ndjson === !!token), reqs);

    // Closed for shutting-down: the page opens it again; for purged: it stops and says why.
    await fetch(`${fake.url}/fake/close?reason=shutting-down`, { method: 'POST' });
    await until(`${label}: a third request after shutting-down`, 15000, async () => (await requests()).length === 3 && (await feedState(page)).state === 'open', seen(page));
    const s3 = await write(fake.url, token, 'f', 'e2');
    await until(`${label}: e2 shown after the reconnect`, 10000, async () => JSON.stringify(keysOf(await events(page))) === '["put e2 yes","put e1 yes","put e0 yes"]' && (await shownSeq(page, name)) === s3, seen(page));
    await fetch(`${fake.url}/fake/close?reason=purged`, { method: 'POST' });
    const closed = await until(`${label}: the view closed for purged`, 10000, async () => {
      const s = await feedState(page);
      return s.state === 'closed' && s;
    }, seen(page));
    check(`${label}: the close shows its reason`, closed.reason === 'purged' && closed.text.includes('purged'), closed);
    console.log(`RESULT ${label}_requests=${(await requests()).length} ${label}_closed=${closed.reason}`);
    await page.screenshot({ path: join(shots, `feed-${label}-closed.png`), fullPage: true });
    await page.close();
  } finally {
    await fake.close();
  }
}

const browser = await chromium.launch({ executablePath: env('PLAIT_CHROMIUM'), args: ['--no-sandbox'] });
try {
  if (process.env.PLAIT_FEED_URL) {
    const url = env('PLAIT_FEED_URL');
    await onNode(browser, 'sse', { url, api: url.replace(/\/$/, ''), readToken: '', writeToken: '', mode: 'EventSource' });
    const turl = env('PLAIT_FEED_TOKEN_URL');
    await onNode(browser, 'ndjson', { url: turl, api: turl.replace(/\/$/, ''), readToken: env('PLAIT_FEED_READ_TOKEN'),
      writeToken: env('PLAIT_FEED_WRITE_TOKEN'), mode: 'fetch' });
  }
  await onFake(browser, 'fake_sse', '');
  await onFake(browser, 'fake_ndjson', 'fake-token-for-the-page');
  console.log('RESULT done=ok');
} finally {
  stdinReader?.close();
  await browser.close();
}
