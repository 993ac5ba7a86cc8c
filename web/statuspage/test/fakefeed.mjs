// A stand-in for a node, for the feed view's browser test where the node's own stream
// cannot be made to misbehave on demand (feed.test.mjs, docs/testing.md §14): it serves the
// built page, a status document of one node, writes (PUT of a record) that it numbers as
// one origin's log, and GET /v1/tables/{t}/changes in both forms of docs/contract.md §24
// (SSE and NDJSON). Its controls drop every open feed (the page must reconnect from its
// position) or close them with a reason, and it answers the feed requests it was sent, so a
// test can see what the page asked for.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { join, normalize } from 'node:path';

const ORIGIN = '0123456789abcdef0123456789abcdef';

// startFake serves dist on a free port; token, when set, is required of every /v1/ request.
export async function startFake({ dist, name = 'Fake', token = '' }) {
  const log = []; // [{table, seq, hlc, key, op}]
  const feeds = new Set(); // {table, res, ndjson, after}
  const requests = [];
  let seq = 0;

  const position = (s) => (s ? `${ORIGIN}:${s}` : '');
  const parseSince = (text) => {
    if (!text || text === 'now') return seq;
    const m = /^([0-9a-f]{32}):([1-9][0-9]*)$/.exec(text);
    return m && m[1] === ORIGIN ? Number(m[2]) : null;
  };
  const send = (f, event, data) => {
    if (f.ndjson) f.res.write(JSON.stringify({ event, ...data }) + '\n');
    else f.res.write(`event: ${event}\n${data.position ? `id: ${data.position}\n` : ''}data: ${JSON.stringify(data)}\n\n`);
  };
  const change = (e) => ({
    table: e.table, origin: ORIGIN, origin_name: name, seq: e.seq, hlc: e.hlc,
    ops: [{ op: e.op, key: e.key, ...(e.op === 'put' ? { value: 'v' } : {}), won: true }], position: position(e.seq),
  });
  const catchUp = (f) => {
    for (const e of log) {
      if (e.seq <= f.after) continue;
      f.after = e.seq;
      if (e.table === f.table) send(f, 'change', change(e));
    }
  };
  const status = () => ({
    node: { name, origin: ORIGIN, protocol: { min: 1, max: 4 }, authenticated: false, clock: { offset_ms: null },
      storage: { state: 'ok' }, tls: null, rewound: null },
    origins: [{ origin: ORIGIN, name, applied_seq: seq, head_seq: seq, lag_seq: 0, lag_ms: 0, health: 'healthy', source_changes: 0, diverged: false, floor_seq: 0 }],
    peers: [],
    counters: { txns_applied: 0, copies_started: 0, divergences: 0 },
    cluster_map: { generation: 1, publisher: name, members: [name], members_below_v4: [], placement: { orders: [name] }, carried: ['orders'], versions: [] },
    locks: null,
    feeds: { open: feeds.size },
  });
  const json = (res, code, body) => {
    res.writeHead(code, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://fake');
    const p = url.pathname;
    try {
      if (p === '/' || p.startsWith('/assets/')) {
        const file = p === '/' ? 'index.html' : normalize(p.slice(1));
        const body = await readFile(join(dist, file));
        res.writeHead(200, { 'Content-Type': file.endsWith('.js') ? 'text/javascript' : file.endsWith('.css') ? 'text/css' : 'text/html' });
        res.end(body);
        return;
      }
      if (p.startsWith('/fake/')) {
        if (p === '/fake/requests') return json(res, 200, requests);
        if (p === '/fake/drop') {
          for (const f of feeds) f.res.destroy();
          feeds.clear();
          return json(res, 200, {});
        }
        if (p === '/fake/close') {
          const reason = url.searchParams.get('reason');
          for (const f of feeds) {
            send(f, 'close', { reason, message: `the fake closed it (${reason})`, ...(reason === 'purged' ? { origin: ORIGIN, floor: seq } : {}) });
            f.res.end();
          }
          feeds.clear();
          return json(res, 200, {});
        }
      }
      if (p.startsWith('/v1/') && token && req.headers.authorization !== `Bearer ${token}`) {
        return json(res, 401, { error: { code: 'unauthorized', message: 'a token is needed' } });
      }
      if (p === '/v1/status') return json(res, 200, status());
      if (p === '/v1/status/lag') return json(res, 200, { origins: [], peers: [] });
      let m = /^\/v1\/tables\/([^/]+)\/records\/([^/]+)$/.exec(p);
      if (m && (req.method === 'PUT' || req.method === 'DELETE')) {
        seq++;
        log.push({ table: decodeURIComponent(m[1]), seq, hlc: Date.now() * 65536, key: decodeURIComponent(m[2]), op: req.method === 'PUT' ? 'put' : 'delete' });
        for (const f of feeds) catchUp(f);
        return json(res, 200, { origin_seq: seq });
      }
      m = /^\/v1\/tables\/([^/]+)\/changes$/.exec(p);
      if (m && req.method === 'GET') {
        const ndjson = (req.headers.accept || '').includes('application/x-ndjson');
        const since = url.searchParams.has('since') ? url.searchParams.get('since') : req.headers['last-event-id'];
        requests.push({ url: req.url, authorization: req.headers.authorization || '', ndjson, last_event_id: req.headers['last-event-id'] || '' });
        const after = parseSince(since);
        if (after === null || after > seq) return json(res, 400, { error: { code: 'bad-position', message: `position ${since}` } });
        res.writeHead(200, { 'Content-Type': ndjson ? 'application/x-ndjson' : 'text/event-stream', 'Cache-Control': 'no-store' });
        res.flushHeaders();
        const f = { table: decodeURIComponent(m[1]), res, ndjson, after };
        feeds.add(f);
        req.on('close', () => feeds.delete(f));
        catchUp(f);
        return;
      }
      json(res, 404, { error: { code: 'not-found', message: p } });
    } catch (err) {
      json(res, 500, { error: { code: 'fake', message: err.message } });
    }
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    open: () => feeds.size,
    close: () => new Promise((r) => { for (const f of feeds) f.res.destroy(); server.close(r); }),
  };
}
