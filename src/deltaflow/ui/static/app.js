'use strict';
// deltaflow dashboard: renders api/state (pushed over api/events) in place, without ever reloading.

const STATES = ['running', 'falling_behind', 'completed', 'stopped', 'failed', 'skipped', 'silent'];
const PALETTE = ['#1a73e8', '#e37400', '#1e8e3e', '#9334e6', '#12b5cb', '#d01884', '#5f6368', '#f9ab00'];
const NUM = new Intl.NumberFormat('en-US');
const SVGNS = 'http://www.w3.org/2000/svg';
const $ = (id) => document.getElementById(id);

let state = null;          // the last state received
let selectedFlow = null;   // the flow of the metrics charts
const charts = new Map();  // key -> {u, sig, host}

// ---- DOM building: data only ever enters the page as text nodes or through setAttribute ----

function make(el, attrs, kids) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid !== null && kid !== undefined && kid !== false) {
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
  }
  return el;
}
const h = (tag, attrs, ...kids) => make(document.createElement(tag), attrs, kids);
const s = (tag, attrs, ...kids) => make(document.createElementNS(SVGNS, tag), attrs, kids);

// Patches `cur` into `next` reusing the existing nodes, so an update neither flickers nor
// invalidates elements held elsewhere. Elements marked data-keep keep their children (uPlot's).
function morph(cur, next) {
  const key = (n) => (n.nodeType === 1 ? n.getAttribute('data-key') : null);
  if (cur.nodeType !== next.nodeType || cur.nodeName !== next.nodeName || key(cur) !== key(next)) {
    cur.replaceWith(next);
    return;
  }
  if (cur.nodeType !== 1) {
    if (cur.nodeValue !== next.nodeValue) cur.nodeValue = next.nodeValue;
    return;
  }
  for (const { name } of [...cur.attributes]) if (!next.hasAttribute(name)) cur.removeAttribute(name);
  for (const { name, value } of next.attributes) if (cur.getAttribute(name) !== value) cur.setAttribute(name, value);
  if (next.hasAttribute('data-keep')) return;
  const kids = [...next.childNodes];
  kids.forEach((kid, i) => (cur.childNodes[i] ? morph(cur.childNodes[i], kid) : cur.append(kid)));
  while (cur.childNodes.length > kids.length) cur.lastChild.remove();
}
const patch = (el, ...kids) => morph(el, make(el.cloneNode(false), {}, kids));

// ---- formatting ----

const num = (v) => (v === null || v === undefined ? '-' : NUM.format(v));
const rate = (v) => (v === null || v === undefined ? '-' : v < 10 ? v.toFixed(1) : NUM.format(Math.round(v)));
const clip = (text, n) => (text.length > n ? `${text.slice(0, n - 1)}…` : text);
const pct = (part, whole) => (whole ? `${((100 * part) / whole).toFixed(part && part < whole / 1000 ? 3 : 1)}%` : '-');
const label = (st) => (st ? st.replace(/_/g, ' ') : 'unknown');

function span(sec) {
  sec = Math.max(0, Math.round(sec));
  const pad = (n) => String(n).padStart(2, '0');
  if (sec < 60) return `${sec}s`;
  if (sec < 3600) return `${Math.floor(sec / 60)}m ${pad(sec % 60)}s`;
  if (sec < 86400) return `${Math.floor(sec / 3600)}h ${pad(Math.floor((sec % 3600) / 60))}m`;
  return `${Math.floor(sec / 86400)}d ${Math.floor((sec % 86400) / 3600)}h`;
}
function dur(ms) {
  if (ms === null || ms === undefined) return '-';
  return ms < 1000 ? `${NUM.format(Math.round(ms))} ms` : ms < 60000 ? `${(ms / 1000).toFixed(1)} s` : span(ms / 1000);
}
function when(iso) {
  const d = new Date(iso);
  if (!iso || isNaN(d)) return iso || '-';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}
const ago = (t) => `${span((Date.now() - t) / 1000)} ago`;
// A relative time that tick() keeps current between updates.
function since(iso) {
  const t = Date.parse(iso);
  return isNaN(t) ? '-' : h('span', { 'data-since': t, title: when(iso) }, ago(t));
}
const badge = (st) => h('span', { class: 'badge', 'data-state': st || '' }, label(st));
const thead = (cols) => h('thead', {}, h('tr', {}, cols.map((c) => h('th', { class: c.startsWith('#') ? 'num' : null }, c.replace('#', '')))));
const empty = (...text) => h('p', { class: 'empty' }, ...text);

// ---- charts ----

const axis = () => ({ stroke: '#5f6368', font: '11px system-ui, sans-serif', size: 30,
  grid: { stroke: '#eef0f2', width: 1 }, ticks: { stroke: '#dfe2e6', width: 1, size: 4 } });

// One uPlot per key, updated with setData; re-created only when its series or its host change.
function chart(key, host, series, data, height = 160) {
  const sig = series.map((x) => x.label).join('\n');
  let c = charts.get(key);
  if (c && (c.sig !== sig || c.host !== host)) {
    c.u.destroy();
    c = null;
  }
  if (!c) {
    host.replaceChildren();
    const opts = {
      width: Math.max(200, host.clientWidth), height,
      series: [{}, ...series.map((x) => ({ width: 1.5, ...x }))],
      axes: [{ ...axis(), size: 42 }, { ...axis(), size: 52 }],
      // uPlot spans a single timestamp (one run) over 1,000 days: show five minutes either side of it
      scales: { x: { time: true, range: (u, min, max) => {
        const xs = u.data[0] || [];
        return xs.length && xs[0] === xs[xs.length - 1] ? [xs[0] - 300, xs[0] + 300] : [min, max];
      } } },
      cursor: { drag: { x: true, y: false } },
      hooks: { setScale: [(u, key) => { // the shown range, for the page's browser test
        if (key === 'x') Object.assign(host.dataset, { xMin: u.scales.x.min, xMax: u.scales.x.max });
      }] },
    };
    c = { u: new uPlot(opts, data, host), sig, host };
    charts.set(key, c);
    resizer.observe(host);
  } else {
    c.u.setData(data);
  }
}
const resizer = new ResizeObserver((entries) => {
  for (const e of entries) {
    const width = Math.floor(e.contentRect.width);
    for (const c of charts.values()) {
      if (c.host === e.target && width > 0 && width !== c.u.width) c.u.setSize({ width, height: c.u.height });
    }
  }
});
function dropDetachedCharts() {
  for (const [key, c] of charts) {
    if (!c.host.isConnected) {
      c.u.destroy();
      resizer.unobserve(c.host);
      charts.delete(key);
    }
  }
}
const line = (lbl, color, fill) => ({ label: lbl, stroke: color, fill: fill ? `${color}14` : undefined });

// ---- sections ----

function renderHeader(st) {
  $('pipeline-name').textContent = st.pipeline || 'pipeline';
  document.title = `${st.pipeline || 'pipeline'} · deltaflow`;
  $('storage').textContent = st.storage || '';
  $('storage').title = st.storage || '';
  patch($('updated'), st.generated_at ? ['updated ', since(st.generated_at)] : '');
}

const NW = 190, NH = 62, GX = 90, GY = 20, PAD = 12;

function renderGraph(st) {
  const nodes = st.graph?.nodes || [];
  $('graph-card').hidden = !nodes.length;
  if (!nodes.length) return;
  const pos = new Map(nodes.map((n) => [n.id, { x: PAD + n.column * (NW + GX), y: PAD + n.row * (NH + GY) }]));
  const width = Math.max(...[...pos.values()].map((p) => p.x)) + NW + PAD;
  const height = Math.max(...[...pos.values()].map((p) => p.y)) + NH + PAD;
  const taken = new Set(nodes.map((n) => `${n.column},${n.row}`));
  const clear = (row, a, b) => { for (let c = a + 1; c < b; c++) if (taken.has(`${c},${row}`)) return false; return true; };
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const edges = (st.graph.edges || []).filter((e) => pos.has(e.from) && pos.has(e.to)).map((e) => {
    const A = byId.get(e.from), B = byId.get(e.to), a = pos.get(e.from), b = pos.get(e.to);
    const x1 = a.x + NW, y1 = a.y + NH / 2, x2 = b.x - 1, y2 = b.y + NH / 2;
    let d, mid;
    if (B.column > A.column) {
      // An edge across several columns changes row in one gap only: the one whose straight part hits no node.
      const bend = clear(B.row, A.column, B.column) || !clear(A.row, A.column, B.column) ? x1 : b.x - GX;
      mid = bend + GX / 2;
      d = `M${x1},${y1} H${bend} C${mid},${y1} ${mid},${y2} ${bend + GX - 1},${y2} H${x2}`;
    } else {
      mid = (x1 + x2) / 2;
      d = `M${x1},${y1} C${x1 + 40},${y1} ${x2 - 40},${y2} ${x2},${y2}`;
    }
    return s('g', { class: 'edge' }, s('path', { d, 'marker-end': 'url(#df-arrow)' }),
      e.label ? s('text', { x: mid, y: (y1 + y2) / 2 - 5, 'text-anchor': 'middle' }, e.label) : null);
  });
  const boxes = nodes.map((n) => {
    const { x, y } = pos.get(n.id), source = n.kind === 'source';
    const kind = source ? 'source' : (n.label || n.kind || '').replace(/_/g, ' ');
    const facts = [n.rows != null ? `${num(n.rows)} rows` : null, n.version != null ? `v${n.version}` : null];
    return s('g', { class: source ? 'node source' : 'node', 'data-node': n.id, 'data-state': n.state || '',
      'data-key': n.id, transform: `translate(${x},${y})` },
    s('title', {}, [n.id, kind, n.state && label(n.state), ...(n.flows || []).map((f) => `flow ${f}`)].filter(Boolean).join('\n')),
    s('rect', { width: NW, height: NH, rx: 8 }),
    n.state ? s('circle', { cx: NW - 14, cy: 15, r: 4.5, class: 'dot' }) : null,
    s('text', { x: 12, y: 21, class: 'n-name' }, clip(n.id, 23)),
    s('text', { x: 12, y: 37, class: 'n-kind' }, n.state ? `${kind} · ${label(n.state)}` : kind),
    facts.some(Boolean) ? s('text', { x: 12, y: 53, class: 'n-facts' }, facts.filter(Boolean).join(' · ')) : null);
  });
  patch($('graph'), s('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': 'dataset graph' },
    s('defs', {}, s('marker', { id: 'df-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7,
      orient: 'auto' }, s('path', { d: 'M0,0 L10,5 L0,10 z' }))),
    edges, boxes));
}

function backlog(b) {
  if (!b) return '-';
  const parts = [b.kafka_offsets != null && `${num(b.kafka_offsets)} Kafka offsets`,
    b.delta_versions != null && `${num(b.delta_versions)} Delta versions`].filter(Boolean);
  if (!parts.length) return '-';
  const measured = b.measured ? (b.measured === 'now' ? '(now)' : '(at last batch)') : null;
  return [parts.join(', '), measured && h('div', { class: 'sub' }, measured)];
}

function renderFlows(st) {
  const flows = st.flows || [];
  if (!flows.length) {
    patch($('flows'), empty('No batches logged yet: start the pipeline with ', h('code', {}, 'deltaflow run')));
    return;
  }
  const cols = ['Flow', 'State', 'Last batch', '#Rows', '#Rows/s in', '#Rows/s processed', 'Backlog', '#Last duration'];
  const rows = flows.flatMap((f) => {
    const win = f.rate_window_seconds ?? (f.input_rows_per_second != null ? st.rate_window_seconds : null);
    const over = () => (win != null ? h('div', { class: 'sub' }, `over ${Math.round(win)}s`) : null);
    const row = h('tr', { 'data-flow': f.flow, class: f.flow === selectedFlow ? 'selected' : null },
      h('td', {}, h('div', { class: 'strong' }, f.flow),
        f.dataset && f.dataset !== f.flow ? h('div', { class: 'sub' }, `→ ${f.dataset}`) : null),
      h('td', {}, badge(f.state)),
      h('td', {}, f.last_batch != null ? `#${f.last_batch}` : '-', f.last_batch_at ? h('div', { class: 'sub' }, since(f.last_batch_at)) : null),
      h('td', { class: 'num', 'data-field': 'rows_total' }, num(f.rows_total),
        f.refreshes ? h('div', { class: 'sub', 'data-field': 'rows_written' },
          `${num(f.rows_written)} written by ${num(f.refreshes)} refresh${f.refreshes === 1 ? '' : 'es'} (last ${f.last_refresh_mode})`) : null),
      h('td', { class: 'num' }, rate(f.input_rows_per_second), over()),
      h('td', { class: 'num' }, rate(f.processed_rows_per_second), over()),
      h('td', {}, backlog(f.backlog)),
      h('td', { class: 'num' }, dur(f.last_duration_ms)));
    if (!f.error) return [row];
    return [row, h('tr', { class: 'error-row' }, h('td', { colspan: cols.length },
      h('div', { class: 'error', 'data-error': f.flow },
        h('div', { class: 'loc' }, f.location ? `at ${f.location}` : 'location unknown'), h('pre', {}, f.error))))];
  });
  patch($('flows'), h('table', { class: 'grid' }, thead(cols), h('tbody', {}, rows)));
}

function renderDetail(st) {
  const flows = st.flows || [];
  $('detail-card').hidden = !flows.length;
  if (!flows.length) return;
  const select = $('flow-select'), names = flows.map((f) => f.flow);
  if ([...select.options].map((o) => o.value).join('\n') !== names.join('\n')) {
    select.replaceChildren(...names.map((n) => h('option', { value: n }, n)));
  }
  if (!names.includes(selectedFlow)) selectedFlow = names[0];
  select.value = selectedFlow;
  const f = flows.find((x) => x.flow === selectedFlow), ser = f.series || {}, t = ser.t || [];
  const col = (k) => ser[k] || t.map(() => null);
  chart('rates', $('chart-rates'), [line('input', PALETTE[0], true), line('processed', PALETTE[2])],
    [t, col('input_rps'), col('processed_rps')]);
  chart('backlog', $('chart-backlog'), [line('Kafka offsets', PALETTE[1], true), line('Delta versions', PALETTE[3], true)],
    [t, col('kafka_offsets_behind'), col('delta_versions_behind')]);
  chart('duration', $('chart-duration'), [line('duration ms', PALETTE[6], true)], [t, col('duration_ms')]);
  renderPhases(f);
}

function renderPhases(f) {
  const all = f.last_durations_ms || {};
  const parts = Object.entries(all).filter(([k, v]) => k !== 'triggerExecution' && Number(v) > 0);
  const sum = parts.reduce((acc, [, v]) => acc + Number(v), 0);
  if (!sum) {
    patch($('phases'), h('p', { class: 'muted small' }, 'No phase durations for the last batch.'));
    return;
  }
  const segs = parts.map(([k, v], i) => ({ k, v: Number(v), color: PALETTE[i % PALETTE.length] }));
  patch($('phases'),
    h('div', { class: 'phase-head' }, h('b', {}, `Last batch${f.last_batch != null ? ` #${f.last_batch}` : ''}: time by phase`),
      all.triggerExecution != null ? h('span', { class: 'muted' }, ` · triggerExecution ${dur(all.triggerExecution)}`) : null),
    h('div', { class: 'stack' }, segs.map((x) => h('div', { class: 'seg', 'data-phase': x.k, title: `${x.k}: ${dur(x.v)}`,
      style: `width:${((100 * x.v) / sum).toFixed(3)}%;background:${x.color}` }))),
    h('div', { class: 'stack-legend' }, segs.map((x) => h('span', {}, h('i', { style: `background:${x.color}` }), `${x.k} `,
      h('b', {}, dur(x.v))))));
}

function quarantine(q) {
  const qu = q.quarantine;
  if (!qu) return null;
  const reasons = Object.entries(qu.reasons || {}).sort((a, b) => b[1] - a[1]);
  const max = Math.max(1, ...reasons.map((r) => r[1]));
  const samples = qu.samples || [];
  return h('div', { class: 'quarantine' },
    h('h4', {}, 'Quarantine ', h('span', { class: 'muted' }, `${num(qu.rows)} rows`)),
    h('div', { class: 'reasons' }, reasons.map(([r, n]) => h('div', { class: 'reason', 'data-reason': r },
      h('span', { class: 'r-name' }, r), h('span', { class: 'r-bar' }, h('i', { style: `width:${((100 * n) / max).toFixed(1)}%` })),
      h('span', { class: 'num' }, num(n))))),
    samples.length ? h('table', { class: 'grid compact samples' }, thead(['Reason', 'Source', '#Batch', 'Record']),
      h('tbody', {}, samples.map((x) => {
        const text = typeof x.record === 'string' ? x.record : JSON.stringify(x.record) ?? '';
        return h('tr', { 'data-sample': q.table }, h('td', {}, x.reason ?? '-'), h('td', { class: 'mono' }, x.source ?? '-'),
          h('td', { class: 'num' }, x.batch_id ?? '-'), h('td', { class: 'mono record', title: text }, clip(text, 120)));
      }))) : h('p', { class: 'muted small' }, 'No samples.'));
}

function renderQuality(st) {
  const quality = st.quality || [];
  $('quality-card').hidden = !quality.length;
  patch($('quality'), quality.map((q) => h('div', { class: 'q-table', 'data-quality': q.table, 'data-key': `q:${q.table}` },
    h('div', { class: 'q-head' }, h('h3', {}, q.table),
      q.flow && q.flow !== q.table ? h('span', { class: 'muted' }, `flow ${q.flow}`) : null,
      h('span', { class: 'pill' }, 'dropped ', h('b', {}, num(q.dropped))),
      h('span', { class: 'pill' }, 'quarantined ', h('b', {}, num(q.quarantined)))),
    h('div', { class: 'q-body' },
      h('table', { class: 'grid compact' }, thead(['Expectation', '#Failed', '#Rows', '#Failed %']),
        h('tbody', {}, (q.expectations || []).map((e) => h('tr', { 'data-expectation': e.name },
          h('td', {}, e.name), h('td', { class: e.failed ? 'num bad' : 'num' }, num(e.failed)),
          h('td', { class: 'num' }, num(e.rows)), h('td', { class: 'num' }, pct(e.failed, e.rows)))))),
      h('figure', {}, h('figcaption', {}, 'failed rows per batch'),
        h('div', { class: 'chart', 'data-keep': true, 'data-key': `qchart:${q.table}` }))),
    quarantine(q))));
  for (const q of quality) {
    const host = $('quality').querySelector(`[data-key="${CSS.escape(`qchart:${q.table}`)}"]`);
    const names = (q.expectations || []).map((e) => e.name), t = q.series?.t || [];
    const failed = q.series?.failed || {};
    chart(`q:${q.table}`, host, names.map((n, i) => line(n, PALETTE[i % PALETTE.length])),
      [t, ...names.map((n) => failed[n] || t.map(() => null))], 140);
  }
}

function renderRuns(st) {
  const runs = st.runs || [];
  const took = (r) => {
    const a = Date.parse(r.started), b = Date.parse(r.ended);
    return isNaN(a) || isNaN(b) ? '-' : span((b - a) / 1000);
  };
  patch($('runs'), runs.length ? h('table', { class: 'grid' }, thead(['Started', 'Trigger', 'Outcome', '#Batches', '#Rows', '#Duration']),
    h('tbody', {}, runs.map((r) => h('tr', { 'data-run': r.run_id },
      h('td', { title: r.run_id }, when(r.started)), h('td', {}, r.trigger || '-'), h('td', {}, badge(r.outcome)),
      h('td', { class: 'num' }, num(r.batches)), h('td', { class: 'num' }, num(r.rows)), h('td', { class: 'num' }, took(r))))))
    : empty('No runs yet.'));
}

function renderErrors(st) {
  const errors = st.errors || [];
  patch($('errors'), errors.length ? h('ul', { class: 'errors' }, errors.map((e) => h('li', { 'data-error-item': e.flow },
    h('div', { class: 'e-head' }, h('span', { class: 'muted' }, when(e.at)), h('b', {}, e.flow),
      h('span', { class: 'mono muted' }, e.location || '')),
    h('pre', {}, e.error)))) : empty('No errors.'));
}

function renderMaintenance(st) {
  const tables = st.maintenance || [];
  patch($('maintenance'), tables.length ? h('table', { class: 'grid' },
    thead(['Table', '#Version', '#Files', '#Rows', 'Last optimize', 'Last vacuum']),
    h('tbody', {}, tables.map((m) => h('tr', { 'data-maintenance': m.table },
      h('td', { class: 'strong' }, m.table), h('td', { class: 'num' }, num(m.version)), h('td', { class: 'num' }, num(m.files)),
      h('td', { class: 'num' }, num(m.rows)), h('td', {}, m.last_optimize ? when(m.last_optimize) : '-'),
      h('td', {}, m.last_vacuum ? when(m.last_vacuum) : '-')))))
    : empty('none'));
}

function apply(st) {
  state = st;
  for (const render of [renderHeader, renderGraph, renderFlows, renderDetail, renderQuality, renderRuns,
    renderErrors, renderMaintenance]) {
    try {
      render(st);
    } catch (err) {
      console.error(`deltaflow: ${render.name} failed`, err);
    }
  }
  dropDetachedCharts();
}

// ---- live updates: EventSource, falling back to polling while it is down ----

let events = null, poller = null, polls = 0;

function setConn(mode) {
  const el = $('conn');
  el.dataset.conn = mode;
  el.lastElementChild.textContent = mode === 'reconnecting' ? 'reconnecting…' : mode;
}
async function load() {
  try {
    const answer = await fetch('api/state', { cache: 'no-store' });
    if (answer.ok) apply(await answer.json());
  } catch (err) { /* the server is away: keep showing the last state */ }
}
function connect() {
  events = new EventSource('api/events');
  events.onopen = () => {
    setConn('live');
    clearInterval(poller);
    poller = null;
  };
  events.onmessage = (e) => apply(JSON.parse(e.data));
  events.onerror = () => {
    setConn('reconnecting');
    if (!poller) poller = setInterval(poll, 2000);
  };
}
function poll() {
  load();
  // The browser retries a dropped stream itself, but never one answered with an HTTP error.
  if (events.readyState === EventSource.CLOSED && ++polls % 5 === 0) connect();
}

function selectFlow(flow) {
  if (!flow || !state) return;
  selectedFlow = flow;
  renderDetail(state);
  renderFlows(state);
}

function init() {
  patch($('legend'), [...STATES, null].map((st) => h('span', { class: 'legend-item' },
    h('i', { class: 'swatch', 'data-state': st || '' }), st ? label(st) : 'no flow')),
  h('span', { class: 'legend-item' }, h('i', { class: 'swatch source' }), 'source'));
  $('flow-select').addEventListener('change', (e) => selectFlow(e.target.value));
  $('flows').addEventListener('click', (e) => selectFlow(e.target.closest('tr[data-flow]')?.dataset.flow));
  $('graph').addEventListener('click', (e) => {
    const id = e.target.closest('[data-node]')?.dataset.node;
    const node = state?.graph?.nodes?.find((n) => n.id === id);
    const flow = node?.flows?.find((f) => (state.flows || []).some((x) => x.flow === f));
    if (flow) selectFlow(flow);
  });
  setInterval(() => document.querySelectorAll('[data-since]').forEach((el) => {
    el.textContent = ago(Number(el.dataset.since));
  }), 1000);
  load();
  connect();
}

init();
