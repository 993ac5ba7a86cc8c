// The live view of one table's changes (docs/contract.md §6.5, §24): the operator names a
// table and the page shows the last FEED_EVENTS events of GET /v1/tables/{t}/changes as they
// arrive, and the feed's position. Without a token it reads the feed as server-sent events
// through EventSource; with one it reads the NDJSON form through fetch(), whose body it reads
// as it comes, since EventSource cannot send an Authorization header. Either way the page
// reconnects itself from the last position it was given (?since=), never through
// EventSource's own retry: the query wins over Last-Event-ID, so a retry of a URL that names
// a position would start again from that stale one.

import { $, el } from './dom.js';

// FEED_EVENTS bounds the events the page keeps in the DOM: the oldest goes when one more
// arrives, so a busy table costs the page no more than this many.
export const FEED_EVENTS = 50;

// Reconnect delays, by the number of attempts in a row that gave no event; the last repeats.
const RETRY_MS = [1000, 2000, 5000, 10000];

// Close reasons after which the page opens the feed again from its position: the node is
// restarting, it closed a client it found too slow, or its storage failed a read (degraded
// storage heals). Any other (purged, not-carried) would be answered the same again, so the
// view stops and says why.
const REOPEN_AFTER = new Set(['shutting-down', 'stalled', 'unavailable']);

// Refusals of the NDJSON request worth retrying: the node is behind the position, or has
// too many feeds open. Any other status stops the view with the answer's message.
const RETRY_STATUS = new Set([409, 503]);

// hlcTime shows a hybrid-logical-clock timestamp (milliseconds since the epoch in its high
// 48 bits) as the UTC time it carries. JSON numbers above 2^53 lose their low bits, which
// hold the logical counter, not the milliseconds.
function hlcTime(hlc) {
  if (typeof hlc !== 'number' || !Number.isFinite(hlc)) return '-';
  const d = new Date(Math.floor(hlc / 65536));
  return Number.isNaN(d.getTime()) ? '-' : d.toISOString().replace('T', ' ').replace('Z', '');
}

// parsePosition reads the position text (ORIGINHEX:SEQ,...) into [origin, seq] pairs; the
// page only shows it, so a text it cannot read shows as it is.
function parsePosition(text) {
  if (!text) return [];
  return text.split(',').map((item) => {
    const i = item.lastIndexOf(':');
    return i < 0 ? [item, ''] : [item.slice(0, i), item.slice(i + 1)];
  });
}

// Feed is one open view of one table: its streams come and go (reconnects), the view and
// its position stay until the table changes or the view is closed.
class Feed {
  constructor(table, names) {
    this.table = table;
    this.names = names; // () => Map of origin hex → node name, from the last status read
    this.position = null; // the position text of the last event or heartbeat; null: none yet
    this.received = 0;
    this.attempts = 0;
    this.ended = false;
    this.stop = null; // closes the stream open now
    this.timer = null;
    this.mode = '';
  }

  url() {
    const base = `v1/tables/${encodeURIComponent(this.table)}/changes`;
    return this.position ? `${base}?since=${encodeURIComponent(this.position)}` : base;
  }

  open(token) {
    if (this.ended) return;
    this.timer = null;
    if (token) this.openFetch(token);
    else this.openEventSource();
  }

  openEventSource() {
    this.mode = 'EventSource';
    this.show('connecting', `connecting (EventSource${this.position ? ', from the last position' : ''})`);
    const es = new EventSource(this.url());
    let stopped = false;
    this.stop = () => { stopped = true; es.close(); };
    es.addEventListener('open', () => this.show('open', 'open (EventSource)'));
    es.addEventListener('change', (e) => this.event('change', JSON.parse(e.data), e.lastEventId));
    es.addEventListener('reread', (e) => this.event('reread', JSON.parse(e.data), e.lastEventId));
    es.addEventListener('close', (e) => {
      this.stop();
      this.closed(JSON.parse(e.data));
    });
    es.addEventListener('error', () => {
      if (stopped) return;
      this.stop();
      this.retry('the stream broke');
    });
  }

  async openFetch(token) {
    this.mode = 'fetch';
    this.show('connecting', `connecting (fetch with the token${this.position ? ', from the last position' : ''})`);
    const ctl = new AbortController();
    this.stop = () => ctl.abort();
    try {
      const resp = await fetch(this.url(), {
        headers: { Accept: 'application/x-ndjson', Authorization: 'Bearer ' + token },
        cache: 'no-store',
        signal: ctl.signal,
      });
      if (!resp.ok) {
        const body = await resp.text();
        let msg = body;
        try {
          const e = JSON.parse(body).error;
          msg = `${e.code}: ${e.message}`;
        } catch { /* not the API's error document: show the text */ }
        if (RETRY_STATUS.has(resp.status)) this.retry(`refused ${resp.status} ${msg}`);
        else this.refused(`refused ${resp.status} ${msg}`);
        return;
      }
      this.show('open', 'open (fetch with the token)');
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i).trim();
          buf = buf.slice(i + 1);
          if (!line) continue;
          const msg = JSON.parse(line);
          if (msg.event === 'close') {
            ctl.abort();
            this.closed(msg);
            return;
          }
          this.event(msg.event, msg, msg.position);
        }
      }
      this.retry('the stream ended');
    } catch (err) {
      if (ctl.signal.aborted) return; // closed on purpose
      this.retry(err.message);
    }
  }

  // event takes one message of either form; heartbeats move the position only.
  event(kind, data, id) {
    if (this.ended) return;
    const pos = data.position ?? id;
    if (pos) this.position = pos;
    this.attempts = 0;
    if (kind === 'change' || kind === 'reread') {
      this.received++;
      addEvent(this, kind, data);
    }
    showPosition(this);
  }

  closed(data) {
    const extra = data.reason === 'purged' && data.origin ? ` (origin ${this.name(data.origin)} floor ${data.floor})` : '';
    const why = `closed by the node: ${data.reason}${extra}${data.message ? ': ' + data.message : ''}`;
    if (REOPEN_AFTER.has(data.reason)) {
      this.retry(why);
      return;
    }
    this.ended = true;
    this.show('closed', why, data.reason);
  }

  refused(why) {
    this.ended = true;
    this.show('refused', why);
  }

  retry(why) {
    if (this.ended) return;
    const ms = RETRY_MS[Math.min(this.attempts, RETRY_MS.length - 1)];
    this.attempts++;
    this.show('reconnecting', `${why}; reconnecting in ${ms / 1000} s from ${this.position ? 'the last position' : 'now'}`);
    this.timer = setTimeout(() => this.open(currentToken()), ms);
  }

  end(why) {
    this.ended = true;
    if (this.stop) this.stop();
    clearTimeout(this.timer);
    this.show('stopped', why);
  }

  name(origin) {
    return this.names().get(origin) || origin.slice(0, 8);
  }

  show(st, text, reason = '') {
    if (view.feed !== this) return;
    const s = $('#feed-state');
    s.dataset.state = st;
    s.dataset.reason = reason;
    s.dataset.mode = this.mode;
    s.textContent = `${this.table}: ${text}`;
  }
}

// view is the page's one feed view; window.plait.feed points at it for the tests.
const view = { feed: null, max: FEED_EVENTS };
let currentToken = () => null;

function addEvent(f, kind, d) {
  if (view.feed !== f) return;
  const table = $('#feed');
  let group;
  if (kind === 'change') {
    const who = d.origin_name || f.name(d.origin || '');
    const when = hlcTime(d.hlc);
    group = el('tbody', { class: 'feed-event', data: { kind, origin: who, seq: String(d.seq), position: d.position || '' } },
      ...(d.ops || []).map((op) => el('tr', {},
        el('td', {}, who), el('td', { class: 'num' }, d.seq), el('td', { title: String(d.hlc) }, when),
        el('td', { class: 'op' }, op.op), el('td', { class: 'key' }, op.key), el('td', { class: 'won' }, op.won ? 'yes' : 'no'))));
  } else {
    group = el('tbody', { class: 'feed-event reread', data: { kind, reason: d.reason || '', position: d.position || '' } },
      el('tr', {}, el('td', { colSpan: 3 }, '-'), el('td', { class: 'op' }, 'reread'),
        el('td', { class: 'key', colSpan: 2 }, `${d.reason}: the table changed in a way its log does not show; read it again`)));
  }
  table.insertBefore(group, table.tHead.nextSibling); // newest first, under the header
  const groups = table.querySelectorAll('tbody.feed-event');
  for (let i = FEED_EVENTS; i < groups.length; i++) groups[i].remove();
}

function showPosition(f) {
  if (view.feed !== f) return;
  const p = $('#feed-position');
  p.dataset.position = f.position || '';
  p.title = f.position || '';
  const parts = parsePosition(f.position).map(([o, seq]) => el('span', { data: { origin: f.name(o), seq } }, `${f.name(o)} ${seq}`));
  p.replaceChildren(...(parts.length ? parts : ['-']));
  $('#feed-count').textContent = `${f.received} events received, the last ${Math.min(f.received, FEED_EVENTS)} shown`;
}

// watch opens the view of table, closing the one open before; an empty name only closes it.
function watch(table, names) {
  if (view.feed) view.feed.end('closed');
  view.feed = null;
  for (const g of document.querySelectorAll('#feed tbody.feed-event')) g.remove();
  $('#feed-position').replaceChildren('-');
  $('#feed-position').dataset.position = '';
  $('#feed-count').textContent = '';
  $('#feed-stop').disabled = !table;
  if (!table) {
    const s = $('#feed-state');
    s.dataset.state = 'stopped';
    s.textContent = 'no table watched';
    return;
  }
  view.feed = new Feed(table, names);
  view.feed.open(currentToken());
}

// setupFeed wires the form; names() maps origin ids to names from the last status read,
// token() the token the page sends (null: none).
export function setupFeed(state, names, token) {
  currentToken = token;
  state.feed = view;
  $('#feed-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('#feed-table').value.trim();
    if (t !== (view.feed?.table ?? '') || !view.feed || view.feed.ended) watch(t, names);
  });
  $('#feed-stop').addEventListener('click', () => {
    if (view.feed) view.feed.end('stopped: the stream is closed');
  });
  window.addEventListener('pagehide', () => view.feed && view.feed.end('closed'));
}

// feedTables fills the table field's suggestions from what the status names: the tables the
// cluster map places, and any table list the node gives.
export function feedTables(status) {
  const names = new Set(Object.keys(status.cluster_map?.placement || {}));
  for (const t of status.tables || []) names.add(typeof t === 'string' ? t : t.name || t.table);
  names.delete(undefined);
  const list = $('#feed-tables');
  const want = [...names].sort();
  if (list.dataset.names === want.join(',')) return;
  list.dataset.names = want.join(',');
  list.replaceChildren(...want.map((n) => el('option', { value: n })));
}
