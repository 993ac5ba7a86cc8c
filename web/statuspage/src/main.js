// The status page plait serves at /: it reads GET /v1/status and GET /v1/status/lag of the
// node that served it about once a second and shows the node, its peers, its origins, the
// cluster map and the nodes' protocol versions, the locks, the topology as this node sees it and the
// lag history (docs/contract.md §6.5, §8, §22.4), and on demand one table's changes as they
// come (feed.js, §24). It holds
// no data of its own: with API tokens on, the page is served openly and asks for a token,
// kept in this browser's localStorage only and sent as a bearer token.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import cytoscape from 'cytoscape';
import './style.css';
import { setupFeed, feedTables } from './feed.js';
import { $, el } from './dom.js';

const REFRESH_MS = 1000;
const TOKEN_KEY = 'plait-token';
// window.plait is what the page shows, for the browser tests and for a curious operator's
// console: the last documents read and the chart and graph instances.
const state = { status: null, lag: null, charts: {}, topology: null, refreshes: 0, error: null };
window.plait = state;

async function getJSON(path) {
  const headers = {};
  const token = localStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = 'Bearer ' + token;
  const resp = await fetch(path, { headers, cache: 'no-store' });
  if (resp.status === 401 || resp.status === 403) {
    const err = new Error(resp.status === 401 ? 'this node needs a token' : 'this token may not read the status');
    err.auth = true;
    throw err;
  }
  if (!resp.ok) throw new Error(`${path}: ${resp.status} ${await resp.text()}`);
  return resp.json();
}

const health = (h) => el('span', { class: `health health-${h || 'stalled'}` }, h || '-');
const num = (v) => el('td', { class: 'num' }, v ?? '-');
const td = (v) => el('td', {}, v ?? '-');

function ago(at) {
  if (!at) return '-';
  const s = (Date.now() - Date.parse(at)) / 1000;
  return s < 1 ? 'now' : s < 120 ? `${s.toFixed(0)} s ago` : `${(s / 60).toFixed(0)} min ago`;
}

function copyText(c) {
  if (!c) return '-';
  const total = c.total_records ? ` of ${c.total_records}` : '';
  const eta = c.eta_s ? `, ${c.eta_s} s left` : '';
  return `${c.state} ${c.records}${total} records${eta}`;
}

function renderNode(st) {
  const n = st.node;
  $('#node-name').textContent = n.name;
  $('#node-origin').textContent = n.origin;
  document.title = `plait ${n.name}`;
  const clock = n.clock.offset_ms == null ? 'not measured' : `${n.clock.offset_ms.toFixed(1)} ms`;
  const facts = [
    `protocol ${n.protocol.min}..${n.protocol.max}`,
    `authenticated ${n.authenticated}`,
    `storage ${n.storage.state}${n.storage.code ? ' (' + n.storage.code + ')' : ''}`,
    `clock ${clock}${n.clock.refusing_writes ? ', refusing writes' : ''}`,
    n.tls ? `TLS ${n.tls.subject}, expires ${n.tls.expiry}` : 'TLS off',
    `applied ${st.counters.txns_applied} txns`,
    `copies ${st.counters.copies_started} started`,
    `divergences ${st.counters.divergences}`,
  ];
  if (st.cluster_map) facts.push(`map generation ${st.cluster_map.generation}${st.cluster_map.conflict ? ' (CONFLICT)' : ''}`);
  if (n.rewound) facts.push(`REWOUND: ${n.rewound.how} by ${n.rewound.peer}`);
  $('#node-facts').replaceChildren(...facts.map((f) => el('span', {}, f)));
}

// The cluster map this node holds (docs/contract.md §22.4) and every node whose protocol
// version it knows: a member not known to speak version 4 is shown with version "?".
// A node of a build before the map sends no cluster_map: the section says so.
function renderClusterMap(st) {
  const m = st.cluster_map;
  if (!m) {
    $('#map-facts').replaceChildren(el('span', {}, 'this node shows no cluster map (a build before it)'));
    $('#versions tbody').replaceChildren();
    renderPlacement(null);
    return;
  }
  const below = new Set(m.members_below_v4 || []);
  const facts = m.generation
    ? [`generation ${m.generation}`, `published on ${m.publisher || '-'}`, `adopted ${m.applied_at || '-'}`,
        m.members ? `${m.members.length} members, ${below.size ? 'below version 4: ' + [...below].join(', ') : 'all at version 4'}` : 'no member list']
    : ['generation 0: no map published'];
  const spans = facts.map((f) => el('span', {}, f));
  if (m.conflict) {
    spans.push(el('span', { class: 'conflict' },
      `CONFLICT: another map of generation ${m.conflict.generation}, published on ${m.conflict.publisher}; publish generation ${m.conflict.generation + 1} to end it`));
  }
  $('#map-facts').replaceChildren(...spans);
  const members = new Set(m.members || []);
  const versions = new Map((m.versions || []).map((v) => [v.name, v]));
  for (const n of members) if (!versions.has(n)) versions.set(n, null);
  const rows = [...versions.keys()].sort().map((n) =>
    el('tr', { data: { node: n } },
      td(n), el('td', { class: below.has(n) ? 'num below' : 'num' }, versions.get(n)?.max_version ?? '?'),
      el('td', { class: 'num gen' }, versions.get(n)?.generation ?? '?'),
      td(m.members ? (members.has(n) ? 'yes' : 'no') : '-')));
  $('#versions tbody').replaceChildren(...rows);
  renderPlacement(m);
}

// The map's placement (docs/contract.md §23.1): each placed table, its carriers, and
// whether this node is one. Without placement the table is hidden and the note says why.
function renderPlacement(m) {
  const placement = m?.placement;
  $('#placement').hidden = !placement;
  $('#placement-note').textContent = placement
    ? 'The tables the map places and the nodes that carry each; every table it does not name is carried by every node.'
    : 'No table is placed: every node carries every table.';
  const carried = new Set(m?.carried || []);
  const rows = Object.keys(placement || {}).sort().map((t) =>
    el('tr', { data: { table: t } }, td(t), td(placement[t].join(', ')), td(carried.has(t) ? 'yes' : 'no')));
  $('#placement tbody').replaceChildren(...rows);
}

// This node as a lock home and as a caller (docs/contract.md §8.9). A node of a build
// before locks sends no locks: the section says so.
function renderLocks(st) {
  const l = st.locks;
  if (!l) {
    $('#lock-facts').replaceChildren(el('span', {}, 'this node shows no locks (a build before them)'));
    $('#lock-refusals tbody').replaceChildren();
    return;
  }
  const home = l.home
    ? [`lock home, incarnation ${l.incarnation}, generation ${l.generation}`, `${l.leases} leases held`, `${l.waiting} waiting`,
        `${l.granted} granted`, `${l.released} released`, `${l.expired} expired`, `confirms lost ${l.confirms_lost}`, `overlaps ${l.overlaps}`]
    : [l.home_error ? `named a lock home and cannot be one: ${l.home_error}` : 'not a lock home'];
  const c = l.caller;
  const caller = [`${l.held} leases held for clients`, `${c.acquired} acquired`, `${c.writes} writes under a lock (${c.writes_lost} lost)`,
    `fence waits ${c.fence_waits} (${c.fence_timeouts} timed out)`];
  const spans = [...home, ...caller].map((f) => el('span', {}, f));
  if (l.overlaps > 0 || c.writes_lost > 0) spans.push(el('span', { class: 'conflict' }, 'a write came after its lease ended: check the clocks'));
  $('#lock-facts').replaceChildren(...spans);
  const codes = new Set([...Object.keys(l.refused || {}), ...Object.keys(c.refused || {})]);
  const rows = [...codes].sort().map((code) =>
    el('tr', { data: { code } }, td(code), num(l.refused?.[code] ?? 0), num(c.refused?.[code] ?? 0)));
  $('#lock-refusals tbody').replaceChildren(...rows);
}

// A leaf's hub and its write checkpoint (docs/contract.md §26.6): the hub re-originated
// this leaf's writes up to reoriginated_seq, and the core has them up to core_seq; this
// node's own applied seq is its last write. Hidden on a node that is not a leaf.
function renderHub(st) {
  const h = st.hub;
  $('#hub-view').hidden = !h;
  if (!h) return;
  const own = (st.origins.find((o) => o.origin === st.node.origin) || {}).applied_seq || 0;
  const pending = Math.max(0, own - h.core_seq);
  const facts = [`hub ${h.name}`, h.connected ? 'connected' : 'NOT connected', `re-originated up to ${h.reoriginated_seq} (hub seq ${h.hub_seq})`,
    `in the core up to ${h.core_seq}`, `horizon ${h.horizon || '-'}`].map((f) => el('span', {}, f));
  if (h.refused > 0) {
    facts.push(el('span', { class: 'conflict' },
      `${h.refused} refused by the hub, the last seq ${h.last_refused_seq}: ${h.last_refused_reason} (it stays on this leaf only)`));
  }
  $('#hub-facts').replaceChildren(...facts);
  $('#checkpoint').dataset.own = own;
  $('#checkpoint').dataset.core = h.core_seq;
  $('#checkpoint-core').style.width = `${own ? Math.min(100, (100 * h.core_seq) / own) : 100}%`;
  $('#checkpoint-text').textContent = pending
    ? `${pending} of this leaf's writes not in the core yet (own seq ${own}, core ${h.core_seq})`
    : `every write of this leaf is in the core (own seq ${own})`;
}

// A hub's leaves (docs/contract.md §26.6): how many, the four lag bands as bars, the
// slowest ten. Hidden on a node that is not a hub.
function renderLeaves(st) {
  const l = st.leaves;
  $('#leaves-view').hidden = !l;
  if (!l) return;
  const facts = [`${l.connected} of ${l.max} connected`, `${l.marks} marks`].map((f) => el('span', {}, f));
  facts.push(el('span', l.held ? { class: 'conflict' } : {}, `${l.held} held (clock ahead, or the gate shut)`));
  $('#leaves-facts').replaceChildren(...facts);
  const most = Math.max(1, ...l.lag.map((b) => b.leaves));
  let below = 0;
  const rows = l.lag.map((b) => {
    const band = b.le_ms == null ? `over ${below / 1000} s` : below ? `${below} ms to ${b.le_ms} ms` : `up to ${b.le_ms} ms`;
    below = b.le_ms ?? below;
    const bar = el('span', { class: 'bar' });
    bar.style.width = `${(100 * b.leaves) / most}%`;
    return el('tr', { data: { band: b.le_ms ?? 'more' } }, td(band), num(b.leaves), el('td', { class: 'bar-cell' }, bar));
  });
  $('#leaf-lag tbody').replaceChildren(...rows);
  $('#leaf-slowest tbody').replaceChildren(...l.slowest.map((s) =>
    el('tr', { data: { leaf: s.name } }, td(s.name), num(s.seq), num(s.behind_ms))));
}

function renderPeers(st) {
  const rows = st.peers.map((p) =>
    el('tr', { data: { peer: p.name || '(handshaking)' } },
      td(p.name || '(handshaking)'), td(p.state), el('td', { class: 'health-cell' }, health(p.health)),
      num(p.version || '-'), num(p.rtt_ms ? p.rtt_ms.toFixed(1) : '-'), td(ago(p.last_contact)),
      num(p.lag_seq), num(p.reconnects), num(p.held_bytes), td(copyText(p.copy)),
      el('td', { class: 'err' }, p.last_error ? `${p.last_error.code}: ${p.last_error.message}` : '-'),
      el('td', { class: 'err dial-err' }, p.last_dial_error ? `${p.last_dial_error.code}: ${p.last_dial_error.message}` : '-')));
  $('#peers tbody').replaceChildren(...rows);
}

function renderOrigins(st) {
  const rows = st.origins.map((o) =>
    el('tr', { data: { origin: o.name || o.origin } },
      td(o.name || o.origin.slice(0, 8)), el('td', { class: 'health-cell' }, health(o.health)),
      num(o.applied_seq), num(o.head_seq), el('td', { class: 'num lag' }, o.lag_seq), num(o.lag_ms),
      td(o.source_peer || (o.name === st.node.name ? '(this node)' : '-')), num(o.source_changes),
      td(o.diverged ? 'yes' : 'no'), num(o.floor_seq), td(o.stuck ? `${o.stuck} until ${o.stuck_until}` : '-')));
  $('#origins tbody').replaceChildren(...rows);
}

// The topology: this node, each peer (an edge per peer, live or not), and each origin that
// is not a peer itself, joined by a dashed edge to the peer it arrives from.
function renderTopology(st) {
  const self = st.node.name;
  const peers = [...new Set(st.peers.map((p) => p.name).filter(Boolean))];
  const live = new Set(st.peers.filter((p) => p.connected).map((p) => p.name));
  const elements = [{ data: { id: 'n:' + self, label: self, kind: 'self' } }];
  for (const p of peers) {
    elements.push({ data: { id: 'n:' + p, label: p, kind: 'peer' } });
    elements.push({ data: { id: 'l:' + p, source: 'n:' + self, target: 'n:' + p, live: live.has(p) ? 'yes' : 'no' } });
  }
  for (const o of st.origins) {
    if (!o.name || o.name === self || !o.source_peer) continue;
    if (!peers.includes(o.name)) elements.push({ data: { id: 'n:' + o.name, label: o.name, kind: 'relayed' } });
    if (o.source_peer !== o.name) {
      elements.push({ data: { id: `o:${o.name}:${o.source_peer}`, source: 'n:' + o.source_peer, target: 'n:' + o.name, kind: 'origin' } });
    }
  }
  const shape = JSON.stringify(elements.map((e) => e.data.id).sort());
  if (state.topology && state.topologyShape === shape) {
    for (const e of elements) state.topology.getElementById(e.data.id).data(e.data); // liveness only
    return;
  }
  state.topologyShape = shape;
  if (state.topology) state.topology.destroy();
  state.topology = cytoscape({
    container: $('#topology'),
    elements,
    userZoomingEnabled: false,
    style: [
      { selector: 'node', style: { label: 'data(label)', 'text-valign': 'center', color: '#fff', 'font-size': 12, width: 46, height: 46, 'background-color': '#5b6b80' } },
      { selector: 'node[kind = "self"]', style: { 'background-color': '#23406e' } },
      { selector: 'node[kind = "relayed"]', style: { 'background-color': '#9aa5b4' } },
      { selector: 'edge', style: { width: 3, 'line-color': '#3c9a5b', 'curve-style': 'bezier' } },
      { selector: 'edge[live = "no"]', style: { 'line-color': '#c0392b', 'line-style': 'dotted' } },
      { selector: 'edge[kind = "origin"]', style: { width: 1.5, 'line-color': '#8794a6', 'line-style': 'dashed', 'target-arrow-shape': 'triangle', 'target-arrow-color': '#8794a6' } },
    ],
    layout: { name: 'breadthfirst', roots: ['n:' + self], spacingFactor: 1.1, padding: 20 },
  });
}

// chart makes or updates a uPlot line chart of series keyed by name: each a list of
// [at_ms, value] samples. The x axis is shared: the union of the sample times.
function chart(key, target, series) {
  const names = Object.keys(series).sort();
  const times = [...new Set(names.flatMap((n) => series[n].map((s) => s[0])))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const data = [times.map((t) => t / 1000)];
  for (const n of names) {
    const ys = new Array(times.length).fill(null);
    for (const [t, v] of series[n]) ys[index.get(t)] = v;
    data.push(ys);
  }
  const old = state.charts[key];
  const sameSeries = old && JSON.stringify(old.names) === JSON.stringify(names);
  if (sameSeries) {
    old.plot.setData(data);
    return;
  }
  if (old) old.plot.destroy();
  const palette = ['#23406e', '#c0392b', '#3c9a5b', '#8a5a00', '#7d3c98', '#1f7a8c', '#5b6b80'];
  const opts = {
    width: Math.max(320, target.clientWidth || 480),
    height: 170,
    scales: { x: { time: true }, y: { range: (u, lo, hi) => [0, Math.max(1, hi)] } },
    series: [{}, ...names.map((n, i) => ({ label: n, stroke: palette[i % palette.length], width: 2, spanGaps: true }))],
    axes: [{}, { label: 'entries' }],
  };
  state.charts[key] = { names, plot: new uPlot(opts, data, target) };
}

function renderCharts(lag) {
  const origins = {};
  for (const o of lag.origins) origins[o.name || o.origin.slice(0, 8)] = o.samples.map((s) => [s[0], s[1]]);
  chart('origins', $('#origin-lag-chart'), origins);
  const peers = {};
  for (const p of lag.peers) peers[p.name] = p.samples;
  chart('peers', $('#peer-lag-chart'), peers);
}

function showError(err) {
  state.error = err ? err.message : null;
  $('#error').hidden = !err;
  if (err) $('#error').textContent = `Could not read the status: ${err.message}. Trying again every second.`;
}

async function refresh() {
  try {
    const [status, lag] = await Promise.all([getJSON('v1/status'), getJSON('v1/status/lag')]);
    state.status = status;
    state.lag = lag;
    $('#token-form').hidden = true;
    $('#main').hidden = false;
    showError(null);
    renderNode(status);
    renderPeers(status);
    renderOrigins(status);
    renderClusterMap(status);
    renderLocks(status);
    renderHub(status);
    renderLeaves(status);
    renderTopology(status);
    renderCharts(lag);
    feedTables(status);
    state.refreshes++;
    $('#refreshed').textContent = `read ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    if (err.auth) {
      $('#token-form').hidden = false;
      $('#main').hidden = true;
      showError(localStorage.getItem(TOKEN_KEY) ? err : null);
    } else {
      showError(err);
    }
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

$('#token-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const t = $('#token').value.trim();
  if (t) localStorage.setItem(TOKEN_KEY, t);
  else localStorage.removeItem(TOKEN_KEY);
});

// The feed view names origins as the last status read does.
setupFeed(state, () => new Map((state.status?.origins || []).map((o) => [o.origin, o.name || o.origin.slice(0, 8)])),
  () => localStorage.getItem(TOKEN_KEY));

refresh();
