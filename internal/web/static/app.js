// gpumem viewer: draws what the gpumem server (or the data embedded by
// "gpumem html") returns for the visible window on Canvas2D.

const $ = (id) => document.getElementById(id);
const tableau10 = ['#4e79a7', '#f28e2c', '#e15759', '#76b7b2', '#59a14f', '#edc949', '#af7aa1', '#ff9da7', '#9c755f', '#bab0ab'];
const VIEWS = ['active', 'private', 'state', 'segments', 'settings', 'compare', 'whatif', 'steps', 'ranks'];
// The views that answer what the CLI answers (diff, sim, steps, ranks):
// each its own module, loaded when first opened (none before first paint).
const EXTRA_VIEWS = ['compare', 'whatif', 'steps', 'ranks'];
// Category colours (tableau10 indices; the same in every file) and the
// fragmentation curve's colour.
const CATEGORY_COLOURS = { parameter: 0, optimizer_state: 1, gradient: 2, activation: 3, temporary: 4, input: 5, autograd_detail: 6, unknown: 7 };
const FRAG_COLOUR = '#b35806';

// ---------- formatting ----------
// formatCount writes a whole number with thousands separators. It is not
// toLocaleString: that loads the locale tables on first use, which cost
// the first paint 10 ms.
function formatCount(n) {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// formatSize (memory_viz's) comes from internal/units' sizes.js, which the
// page loads as a classic script before this module.

// niceTicks returns round tick values for [lo, hi]; bytes use powers of 1024.
function niceTicks(lo, hi, n, bytes, integer = false) {
  const span = hi - lo;
  if (!(span > 0)) return [lo];
  let step;
  if (bytes) {
    let unit = 1;
    while (span / unit >= 1024) unit *= 1024;
    const raw = span / n / unit;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    step = ([1, 2, 5, 10].map(m => m * p).find(s => s >= raw) || 10 * p) * unit;
  } else {
    const raw = span / n;
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    step = [1, 2, 5, 10].map(m => m * p).find(s => s >= raw) || 10 * p;
    if (integer) step = Math.max(1, step);
  }
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
  return out;
}

function formatDuration(us) {
  const a = Math.abs(us);
  if (a >= 60e6) return `${(us / 60e6).toFixed(a >= 600e6 ? 0 : 1)} min`;
  if (a >= 1e6) return `${(us / 1e6).toFixed(a >= 10e6 ? 1 : 2)} s`;
  if (a >= 1e3) return `${(us / 1e3).toFixed(a >= 10e3 ? 1 : 2)} ms`;
  return `${us.toFixed(0)} µs`;
}

// ---------- data access: server or embedded ----------
function b64ToBuffer(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out.buffer;
}

// decodeWindow reads the little-endian arrays of /api/window: polygons
// (bottom edge left to right, then top edge right to left) in data units,
// largest first, and per pixel column the lowest and highest total.
function decodeWindow(buf) {
  const h = new Float64Array(buf, 0, 10);
  const [x0, x1, y0, y1, nS, nP, w, peak, summarized, flags] = h;
  let off = 80;
  const i32 = (n) => { const a = new Int32Array(buf, off, n); off += 4 * n; return a; };
  const f32 = (n) => { const a = new Float32Array(buf, off, n); off += 4 * n; return a; };
  const ids = i32(nS), kinds = i32(nS), counts = i32(nS);
  const xs = f32(nP), ys = f32(nP), colX = f32(w + 1), colMax = f32(w), colMin = f32(w);
  const starts = new Int32Array(nS + 1);
  for (let i = 0; i < nS; i++) starts[i + 1] = starts[i] + counts[i];
  return {
    seq: ++decodeWindow.seq, x0, x1, y0, y1, peak, summarized, truncated: (flags & 1) !== 0, exact: (flags & 2) !== 0,
    n: nS, w, ids, kinds, counts, starts, xs, ys, colX, colMax, colMin, boxes: polygonBoxes(nS, starts, xs, ys),
  };
}

decodeWindow.seq = 0;

// polygonBoxes returns each polygon's bounding box (x0, x1, y0, y1 in
// data units, x relative to the window's x0), for hit tests.
function polygonBoxes(n, starts, xs, ys) {
  const b = new Float32Array(4 * n);
  for (let i = 0; i < n; i++) {
    let a = Infinity, c = -Infinity, d = Infinity, e = -Infinity;
    for (let k = starts[i]; k < starts[i + 1]; k++) {
      if (xs[k] < a) a = xs[k];
      if (xs[k] > c) c = xs[k];
      if (ys[k] < d) d = ys[k];
      if (ys[k] > e) e = ys[k];
    }
    b[4 * i] = a; b[4 * i + 1] = c; b[4 * i + 2] = d; b[4 * i + 3] = e;
  }
  return b;
}

// decodeCurves reads /api/curves: n, then x - x0, allocated, reserved, active.
function decodeCurves(buf, x0) {
  const f = new Float32Array(buf);
  const n = f[0];
  return { x0, n, xs: f.subarray(1, 1 + n), v: [f.subarray(1 + n, 1 + 2 * n), f.subarray(1 + 2 * n, 1 + 3 * n), f.subarray(1 + 3 * n, 1 + 4 * n)] };
}

// gpumem html embeds its bundle as gzipped JSON in base64; the browser
// inflates it.
const embedded = await (async () => {
  const el = document.getElementById('gpumem-data');
  if (!el) return null;
  if (typeof DecompressionStream === 'undefined') {
    document.body.textContent = 'This page needs a browser with DecompressionStream (Chrome 80, Firefox 113, Safari 16.4 or later).';
    throw new Error('no DecompressionStream');
  }
  const gz = new Blob([b64ToBuffer(el.textContent)]).stream().pipeThrough(new DecompressionStream('gzip'));
  return JSON.parse(await new Response(gz).text());
})();

// q encodes the request parameters; a null device or an undefined value is
// left out (the server then picks memory_viz's default device and the
// whole x range).
function q(p, extra) {
  const o = { file: p.file, device: p.device, view: p.view, detail: p.detail, mode: p.mode, ...extra };
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== null && v !== undefined) u.set(k, v);
  return u.toString();
}

async function getJSON(url) {
  const r = await fetch(url);
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

const serverAPI = {
  files: () => getJSON('api/files'),
  meta: (p) => getJSON('api/meta?' + q(p)),
  async window(p, x0, x1, w, h, y0, y1, detail) {
    const r = await fetch('api/window?' + q(p, { x0, x1, w, h, y0, y1, detail }));
    if (!r.ok) throw new Error((await r.json()).error);
    return decodeWindow(await r.arrayBuffer());
  },
  async curves(p, x0, x1, w) {
    const r = await fetch('api/curves?' + q(p, { x0, x1, w }));
    if (!r.ok) throw new Error((await r.json()).error);
    return decodeCurves(await r.arrayBuffer(), x0);
  },
  markers: async (p) => (await getJSON('api/markers?' + q(p))).markers,
  elem: (p, id) => getJSON('api/elem?' + q(p, { id })),
  search: (p, addr, frame) => getJSON('api/search?' + q(p, { addr, frame })),
  events: (p, from, count) => getJSON('api/events?' + q(p, { from, count })),
  state: (p, idx) => getJSON('api/state?' + q(p, { idx })),
  settings: (p) => getJSON('api/settings?' + q(p)),
  // gpumem peak / oom answers and colour classes (server only).
  classes: (p, by) => getJSON('api/classes?' + q(p, { by })),
  peak: (p, extra) => getJSON('api/peak?' + q(p, extra)),
  oom: (p) => getJSON('api/oom?' + q(p)),
  fragCurve: (p, x0, x1, w) => getJSON('api/fragcurve?' + q(p, { x0, x1, w })),
};

// The embedded bundle holds one precomputed full-range window per view
// (every allocation up to Detail, in data units); zooming, in x and y,
// re-projects it instead of asking a server.
function embeddedAPI(data) {
  const key = (p) => `${p.view}|${p.device}|${p.mode}`;
  const cache = {};
  const win = (p) => {
    const k = key(p);
    if (!cache[k]) {
      const v = data.views[k];
      if (!v) throw new Error(`This file was exported without the ${p.view} view for device ${p.device}`);
      cache[k] = decodeWindow(b64ToBuffer(data.windows[v.window]));
    }
    return cache[k];
  };
  const view = (p) => data.views[key(p)] || data.views[`${p.view}|${p.device}|event`] || data.views[`${p.view}|${p.device}|time`];
  return {
    files: async () => data.files,
    meta: async (p) => {
      const v = view(p);
      if (!v) throw new Error(`This file was exported without the ${p.view} view for device ${p.device}`);
      return v.meta;
    },
    async window(p) {
      return win(p);
    },
    async curves(p) {
      const c = view(p).curves;
      return decodeCurves(b64ToBuffer(c.data), c.x0);
    },
    markers: async (p) => view(p).markers || [],
    async elem(p, id) {
      const e = view(p).elems[id];
      if (!e) throw new Error('no details embedded for this allocation');
      return { id, size: e[0], text: data.stacks[e[1]] + data.stacks[e[2]] };
    },
    // Searches the embedded texts (memory_viz's context_for_id) as
    // memory_viz's search boxes do: a substring of the whole text.
    async search(p, addr, frame) {
      const v = view(p);
      addr = addr.trim().toLowerCase().replace(/^0x/, ''); frame = frame.trim().toLowerCase();
      const a = { count: 0, ids: [] }, f = { count: 0, ids: [] };
      for (const [id, e] of Object.entries(v.elems)) {
        const text = (data.stacks[e[1]] + data.stacks[e[2]]).toLowerCase();
        if (addr && text.includes(addr)) { a.count++; a.ids.push(+id); }
        if (frame && text.includes(frame)) { f.count++; f.ids.push(+id); }
      }
      return { addr: a, frame: f };
    },
    events: async (p, from, count) => {
      const v = data.events[String(p.device)] || { lines: [] };
      return { total: v.lines.length, from, lines: v.lines.slice(from, from + count) };
    },
    state: async (p, idx) => {
      const st = data.states && data.states[String(p.device)];
      if (!st) throw new Error('This file was exported without the state history; run gpumem html --view state');
      return offlineState(st, data.events[String(p.device)].lines, idx);
    },
    settings: async () => ({ settings: data.settings }),
  };
}

// offlineState returns the state after event idx from the history that
// gpumem html precomputed (replay's, with its totals): it applies the
// embedded changes from the end of the trace back to idx and draws them.
function offlineState(st, lines, idx) {
  let c = st.cursor;
  if (!c || c.idx < idx) {
    c = st.cursor = { idx: st.steps.length - 1, segs: new Map(), blocks: new Map() };
    applyStep(c, st.end);
  }
  for (; c.idx > idx; c.idx--) applyStep(c, st.steps[c.idx]);
  if (!st.sums) { // the totals come as differences from the previous moment
    st.sums = {};
    for (const [k, d] of Object.entries(st.totals)) {
      const v = new Float64Array(d.length);
      for (let i = 0; i < d.length; i++) v[i] = (i ? v[i - 1] : 0) + d[i];
      st.sums[k] = v;
    }
  }
  const out = { index: idx, event: lines[idx] || '', stack: '', segments: [] };
  for (const [k, v] of Object.entries(st.sums)) out[k] = v[idx + 1];
  out.fragmentation = Math.round(out.fragmentation * 1e6) / 1e6;
  const byAddr = new Map();
  for (const [addr, size, stream, version, p0, p1] of [...c.segs.values()].sort((x, y) => x[0] - y[0])) {
    const sj = { addr: `s'${addr.toString(16)}_${version}`, size, stream, version, blocks: [] };
    if (p0 !== undefined) sj.pool = [p0, p1];
    byAddr.set(addr, sj);
    out.segments.push(sj);
  }
  for (const [addr, size, req, pending, version, seg] of [...c.blocks.values()].sort((x, y) => x[0] - y[0])) {
    byAddr.get(seg).blocks.push([addr - seg, size, req, pending, version]);
  }
  out.text = `(${formatSize(out.allocated)} allocated / ${formatSize(out.reserved)} reserved)`;
  return out;
}

function applyStep(c, d) {
  for (const a of d.sg || []) c.segs.delete(a);
  for (const s of d.s || []) c.segs.set(s[0], s);
  for (const a of d.bg || []) c.blocks.delete(a);
  for (const b of d.b || []) c.blocks.set(b[0], b);
}

const api = embedded ? embeddedAPI(embedded) : serverAPI;

// ---------- application state ----------
const S = {
  files: [], p: { file: 0, device: 0, view: 'active', detail: 15000, mode: 'event' },
  meta: null, win: null, curves: null, full: null, x0: 0, x1: 1, lo: 0, hi: 1,
  // The visible bytes: [y0, y1], or the whole height while yAuto.
  y0: 0, y1: 1, yAuto: true,
  hoverId: -1, selId: -1, elemCache: new Map(), addrMatch: new Set(), frameMatch: new Set(),
  seq: 0, stateIdx: -1, eventsTotal: 0, eventPages: new Map(), layoutPlot: null, stateLayout: null,
  // Colour by category or stream: a class per allocation and the legend's
  // names (null: colour by allocation). The answer panel: the moment it
  // answers for (x, null = the peak) and the allocations of the row clicked.
  colorBy: 'allocation', classes: null, classNames: [], moment: null, siteMatch: new Set(), answerSeq: 0,
};
window.gpumem = { S, formatSize, refreshed: 0 };

function showError(msg) {
  const e = $('error');
  e.textContent = msg; e.hidden = !msg;
}

function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  const p = S.p;
  if (h.has('file')) p.file = +h.get('file') || 0;
  if (h.has('device')) p.device = +h.get('device') || 0;
  if (h.has('view') && VIEWS.includes(h.get('view')) && !(embedded && EXTRA_VIEWS.includes(h.get('view')))) p.view = h.get('view');
  if (h.has('detail')) p.detail = Math.max(0, +h.get('detail') || 0);
  if (h.has('mode')) p.mode = h.get('mode') === 'time' ? 'time' : 'event';
  if (h.has('color') && ['category', 'stream'].includes(h.get('color'))) S.colorBy = h.get('color');
  if (h.has('frag')) $('fragcurve').checked = h.get('frag') === '1';
  if (h.has('frame')) $('search-frame').value = h.get('frame'); // a stack-frame search, as the Compare view opens a site
  return h;
}

function writeHash() {
  const h = new URLSearchParams({ file: S.p.file, device: S.p.device, view: S.p.view });
  if (S.p.detail !== 15000) h.set('detail', S.p.detail);
  if (S.p.mode !== 'event') h.set('mode', S.p.mode);
  if (S.colorBy !== 'allocation') h.set('color', S.colorBy);
  if ($('fragcurve').checked) h.set('frag', '1');
  if (isTimeline()) {
    if (S.x0 !== S.lo || S.x1 !== S.hi) { h.set('x0', +S.x0.toPrecision(12)); h.set('x1', +S.x1.toPrecision(12)); }
    if (!S.yAuto) { h.set('y0', Math.round(S.y0)); h.set('y1', Math.round(S.y1)); }
    if (S.selId >= 0) h.set('sel', S.selId);
  }
  if (S.p.view === 'state' && S.stateIdx >= 0) h.set('event', S.stateIdx);
  const hash = '#' + h.toString();
  // An address changed by someone else (a link, the user) since our last
  // write is left alone: its hashchange is on its way and opens that view.
  if (location.hash !== S.lastHash) return;
  if (location.hash !== hash) history.replaceState(null, '', hash);
  S.lastHash = hash;
}

const isTimeline = () => ['active', 'private', 'segments'].includes(S.p.view);

// ---------- startup ----------
async function init() {
  // An exported page has no server: what only the server answers (the
  // panel of what is live at a clicked moment) is not promised.
  if (embedded) for (const el of document.querySelectorAll('.served-only')) el.hidden = true;
  S.lastHash = location.hash; // see writeHash
  if (embedded && embedded.initial) Object.assign(S.p, embedded.initial);
  // The page written by gpumem html has no server to answer these.
  if (embedded) for (const v of EXTRA_VIEWS) $('view').querySelector(`option[value="${v}"]`).remove();
  const h = readHash();
  // First paint in one round trip: the file list, the view's description
  // and its first (whole-range) window are asked for together; without a
  // device in the address the server picks memory_viz's default.
  if (!embedded && isTimeline()) {
    $('timeline-view').hidden = false;
    const p = { ...S.p, device: h.has('device') ? S.p.device : null };
    const x = h.has('x0') && h.has('x1') && +h.get('x1') > +h.get('x0') ? { x0: +h.get('x0'), x1: +h.get('x1') } : {};
    const y = h.has('y0') && h.has('y1') && +h.get('y1') > +h.get('y0') ? { y0: +h.get('y0'), y1: +h.get('y1') } : {};
    const { w, h: hgt } = plotSize();
    S.prefetch = { device: p.device, mode: p.mode, view: p.view, x, meta: api.meta(p), win: api.window(p, x.x0, x.x1, w, hgt, y.y0, y.y1) };
    S.prefetch.meta.catch(() => {}); S.prefetch.win.catch(() => {});
    drawPlaceholder();
  }
  try {
    const f = await filesWhenReady(S.p.file);
    if (S.prefetch) warmRaster();
    S.files = f.files;
    if (!S.files.length) { showError('No snapshot loaded. Drop a snapshot file onto this page.'); return; }
    if (!curFile()) S.p.file = S.files[0].id;
    if (!h.has('device') && !embedded) S.p.device = curFile().defaultDevice;
    if (S.prefetch && S.prefetch.device === null) S.prefetch.device = S.p.device;
    fillSelectors();
    await openView(h);
  } catch (e) {
    showError(String(e.message || e));
  }
}

// filesWhenReady returns the file list once file id (or the first file)
// is decoded: gpumem serve decodes in the background while the page
// loads. Meanwhile it shows the decoding progress.
async function filesWhenReady(id) {
  let list = await api.files();
  const target = () => list.files.find(f => f.id === id) || list.files[0];
  if (embedded || !target() || !target().loading) return list;
  let done = false;
  const ready = getJSON('api/files?wait=' + target().id).finally(() => { done = true; });
  (async () => {
    // A fast load shows no progress box at all (and the browser spends
    // nothing on it while the server decodes).
    await new Promise(r => setTimeout(r, 300));
    while (!done) {
      try { list = await api.files(); } catch (e) { break; }
      if (done) break;
      const f = target();
      const pct = f.size > 0 ? ` (${Math.floor(100 * f.done / f.size)}%)` : '';
      $('loading').textContent = `Loading ${f.name}: ${formatSize(f.done, false)}` +
        (f.size > 0 ? ` of ${formatSize(f.size, false)}${pct}` : '') + '…';
      $('loading').hidden = false;
      await new Promise(r => setTimeout(r, 200));
    }
  })();
  try { return await ready; } finally { $('loading').hidden = true; }
}

// curFile is the file shown: ids stay the same when a file is closed.
function curFile() { return S.files.find(f => f.id === S.p.file); }

function fillSelectors() {
  const fs = $('file');
  fs.innerHTML = '';
  for (const f of S.files) fs.add(new Option(f.name + (f.loading ? ' (loading)' : f.error ? ' (failed)' : ''), f.id));
  fs.value = S.p.file;
  const ds = $('device');
  ds.innerHTML = '';
  const f = curFile();
  $('close-file').hidden = embedded;
  for (const d of f.devices) ds.add(new Option(`${d.name || 'cuda:' + d.device} (${d.events} events, ${d.segments} segments)`, d.device));
  if (!f.devices.some(d => d.device === S.p.device)) S.p.device = f.defaultDevice;
  ds.value = S.p.device;
  $('view').value = S.p.view;
  $('mode').value = S.p.mode;
  $('detail').value = S.p.detail;
  const dev = f.devices.find(d => d.device === S.p.device);
  $('mode').options[1].disabled = !(dev && dev.hasTime);
  if (S.p.mode === 'time' && !(dev && dev.hasTime)) { S.p.mode = 'event'; $('mode').value = 'event'; }
}

async function openView(h) {
  showError('');
  // A timeline refresh still under way belongs to the view being left:
  // it must neither draw nor mark this one ready.
  S.seq++;
  clearTimeout(refreshTimer);
  document.body.dataset.ready = '';
  // A torch.profiler output has no segments: the views drawn from them
  // say so, and what to record instead, rather than drawing nothing.
  const f = S.files && curFile();
  const missing = f && f.unavailable && f.unavailable[S.p.view];
  $('missing-view').hidden = !missing;
  $('missing').textContent = missing || '';
  $('timeline-view').hidden = !!missing || !isTimeline();
  $('state-view').hidden = !!missing || S.p.view !== 'state';
  $('settings-view').hidden = !!missing || S.p.view !== 'settings';
  $('extra-view').hidden = !!missing || !EXTRA_VIEWS.includes(S.p.view);
  document.querySelector('.tl-only').style.visibility = !missing && isTimeline() ? '' : 'hidden';
  if (missing) {
    document.body.dataset.ready = '1';
    writeHash();
    return;
  }
  try {
    if (isTimeline()) {
      await openTimeline(h); // its first window writes the address
      return;
    }
    if (S.p.view === 'state') await openState(h);
    else if (EXTRA_VIEWS.includes(S.p.view)) await openExtra();
    else await openSettings();
  } catch (e) {
    showError(String(e.message || e));
  }
  writeHash();
}

async function openExtra() {
  // A fresh element per opening: a view left before its answer came
  // writes into a detached one.
  const el = document.createElement('div');
  $('extra-view').replaceChildren(el);
  const mod = await import(`./${S.p.view}.js`);
  await mod.open({
    el, files: S.files, file: S.p.file, device: S.p.device,
    // go opens another view: the address changes and hashchange opens it.
    go: (p) => { location.hash = '#' + new URLSearchParams(p).toString(); },
  });
  document.body.dataset.ready = '1';
}

async function openSettings() {
  const r = await api.settings(S.p);
  $('settings').textContent = r.settings ? JSON.stringify(r.settings, null, 2) : 'No allocator settings found.';
  document.body.dataset.ready = '1';
}

// ---------- timeline ----------
// takePrefetch returns init's requests if they match what is opened now.
function takePrefetch() {
  const pf = S.prefetch;
  S.prefetch = null;
  if (!pf || pf.view !== S.p.view || pf.mode !== S.p.mode || (pf.device !== null && pf.device !== S.p.device)) return null;
  return pf;
}

// clearDetails puts back the details panel's prompt.
function clearDetails() { $('details').textContent = DETAILS_PROMPT; }
const DETAILS_PROMPT = 'Hover over an allocation to see its details; click to pin it.';

async function openTimeline(h) {
  const seq = ++S.seq;
  S.elemCache = new Map(); S.hoverId = -1; S.selId = -1; S.addrMatch = new Set(); S.frameMatch = new Set();
  clearDetails(); // the view left's allocation is not this one's
  S.win = null; S.curves = null; S.full = null;
  const pf = takePrefetch();
  const meta = await (pf ? pf.meta : api.meta(S.p));
  if (seq !== S.seq) return;
  S.meta = meta; S.meta.markers = [];
  const [lo, hi] = S.p.mode === 'time' && meta.hasTime ? meta.xTime : meta.xEvent;
  S.lo = lo; S.hi = hi; S.x0 = lo; S.x1 = hi;
  if (h && h.has('x0') && h.has('x1')) {
    const a = +h.get('x0'), b = +h.get('x1');
    if (b > a) { S.x0 = Math.max(lo, a); S.x1 = Math.min(hi, b); }
  }
  S.yAuto = true; S.y0 = 0; S.y1 = yFull();
  if (h && h.has('y0') && h.has('y1')) {
    const a = +h.get('y0'), b = +h.get('y1');
    if (b > a) { S.yAuto = false; S.y0 = Math.max(0, a); S.y1 = b; }
  }
  if (h && h.has('sel')) S.selId = +h.get('sel');
  S.moment = null; S.siteMatch = new Set();
  await loadClasses(seq);
  if (seq !== S.seq) return;
  renderSummary();
  renderLegend();
  $('empty').hidden = !meta.empty;
  $('empty').textContent = meta.message || '';
  const whole = S.x0 === lo && S.x1 === hi;
  await refreshWindow(true, pf ? pf.win : null);
  if (seq !== S.seq - 1) return;
  // The minimap shows the whole range: the first window when it is the
  // whole range, else one more request. Markers come after the first paint.
  S.full = whole && S.yAuto && S.win ? S.win : await api.window(S.p, lo, hi, Math.max(200, $('minimap').clientWidth), 50, 0, 0, 0);
  drawMinimap();
  if (S.selId >= 0) showElem(S.selId, true);
  runSearch();
  // The answer panel's request (the server fills in the address versions
  // for it) waits for the frame being drawn, as the markers do.
  afterPaint(showAnswer);
  afterPaint(() => api.markers(S.p).then((m) => requestDraw(() => {
    if (S.meta === meta) meta.markers = m;
  })).catch(() => {}));
}

function renderSummary() {
  const m = S.meta;
  const f = curFile();
  const dev = f.devices.find(d => d.device === m.device);
  const parts = [`<b>${escapeHTML(f.name)}</b>`, escapeHTML(dev && dev.name ? dev.name : `cuda:${m.device}`),
    ...(f.source ? [`<span id="source" title="${escapeHTML((f.notes || []).join('\n'))}">${escapeHTML(f.source)}</span>`] : []),
    `${formatCount(m.events)} trace events`,
    `Peak: <b id="peak">${formatSize(m.peak, false)}</b>`,
    ...(m.events === 0 ? ['<i>no trace events: showing the blocks alive when the snapshot was taken</i>'] : []),
    `${formatCount(m.elements)} ${S.p.view === 'segments' ? 'segments' : 'allocations'}` +
      (m.envelopes ? ` + ${m.envelopes} private pools` : ''),
    `Detail: the largest ${formatCount(m.detail)} allocations in view are drawn`];
  $('summary').innerHTML = parts.join(' &middot; ');
}

function renderLegend() {
  const items = S.classes ? classLegend() : [
    S.p.view === 'segments'
      ? ['sw', tableau10[0], 'Segment (one cudaMalloc; colour by segment)']
      : ['sw', tableau10[0], 'Allocation (colour by allocation; requested size)'],
  ];
  items.push(['sw', '#d3d7dc', summaryLabel()]);
  if (S.p.view === 'private') items.push(['sw', tableau10[9], 'Private pool (capacity; stripes are its blocks)']);
  if ($('totals').checked) {
    items.push(['ln', '#111', 'Reserved (segments)'], ['ln', '#1f6feb', 'Allocated'], ['ln', '#2da44e', 'Active (incl. pending free)']);
  }
  if ($('fragcurve').checked && answersAvailable()) items.push(['ln', FRAG_COLOUR, 'Fragmentation (1 − largest free block / free cached; right axis 0–1)']);
  items.push(['ln', '#d1242f', 'OOM'], ['ln', '#8250df', 'snapshot'], ['ln', '#bf8700', 'annotation']);
  $('legend').innerHTML = items.map(([k, c, t]) =>
    k === 'sw' ? `<span><i class="sw" style="background:${c}"></i>${t}</span>` : `<span><i class="ln" style="border-color:${c}"></i>${t}</span>`).join('');
}

// summaryLabel says what the grey band holds in the current window: the
// allocations past Detail (memory_viz's summarised band).
function summaryLabel() {
  return `<span id="summarized">${summaryText()}</span>`;
}

function summaryText() {
  const win = S.win;
  if (!win || !win.summarized) return 'Summarised: none, every allocation in view is drawn';
  const n = formatCount(win.summarized);
  return `Summarised: ${win.exact ? '' : 'at most '}${n} in view past Detail`;
}

function escapeHTML(s) {
  return s.replace(/[&<>"]/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
}

// scheduleRefresh redraws what the page has at once and asks for the new
// window after delay ms: a wheel or a drag sends bursts of moves, a key
// press one step.
let refreshTimer = 0;
function scheduleRefresh(delay = 40) {
  S.moving = true; // until the new window is there, drawPlot moves the last layer
  drawPlot(); // instant: re-project what we have
  drawMinimap();
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => refreshWindow(false), delay);
}

function plotSize() {
  const c = $('plot');
  return { w: Math.max(100, Math.round(c.clientWidth - PAD.l - PAD.r)), h: Math.max(50, Math.round(c.clientHeight - PAD.t - PAD.b)) };
}

// requestCurves asks for the totals curves of a window, one request at a
// time: the first one waits for the server to build them, and requests
// queued behind it would hold the browser's few connections to the server
// that the windows need. Only the latest window is asked for next.
function requestCurves(x0, x1, w) {
  const C = S.curvesReq || (S.curvesReq = { busy: false, want: null });
  C.want = { x0, x1, w, p: { ...S.p } };
  if (C.busy) return;
  const next = () => {
    const r = C.want;
    C.want = null;
    if (!r) { C.busy = false; return; }
    C.busy = true;
    api.curves(r.p, r.x0, r.x1, r.w).then((cv) => {
      requestDraw(() => {
        const same = ['file', 'device', 'view', 'mode'].every(k => r.p[k] === S.p[k]);
        if (same && r.x0 === S.x0 && r.x1 === S.x1) S.curves = cv;
      });
    }).catch(() => {}).finally(next);
  };
  next();
}

// refreshWindow asks for the visible window (and, separately, the totals
// curves: they never hold up the polygons).
async function refreshWindow(first, pending) {
  const seq = ++S.seq;
  const { w, h: hgt } = plotSize();
  const t0 = performance.now();
  const x0 = S.x0, x1 = S.x1;
  const [y0, y1] = yWindow();
  if (!$('totals').checked) S.curves = null;
  const loadCurves = () => { if ($('totals').checked) requestCurves(x0, x1, w); loadFragCurve(x0, x1, w); };
  // The curves (built on first use) are asked for once the window is
  // drawn, so that they do not compete with it for the server's CPU.
  let win;
  try {
    win = await (pending || api.window(S.p, x0, x1, w, hgt, y0, y1));
  } finally {
    if (seq === S.seq) S.moving = false;
  }
  if (seq !== S.seq) return;
  S.win = win;
  const sum = $('summarized');
  if (sum) sum.textContent = summaryText();
  const tf = performance.now();
  drawPlot();
  window.gpumem.phases = (window.gpumem.phases || []).slice(-49).concat([[Math.round(tf - t0), Math.round(performance.now() - tf)]]); // the bench logs them
  drawMinimap();
  window.gpumem.lastQueryMs = performance.now() - t0;
  window.gpumem.refreshed = (window.gpumem.refreshed || 0) + 1;
  document.body.dataset.ready = '1';
  if (first) {
    window.gpumem.firstPaint = performance.now();
    afterPaint(() => { loadCurves(); writeHash(); });
  } else {
    loadCurves();
    writeHash();
  }
}

// afterPaint runs fn when the frame after the one being drawn begins, so
// that what the first paint does not show (the address bar, the curves
// and markers requests) does not delay it.
function afterPaint(fn) {
  requestAnimationFrame(() => requestAnimationFrame(fn));
}

const PAD = { l: 76, r: 14, t: 12, b: 30 };

// setupCanvas sizes c's backing store to its box and returns its context.
// An opaque canvas (the plot: it paints its own white background) is
// cheaper for Chromium to rasterize and composite.
function setupCanvas(c, opaque = false) {
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth, h = c.clientHeight;
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
    c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
  }
  const ctx = c.getContext('2d', { alpha: !opaque });
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return { ctx, w, h };
}

// yFull is the top of the whole-height view: the peak, or the highest
// totals curve once they are shown, with a little headroom.
function yFull() {
  let y = S.meta ? S.meta.peak : 1;
  if (S.curves) {
    for (const arr of S.curves.v) for (let i = 0; i < arr.length; i++) if (arr[i] > y) y = arr[i];
  }
  return y * 1.04 || 1;
}

// yWindow is the visible byte range.
function yWindow() {
  return S.yAuto ? [0, yFull()] : [S.y0, S.y1];
}

// drawPlaceholder draws the empty plot frame while the snapshot loads: the
// user sees where the timeline will be, and the canvas, its font and the
// page layout are set up before the data arrives instead of after.
function drawPlaceholder() {
  renderLegend();
  $('summary').textContent = 'Loading…';
  const { ctx, w, h } = setupCanvas($('plot'), true);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, w, h);
  ctx.strokeStyle = '#9aa4ae'; ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(PAD.l - 0.5, PAD.t); ctx.lineTo(PAD.l - 0.5, h - PAD.b + 0.5); ctx.lineTo(w - PAD.r, h - PAD.b + 0.5);
  ctx.stroke();
  ctx.font = '11px system-ui, sans-serif';
  ctx.fillStyle = '#4a545e'; ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
  ctx.fillText(formatSize(0, false), PAD.l - 6, h - PAD.b);
}

// requestDraw applies update (data that arrived after the window: markers,
// totals curves) at the next frame and redraws the plot then, once per
// frame however much arrived. Applying it there keeps S in step with what
// is on screen (hover hit-tests use the drawn layout).
let drawUpdates = null;
function requestDraw(update) {
  if (!drawUpdates) {
    drawUpdates = [];
    requestAnimationFrame(() => {
      const updates = drawUpdates;
      drawUpdates = null;
      for (const u of updates) u();
      if (isTimeline()) drawPlot();
    });
  }
  drawUpdates.push(update);
}

function drawPlot() {
  const c = $('plot');
  const { ctx, w, h } = setupCanvas(c, true);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, w, h);
  const win = S.win;
  if (!win || !S.meta) return;
  const pw = w - PAD.l - PAD.r, ph = h - PAD.t - PAD.b;
  const [vy0, vy1] = yWindow();
  // The plot's scale as numbers (the rasterizer's) and as X and Y.
  const sc = { ox: PAD.l, x0: S.x0, dx: S.x1 - S.x0, pw, oy: PAD.t, y0: vy0, dy: vy1 - vy0, ph };
  const { X, Y } = scaleFns(sc);
  S.layoutPlot = { X, Y, pw, ph, y0: vy0, y1: vy1 };
  const v = polygonsInView(win, vy0, vy1);
  const dpr = window.devicePixelRatio || 1;
  const L = plotLayer(win, v, w, h, dpr, X, Y, sc, vy0, vy1, pw, ph);
  const [ox0, ox1, oy0, oy1] = L.view;
  if (ox0 === S.x0 && ox1 === S.x1 && oy0 === vy0 && oy1 === vy1) {
    ctx.drawImage(L.canvas, 0, 0, w, h);
  } else {
    // The view moved and its window is on its way: show the layer of the
    // last one moved and scaled to the new view at once (no raster).
    ctx.save();
    ctx.beginPath(); ctx.rect(PAD.l, PAD.t, pw, ph); ctx.clip();
    ctx.fillStyle = '#fff'; ctx.fillRect(PAD.l, PAD.t, pw, ph);
    ctx.drawImage(L.canvas, PAD.l * dpr, PAD.t * dpr, pw * dpr, ph * dpr, X(ox0), Y(oy1), X(ox1) - X(ox0), Y(oy0) - Y(oy1));
    ctx.restore();
  }
  ctx.save();
  ctx.beginPath(); ctx.rect(PAD.l, PAD.t, pw, ph); ctx.clip();
  outlinePolygons(ctx, win, v, X, Y);
  const drawn = v.drawn;
  // Totals curves.
  if (S.curves) {
    const cv = S.curves;
    const line = (k, color, dash) => {
      ctx.beginPath();
      for (let i = 0; i < cv.n; i++) {
        const x = X(cv.x0 + cv.xs[i]), y = Y(cv.v[k][i]);
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      }
      ctx.setLineDash(dash); ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.stroke(); ctx.setLineDash([]);
    };
    line(1, '#111', [5, 3]);
    line(2, '#2da44e', []);
    line(0, '#1f6feb', []);
  }
  // Markers.
  const marks = S.meta.markers || [];
  let lastLabelEnd = -1e9;
  const labels = [];
  ctx.font = '11px system-ui, sans-serif';
  for (const m of marks) {
    const xv = S.p.mode === 'time' ? m.time : m.event;
    if (xv < 0 || (S.p.mode === 'time' && !m.time)) continue;
    const x = X(xv);
    if (x < PAD.l || x > PAD.l + pw) continue;
    const color = m.kind === 'oom' ? '#d1242f' : m.kind === 'snapshot' ? '#8250df' : '#bf8700';
    ctx.strokeStyle = color; ctx.lineWidth = 1;
    ctx.setLineDash(m.kind === 'annotation' ? [3, 3] : []);
    ctx.beginPath(); ctx.moveTo(x + 0.5, PAD.t); ctx.lineTo(x + 0.5, PAD.t + ph); ctx.stroke();
    ctx.setLineDash([]);
    // A label goes right of its line, or left of it where it would be
    // cut at the plot's right edge, on a light plate so that the
    // reserved line under it does not cross it out; labels never overlap.
    const tw = ctx.measureText(m.label).width;
    let lx = x + 3;
    if (lx + tw > PAD.l + pw - 2) lx = Math.max(PAD.l + 2, x - 3 - tw);
    if (lx > lastLabelEnd + 6) {
      ctx.fillStyle = 'rgba(255,255,255,0.85)'; ctx.fillRect(lx - 2, PAD.t + 1, tw + 4, 14);
      ctx.fillStyle = color; ctx.fillText(m.label, lx, PAD.t + 11);
      lastLabelEnd = lx + tw;
      labels.push({ label: m.label, x0: lx - 2, x1: lx + tw + 2, plate: true });
    }
  }
  window.gpumem.markerLabels = { labels, left: PAD.l, right: PAD.l + pw };
  drawMoment(ctx, X, ph);
  drawFragCurve(ctx, X, pw, ph);
  ctx.restore();
  window.gpumem.drawn = drawn;
  drawAxes(ctx, w, h, pw, ph, vy0, vy1, X, Y);
  drawBox(ctx);
}

// polygonsInView lists the window's polygons that lie in view: pool
// envelopes, the allocations by colour (+10 when dimmed by a search) and
// those to outline (search matches, the hovered and the selected one).
function polygonsInView(win, vy0, vy1) {
  const bb = win.boxes;
  const bx0 = S.x0 - win.x0, bx1 = S.x1 - win.x0;
  const searching = S.addrMatch.size > 0 || S.frameMatch.size > 0 || S.siteMatch.size > 0;
  const cls = S.classes;
  const groups = Array.from({ length: 20 }, () => []);
  const envelopes = [], outlined = [];
  let drawn = 0;
  for (let i = 0; i < win.n; i++) {
    if (win.starts[i + 1] - win.starts[i] < 2) continue;
    if (bb[4 * i + 1] < bx0 || bb[4 * i] > bx1 || bb[4 * i + 3] < vy0 || bb[4 * i + 2] > vy1) continue;
    drawn++;
    const id = win.ids[i];
    const match = S.addrMatch.has(id) || S.frameMatch.has(id) || S.siteMatch.has(id);
    if (match || id === S.selId || id === S.hoverId) outlined.push(i);
    if (win.kinds[i] === 2) { envelopes.push(i); continue; }
    groups[(cls && id < cls.length ? cls[id] : id) % 10 + (searching && !match ? 10 : 0)].push(i);
  }
  return { groups, envelopes, outlined, drawn };
}

// tracePolygon adds polygon i of win to ctx's path.
function tracePolygon(ctx, win, i, X, Y) {
  const s = win.starts[i], e = win.starts[i + 1], base = win.x0;
  ctx.moveTo(X(base + win.xs[s]), Y(win.ys[s]));
  for (let k = s + 1; k < e; k++) ctx.lineTo(X(base + win.xs[k]), Y(win.ys[k]));
  ctx.closePath();
}

// The rasterizer's difference table and step lists, kept between draws.
const rasterAcc = { buf: new Float32Array(0) };
const rasterSteps = { rows: new Float64Array(8), cols: new Float64Array(8) };

// steps writes to out, as (pixel, change) pairs, where the coverage of
// the pixels [p0, p1) by the interval [lo, hi) changes: the first pixel
// covered in part, the whole ones inside, the last in part, then 0. It
// returns the length written.
function steps(p0, p1, lo, hi, out) {
  const first = Math.min(p0 + 1, hi) - Math.max(p0, lo);
  out[0] = p0; out[1] = first;
  if (p1 - p0 === 1) { out[2] = p1; out[3] = -first; return 4; }
  const last = Math.min(p1, hi) - Math.max(p1 - 1, lo);
  if (p1 - p0 === 2) { out[2] = p0 + 1; out[3] = last - first; out[4] = p1; out[5] = -last; return 6; }
  out[2] = p0 + 1; out[3] = 1 - first; out[4] = p1 - 1; out[5] = last - 1; out[6] = p1; out[7] = -last;
  return 8;
}

// addCorner adds weight a of colour (r, g, b) at offset o of the
// difference table.
function addCorner(acc, o, a, r, g, b) {
  acc[o] += r * a; acc[o + 1] += g * a; acc[o + 2] += b * a; acc[o + 3] += a;
}

// scaleFns returns the plot scale sc's maps from data to CSS pixels: X
// for x (mode units), Y for bytes (rasterPolygon writes them inline).
function scaleFns(sc) {
  return {
    X: (x) => sc.ox + (x - sc.x0) / sc.dx * sc.pw,
    Y: (y) => sc.oy + sc.ph - (y - sc.y0) / sc.dy * sc.ph,
  };
}

// The palette as red, green and blue numbers, for the rasterizer.
const rasterRGB = tableau10.map(c => [parseInt(c.slice(1, 3), 16), parseInt(c.slice(3, 5), 16), parseInt(c.slice(5, 7), 16)]);

// The polygon's edges in device pixels, reused between polygons: x, the
// bottom and the top (the top edge's points are the bottom's, in reverse).
const rasterEdges = { bx: new Float64Array(64), by: new Float64Array(64), ty: new Float64Array(64) };

// rasterPolygon adds the coverage of the polygon of n points from s, in
// colour (cr, cg, cb) with weight alpha, to the difference table R.acc
// (fillPolygons describes R). The weight of a slice is a product of a
// function of the row and one of the column, each constant but at its
// ends: its 2-D differences are the products of the two 1-D ones (steps),
// at most 4 x 4 corners of the table.
function rasterPolygon(R, s, n, cr, cg, cb, alpha) {
  const half = n >> 1, E = rasterEdges;
  if (half > E.bx.length) { E.bx = new Float64Array(2 * half); E.by = new Float64Array(2 * half); E.ty = new Float64Array(2 * half); }
  const bx = E.bx, by = E.by, ty = E.ty, xs = R.xs, ys = R.ys, dpr = R.dpr, acc = R.acc, rs = R.rs, cs = R.cs;
  const base = R.base, ox = R.ox, sx0 = R.sx0, sdx = R.sdx, spw = R.spw, oy = R.oy, sy0 = R.sy0, sdy = R.sdy, sph = R.sph;
  const cx0 = R.cx0, cx1 = R.cx1, cy0 = R.cy0, cy1 = R.cy1, rowOff = R.rowOff, org = R.org;
  for (let j = 0; j < half; j++) {
    bx[j] = (ox + (base + xs[s + j] - sx0) / sdx * spw) * dpr;
    by[j] = (oy + sph - (ys[s + j] - sy0) / sdy * sph) * dpr;
    ty[j] = (oy + sph - (ys[s + n - 1 - j] - sy0) / sdy * sph) * dpr;
  }
  // Slice by slice between the points (top and bottom edges share their
  // x): a flat slice covers the same rows in each of its columns, a
  // sloped one is interpolated column by column.
  for (let j = 0; j + 1 < half; j++) {
    const xa = bx[j], xb = bx[j + 1];
    if (!(xb > xa)) continue;
    const c0 = Math.max(cx0, Math.floor(xa)), c1 = Math.min(cx1, Math.ceil(xb));
    if (c0 >= c1) continue;
    if (by[j] === by[j + 1] && ty[j] === ty[j + 1]) {
      const yt = ty[j], yb = by[j];
      const r0 = Math.max(cy0, Math.floor(yt)), r1 = Math.min(cy1, Math.ceil(yb));
      if (r0 >= r1) continue;
      const nr = steps(r0, r1, yt, yb, rs), nc = steps(c0, c1, xa, xb, cs);
      for (let a = 0; a < nr; a += 2) {
        const o = org + rowOff * rs[a], wr = alpha * rs[a + 1];
        for (let b = 0; b < nc; b += 2) addCorner(acc, o + 4 * cs[b], wr * cs[b + 1], cr, cg, cb);
      }
      continue;
    }
    for (let col = c0; col < c1; col++) {
      const l = Math.max(col, xa), r = Math.min(col + 1, xb), hcov = r - l;
      if (hcov <= 0) continue;
      const f = ((l + r) / 2 - xa) / (xb - xa);
      const yb = by[j] + (by[j + 1] - by[j]) * f, yt = ty[j] + (ty[j + 1] - ty[j]) * f;
      const r0 = Math.max(cy0, Math.floor(yt)), r1 = Math.min(cy1, Math.ceil(yb));
      if (r0 >= r1) continue;
      const nr = steps(r0, r1, yt, yb, rs), w = alpha * hcov;
      for (let a = 0; a < nr; a += 2) {
        const o = org + rowOff * rs[a] + 4 * col, wr = w * rs[a + 1];
        addCorner(acc, o, wr, cr, cg, cb);
        addCorner(acc, o + 4, -wr, cr, cg, cb);
      }
    }
  }
}

// sweepRow sums one row of the difference table acc from offset o along
// the row, adds it to the running column sums col, and mixes the colour
// into the row's pixels px from offset p: what is under (the grey band,
// white, an envelope) shows through the part not covered. One call per
// row, so that the engine compiles it within the first draw.
function sweepRow(acc, col, px, o, p, RW) {
  let r = 0, gr = 0, b = 0, a = 0;
  for (let c = 0; c < 4 * (RW - 1); c += 4, o += 4, p += 4) {
    r += acc[o]; gr += acc[o + 1]; b += acc[o + 2]; a += acc[o + 3];
    const A = col[c + 3] += a;
    const R = col[c] += r, G = col[c + 1] += gr, B = col[c + 2] += b;
    if (A <= 1e-4) continue;
    const cov = A < 1 ? A : 1, k = cov / A;
    px[p] = px[p] * (1 - cov) + R * k; px[p + 1] = px[p + 1] * (1 - cov) + G * k; px[p + 2] = px[p + 2] * (1 - cov) + B * k;
  }
}

// fillPolygons fills the polygons in view: pool envelopes as canvas
// paths, then the allocations rasterized here into the pixels of ctx (dpr
// device pixels per CSS pixel), which for thousands of thin shapes is
// many times faster than the canvas's path filling. Every allocation's
// polygon runs along its bottom edge left to right and back along its
// top edge; each pixel it crosses gets its colour weighted by how much of
// the pixel it covers (allocations never overlap, so the covered parts of
// a pixel add up), so that sub-pixel allocations tint the pixel as
// memory_viz's SVG does. The weights are added to a two-dimensional
// difference table, which one sweep over the pixels sums: a flat slice of
// a polygon (between two points, where its edges do not move) is at most
// 4 x 4 corners, a sloped slice (a slide, at most 3 timesteps) at most 8
// per column, so that the cost does not grow with the polygons' area.
// While a search is active, polygons that do not match are dimmed. sc is
// the plot's scale (scaleFns).
function fillPolygons(ctx, win, v, sc, dpr, clip) {
  const { X, Y } = scaleFns(sc);
  for (const i of v.envelopes) {
    ctx.beginPath(); tracePolygon(ctx, win, i, X, Y);
    ctx.globalAlpha = 0.35; ctx.fillStyle = tableau10[9]; ctx.fill(); ctx.globalAlpha = 1;
    ctx.strokeStyle = '#000'; ctx.lineWidth = 2; ctx.stroke();
  }
  const W = ctx.canvas.width, H = ctx.canvas.height;
  const cx0 = Math.max(0, Math.floor(clip.x * dpr)), cx1 = Math.min(W, Math.ceil((clip.x + clip.w) * dpr));
  const cy0 = Math.max(0, Math.floor(clip.y * dpr)), cy1 = Math.min(H, Math.ceil((clip.y + clip.h) * dpr));
  if (cx1 <= cx0 || cy1 <= cy0) return;
  // acc holds, per row of the clip (one more) and column (one more),
  // the differences of red, green and blue times weight, and of weight.
  const RW = cx1 - cx0 + 1, RH = cy1 - cy0, n = 4 * RW * (RH + 1);
  if (rasterAcc.buf.length < n) rasterAcc.buf = new Float32Array(n);
  const acc = rasterAcc.buf;
  acc.fill(0, 0, n);
  // X and Y inline (the same arithmetic), in one object of one shape for
  // every call: rasterPolygon, called once per polygon, is compiled by
  // the engine within the first draw, where one long loop here waited
  // for on-stack replacement.
  const R = {
    acc, rs: rasterSteps.rows, cs: rasterSteps.cols, xs: win.xs, ys: win.ys, base: win.x0, dpr,
    cx0, cx1, cy0, cy1, rowOff: 4 * RW, org: -4 * (cy0 * RW + cx0),
    ox: sc.ox, sx0: sc.x0, sdx: sc.dx, spw: sc.pw, oy: sc.oy, sy0: sc.y0, sdy: sc.dy, sph: sc.ph,
  };
  const starts = win.starts;
  for (let k = 0; k < v.groups.length; k++) {
    const g = v.groups[k], c = rasterRGB[k % 10], alpha = k >= 10 ? 0.2 : 1;
    for (let m = 0; m < g.length; m++) {
      const i = g[m];
      rasterPolygon(R, starts[i], starts[i + 1] - starts[i], c[0], c[1], c[2], alpha);
    }
  }
  // Sum the differences along each row, then down each column (col
  // holds the sums down to the row above) and mix: what is under (the
  // grey band, white, an envelope) shows through the part not covered.
  const img = ctx.getImageData(cx0, cy0, cx1 - cx0, RH), px = img.data;
  if (rasterAcc.col === undefined || rasterAcc.col.length < 4 * RW) rasterAcc.col = new Float64Array(4 * RW);
  const col = rasterAcc.col;
  col.fill(0, 0, 4 * RW);
  for (let row = 0; row < RH; row++) sweepRow(acc, col, px, 4 * row * RW, 4 * row * (RW - 1), RW);
  ctx.putImageData(img, cx0, cy0);
}

// warmRaster rasterizes a made-up window of ten polygons into the plot's
// layer at its size, once the snapshot is decoded and while the server
// lays out the first view: the first paint then finds the rasterizer's
// tables allocated and its code compiled. (On the 80 MB tile that first
// raster took 40-48 ms cold against 25-30 ms warm.)
function warmRaster() {
  const c = $('plot'), dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth, h = c.clientHeight, pw = w - PAD.l - PAD.r, ph = h - PAD.t - PAD.b;
  if (!(pw > 0 && ph > 0)) return;
  // The window in /api/window's encoding, so that its reader warms too:
  // polygon i spans x in [i, i+1] with a slide on its bottom edge.
  const nS = 10, per = 6, nP = nS * per, W = 4;
  const buf = new ArrayBuffer(80 + 12 * nS + 8 * nP + 4 * (3 * W + 1));
  new Float64Array(buf, 0, 10).set([0, nS, 0, 1, nS, nP, W, 1, 0, 0]);
  const i32 = new Int32Array(buf, 80, 3 * nS), f32 = new Float32Array(buf, 80 + 12 * nS, 2 * nP);
  for (let i = 0; i < nS; i++) {
    i32[i] = i; i32[2 * nS + i] = per;
    const xs = [i, i + 0.5, i + 1, i + 1, i + 0.5, i], ys = [0, 0, 0.1, 1, 1, 1];
    for (let k = 0; k < per; k++) { f32[i * per + k] = xs[k]; f32[nP + i * per + k] = ys[k]; }
  }
  const win = decodeWindow(buf);
  const v = { groups: Array.from({ length: 20 }, () => []), envelopes: [] };
  for (let i = 0; i < nS; i++) v.groups[i % 10].push(i);
  const lc = layer.canvas || (layer.canvas = document.createElement('canvas'));
  lc.width = Math.round(w * dpr); lc.height = Math.round(h * dpr);
  const ctx = lc.getContext('2d', { willReadFrequently: true });
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  const cw = Math.min(pw, 64), ch = Math.min(ph, 128);
  fillPolygons(ctx, win, v, { ox: PAD.l, x0: 0, dx: nS, pw: cw, oy: PAD.t, y0: 0, dy: 1, ph: ch }, dpr, { x: PAD.l, y: PAD.t, w: cw, h: ch });
  layer.key = ''; // drawn for nothing: the first draw draws again
  // The difference table at the whole plot's size, its pages touched.
  const n = 4 * (Math.ceil(pw * dpr) + 2) * (Math.ceil(ph * dpr) + 2);
  if (rasterAcc.buf.length < n) rasterAcc.buf = new Float32Array(n).fill(0);
}

// outlinePolygons outlines search matches, the hovered and the selected
// polygon.
function outlinePolygons(ctx, win, v, X, Y) {
  for (const i of v.outlined) {
    const id = win.ids[i];
    ctx.beginPath(); tracePolygon(ctx, win, i, X, Y);
    const am = S.addrMatch.has(id), fm = S.frameMatch.has(id);
    if (am || fm) {
      ctx.setLineDash(am && fm ? [4, 2] : []);
      ctx.strokeStyle = am && fm ? '#c000c0' : am ? '#e00' : '#2196F3';
      ctx.lineWidth = 1.5; ctx.stroke(); ctx.setLineDash([]);
    }
    if (S.siteMatch.has(id)) { ctx.strokeStyle = '#111'; ctx.lineWidth = 1.5; ctx.stroke(); }
    if (id === S.selId || id === S.hoverId) {
      ctx.strokeStyle = '#000'; ctx.lineWidth = id === S.selId ? 2 : 1; ctx.stroke();
    }
  }
}

// objectId numbers objects, for cache keys.
const objectIds = new WeakMap();
let lastObjectId = 0;
function objectId(o) {
  if (!o) return 0;
  if (!objectIds.has(o)) objectIds.set(o, ++lastObjectId);
  return objectIds.get(o);
}

// plotLayer returns the layer (a canvas of the grey band and the filled
// polygons) and the view it was drawn for, drawing it only when the
// window, the canvas size or the search changed: hovering redraws just the
// outlines over it. While the view moves before its window arrives (a
// zoom, a pan) the last layer is kept, and drawPlot moves it: each step
// rasterizes once, when its window is there.
const layer = { canvas: null, key: '', view: null };
window.gpumem.layerView = () => layer.view;
function plotLayer(win, v, w, h, dpr, X, Y, sc, vy0, vy1, pw, ph) {
  // The sets and the colour classes are replaced, never changed in place.
  const key = [win.seq, w, h, dpr,
    objectId(S.addrMatch), objectId(S.frameMatch), objectId(S.siteMatch), objectId(S.classes)].join(',');
  if (layer.key === key && (S.moving || layer.view.join() === [S.x0, S.x1, vy0, vy1].join())) return layer;
  const c = layer.canvas || (layer.canvas = document.createElement('canvas'));
  c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
  const ctx = c.getContext('2d', { willReadFrequently: true });
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = '#fff'; ctx.fillRect(0, 0, w, h);
  ctx.beginPath(); ctx.rect(PAD.l, PAD.t, pw, ph); ctx.clip();
  // Total memory per column: the allocations past Detail lie in this
  // grey band, drawn as one step-shaped polygon (a single simple path
  // fills several times faster than a rectangle per column).
  ctx.fillStyle = '#d3d7dc';
  const base = win.x0, y0 = Y(Math.max(0, vy0 - (vy1 - vy0)));
  ctx.beginPath();
  let lastX = null;
  for (let c2 = 0; c2 < win.w; c2++) {
    const cv = win.colMax[c2];
    const xa = X(base + win.colX[c2]), xb = X(base + win.colX[c2 + 1]);
    if (xb < PAD.l - 2 || xa > PAD.l + pw + 2) continue;
    const y = cv > 0 ? Math.max(Y(cv), PAD.t - 2) : y0;
    if (lastX === null) ctx.moveTo(xa, y0);
    ctx.lineTo(xa, y); ctx.lineTo(xb, y);
    lastX = xb;
  }
  if (lastX !== null) { ctx.lineTo(lastX, y0); ctx.closePath(); ctx.fill(); }
  fillPolygons(ctx, win, v, sc, dpr, { x: PAD.l, y: PAD.t, w: pw, h: ph });
  layer.key = key;
  layer.view = [S.x0, S.x1, vy0, vy1];
  return layer;
}

// drawBox outlines the box being dragged out for a box zoom.
function drawBox(ctx) {
  const b = S.box;
  if (!b) return;
  ctx.strokeStyle = '#1f6feb'; ctx.lineWidth = 1; ctx.setLineDash([4, 3]);
  ctx.fillStyle = 'rgba(31,111,235,0.08)';
  const x = Math.min(b.px0, b.px1), y = Math.min(b.py0, b.py1), w = Math.abs(b.px1 - b.px0), h = Math.abs(b.py1 - b.py0);
  ctx.fillRect(x, y, w, h); ctx.strokeRect(x + 0.5, y + 0.5, w, h);
  ctx.setLineDash([]);
}

function drawAxes(ctx, w, h, pw, ph, vy0, vy1, X, Y) {
  ctx.strokeStyle = '#9aa4ae'; ctx.lineWidth = 1; ctx.fillStyle = '#4a545e';
  ctx.font = '11px system-ui, sans-serif';
  ctx.beginPath();
  ctx.moveTo(PAD.l - 0.5, PAD.t); ctx.lineTo(PAD.l - 0.5, PAD.t + ph + 0.5); ctx.lineTo(PAD.l + pw, PAD.t + ph + 0.5);
  ctx.stroke();
  ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
  // The y labels follow the visible band of bytes.
  const yLabels = [];
  for (const v of niceTicks(vy0, vy1, 6, true)) {
    if (v < 0) continue;
    yLabels.push(formatSize(v, false));
    const y = Math.round(Y(v)) + 0.5;
    ctx.strokeStyle = '#eef0f2'; ctx.beginPath(); ctx.moveTo(PAD.l, y); ctx.lineTo(PAD.l + pw, y); ctx.stroke();
    ctx.fillText(formatSize(v, false), PAD.l - 6, y);
  }
  window.gpumem.yLabels = yLabels;
  ctx.textAlign = 'center'; ctx.textBaseline = 'top';
  const time = S.p.mode === 'time';
  const origin = time ? S.lo : 0;
  for (const v of niceTicks(S.x0 - origin, S.x1 - origin, Math.max(2, Math.floor(pw / 110)), false, !time)) {
    const x = X(v + origin);
    ctx.strokeStyle = '#9aa4ae'; ctx.beginPath(); ctx.moveTo(x, PAD.t + ph); ctx.lineTo(x, PAD.t + ph + 4); ctx.stroke();
    ctx.fillText(time ? formatDuration(v) : formatCount(v), x, PAD.t + ph + 6);
  }
  ctx.textAlign = 'left';
  ctx.fillText(time ? 'time since first event' : 'timestep', PAD.l + pw - 120, PAD.t + ph + 17);
}

// drawMinimap draws the whole range's totals and, as a rectangle, the
// visible window in x and y.
function drawMinimap() {
  const c = $('minimap');
  const { ctx, w, h } = setupCanvas(c);
  ctx.clearRect(0, 0, w, h);
  const f = S.full;
  if (!f) return;
  const span = S.hi - S.lo;
  const m = yFull();
  const my = (v) => h - v / m * (h - 2);
  ctx.fillStyle = '#8fa6bf';
  for (let i = 0; i < f.w; i++) {
    const v = f.colMax[i];
    if (!(v > 0)) continue;
    const xa = (f.x0 + f.colX[i] - S.lo) / span * w, xb = (f.x0 + f.colX[i + 1] - S.lo) / span * w;
    ctx.fillRect(xa, my(v), xb - xa + 0.5, h - my(v));
  }
  const [y0, y1] = yWindow();
  const bx0 = (S.x0 - S.lo) / span * w, bx1 = (S.x1 - S.lo) / span * w;
  const by0 = Math.max(0, my(y1)), by1 = Math.min(h, my(y0));
  const bw = Math.max(bx1 - bx0, 2), bh = Math.max(by1 - by0, 2);
  ctx.fillStyle = 'rgba(31,111,235,0.15)';
  ctx.fillRect(bx0, by0, bw, bh);
  ctx.strokeStyle = '#1f6feb'; ctx.lineWidth = 1.5;
  ctx.strokeRect(bx0 + 0.5, by0 + 0.5, bw - 1, bh - 1);
  S.minimapLayout = { w, h, my };
}

// spanAt returns the lowest and highest y at which polygon i of win
// crosses the vertical line x (data units, x relative to win.x0), or
// null: the polygon runs along its bottom edge, then back along its top.
function spanAt(win, i, x) {
  const s = win.starts[i], e = win.starts[i + 1];
  let lo = Infinity, hi = -Infinity;
  for (let k = s, j = e - 1; k < e; j = k++) {
    const xk = win.xs[k], xj = win.xs[j];
    if ((xk <= x && x <= xj) || (xj <= x && x <= xk)) {
      const y = xj === xk ? Math.min(win.ys[k], win.ys[j]) : win.ys[k] + (win.ys[j] - win.ys[k]) * (x - xk) / (xj - xk);
      const y2 = xj === xk ? Math.max(win.ys[k], win.ys[j]) : y;
      if (y < lo) lo = y;
      if (y2 > hi) hi = y2;
    }
  }
  return lo <= hi ? [lo, hi] : null;
}

// hitTestAll lists the polygons under canvas point (px, py), largest
// first: those whose span at the cursor's x meets the cursor's pixel, so
// that allocations thinner than a pixel are found too. Pool envelopes
// come only when no block inside them is hit.
function hitTestAll(px, py) {
  const win = S.win, L = S.layoutPlot;
  if (!win || !L) return { ids: [] };
  const x = S.x0 + (px - PAD.l) / L.pw * (S.x1 - S.x0) - win.x0;
  const bpp = (L.y1 - L.y0) / L.ph;
  const y = L.y0 + (PAD.t + L.ph - py) * bpp;
  const ylo = y - bpp / 2, yhi = y + bpp / 2;
  const bb = win.boxes;
  const ids = [], env = [];
  for (let i = 0; i < win.n; i++) {
    if (bb[4 * i] > x || bb[4 * i + 1] < x || bb[4 * i + 2] > yhi || bb[4 * i + 3] < ylo) continue;
    const sp = spanAt(win, i, x);
    if (!sp || sp[0] > yhi || sp[1] < ylo) continue;
    (win.kinds[i] === 2 ? env : ids).push(win.ids[i]);
  }
  if (ids.length) return { ids };
  if (env.length) return { ids: env.slice(0, 1) };
  // inside the grey area: allocations past Detail
  for (let c = 0; c < win.w; c++) {
    if (win.colX[c] <= x && x < win.colX[c + 1]) {
      if (y >= 0 && y <= win.colMax[c]) return { ids: [], summarized: true };
      break;
    }
  }
  return { ids: [] };
}

// hitTest is the first of hitTestAll: the largest allocation under the
// cursor.
function hitTest(px, py) {
  const r = hitTestAll(px, py);
  return { id: r.ids.length ? r.ids[0] : -1, ids: r.ids, summarized: r.summarized };
}

window.gpumem.hitTest = hitTest;

async function elemDetails(id) {
  let e = S.elemCache.get(id);
  if (!e) {
    e = await api.elem(S.p, id);
    // Before the server has made the categories the details lack one:
    // ask again next time.
    if (e.category || !answersAvailable()) S.elemCache.set(id, e);
  }
  return e;
}

// showElem shows the details of id, or, when several allocations share
// the cursor's pixel, of all of them (ids, largest first).
async function showElem(id, pin, ids = [id]) {
  if (id < 0) return;
  const list = ids.slice(0, 12);
  let es;
  try { es = await Promise.all(list.map(elemDetails)); } catch (err) { $('details').textContent = String(err.message || err); return; }
  if (!(pin || S.selId < 0 || S.selId === id)) return;
  // The cursor left (or moved on) while the details were fetched.
  if (!pin && S.selId !== id && S.hoverId !== id) return;
  const envNote = S.meta && id >= S.meta.elements ? "\nThe envelope is the pool's high-water mark of max(active, reserved); its blocks are drawn inside it." : '';
  // The category and why (gpumem peak's category_reason), once the
  // server has classified the device's allocations.
  const why = (e) => e.category ? `\ncategory: ${e.category} (${e.category_reason})` : '';
  if (es.length === 1) {
    $('details').textContent = es[0].text + why(es[0]) + envNote;
    return;
  }
  const more = ids.length > list.length ? ` (the largest ${list.length} shown)` : '';
  $('details').textContent = `${formatCount(ids.length)} allocations under the cursor, largest first${more}:\n\n` +
    es.map((e, k) => `[${k + 1}] ${e.text}${why(e)}`).join('\n\n');
}

function setupPlotEvents() {
  const c = $('plot');
  let drag = null;
  const local = (ev) => { const r = c.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top]; };
  c.addEventListener('mousemove', (ev) => {
    const [px, py] = local(ev);
    if (drag && drag.box) {
      S.box = { px0: drag.px, py0: drag.py, px1: px, py1: py };
      drawPlot();
      return;
    }
    if (drag) {
      const L = S.layoutPlot;
      const dx = (px - drag.px) / L.pw * (drag.x1 - drag.x0);
      const dy = (py - drag.py) / L.ph * (drag.y1 - drag.y0);
      if (Math.abs(px - drag.px) > 2 || Math.abs(py - drag.py) > 2) drag.moved = true;
      if (!drag.moved) return;
      setView(drag.x0 - dx, drag.x1 - dx, drag.y0 + dy, drag.y1 + dy);
      return;
    }
    const hit = hitTest(px, py);
    if (hit.id !== S.hoverId || (hit.ids || []).length !== S.hoverCount) {
      S.hoverId = hit.id; S.hoverCount = (hit.ids || []).length;
      drawPlot();
      if (S.selId < 0 && hit.id >= 0) showElem(hit.id, false, hit.ids);
    }
    if (S.selId >= 0) return;
    if (hit.id < 0 && hit.summarized) $('details').textContent = 'The grey band: allocations past Detail (the largest Detail in view are drawn). Zoom in, or raise Detail, to draw them one by one.';
  });
  c.addEventListener('mousedown', (ev) => {
    const [px, py] = local(ev);
    const [y0, y1] = yWindow();
    drag = { px, py, x0: S.x0, x1: S.x1, y0, y1, moved: false, box: ev.ctrlKey || ev.altKey || ev.metaKey };
    if (drag.box) ev.preventDefault();
  });
  window.addEventListener('mouseup', (ev) => {
    if (!drag) return;
    const d = drag; drag = null;
    if (d.box) {
      const b = S.box; S.box = null;
      if (b && Math.abs(b.px1 - b.px0) > 3 && Math.abs(b.py1 - b.py0) > 3) {
        const L = S.layoutPlot;
        const xAt = (px) => d.x0 + (px - PAD.l) / L.pw * (d.x1 - d.x0);
        const yAt = (py) => d.y0 + (PAD.t + L.ph - py) / L.ph * (d.y1 - d.y0);
        setView(xAt(Math.min(b.px0, b.px1)), xAt(Math.max(b.px0, b.px1)), yAt(Math.max(b.py0, b.py1)), yAt(Math.min(b.py0, b.py1)));
      } else drawPlot();
      return;
    }
    if (d.moved) return;
    if (ev.target !== c) return;
    const [px, py] = local(ev);
    const oom = oomMarkerAt(px);
    if (oom) { showOOM(oom); return; }
    setMoment(px);
    const hit = hitTest(px, py);
    S.selId = hit.id >= 0 && hit.id !== S.selId ? hit.id : -1;
    if (S.selId >= 0) showElem(S.selId, true, hit.ids);
    drawPlot(); writeHash();
  });
  c.addEventListener('dblclick', () => resetView());
  c.addEventListener('mouseleave', () => {
    if (S.hoverId !== -1) { S.hoverId = -1; S.hoverCount = 0; drawPlot(); }
    if (S.selId < 0) clearDetails(); // only a pinned allocation stays
  });
  c.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const r = c.getBoundingClientRect();
    const L = S.layoutPlot;
    const fx = Math.min(1, Math.max(0, (ev.clientX - r.left - PAD.l) / L.pw));
    const fy = Math.min(1, Math.max(0, (PAD.t + L.ph - (ev.clientY - r.top)) / L.ph));
    zoom(ev.deltaY < 0 ? 1 / 1.25 : 1.25, fx, ev.shiftKey ? null : fy);
  }, { passive: false });

  // The minimap: drag the rectangle to move the view in x and y, or drag
  // elsewhere to choose a new time range.
  const mm = $('minimap');
  let brush = null;
  const mmAt = (ev) => {
    const r = mm.getBoundingClientRect();
    const L = S.minimapLayout || { h: r.height };
    const x = S.lo + (ev.clientX - r.left) / r.width * (S.hi - S.lo);
    const y = (L.h - (ev.clientY - r.top)) / (L.h - 2) * yFull();
    return [x, y];
  };
  mm.addEventListener('mousedown', (ev) => {
    const [x, y] = mmAt(ev);
    const [y0, y1] = yWindow();
    brush = x >= S.x0 && x <= S.x1 ? { move: true, sx: x, sy: y, x0: S.x0, x1: S.x1, y0, y1 } : { move: false, sx: x };
  });
  window.addEventListener('mousemove', (ev) => {
    if (!brush) return;
    const [x, y] = mmAt(ev);
    if (brush.move) {
      const dx = x - brush.sx, dy = y - brush.sy;
      setView(brush.x0 + dx, brush.x1 + dx, brush.y0 + dy, brush.y1 + dy);
    } else if (Math.abs(x - brush.sx) > 0) setWindow(Math.min(x, brush.sx), Math.max(x, brush.sx));
  });
  window.addEventListener('mouseup', () => { brush = null; });
  // A window re-projects to a plot a little larger or smaller (the page
  // settling, a scrollbar) without losing detail: only a real change of
  // width asks for a new one.
  new ResizeObserver(() => {
    if (!isTimeline() || !S.win) return;
    const { w } = plotSize();
    if (Math.abs(w - S.win.w) > 0.1 * S.win.w) scheduleRefresh(); else drawPlot();
  }).observe($('plot'));
}

// setWindow shows x range [a, b], keeping the visible bytes.
function setWindow(a, b, delay) {
  const span = S.hi - S.lo;
  const minSpan = S.p.mode === 'time' ? 1 : 0.5;
  let w = Math.max(Math.min(b - a, span), minSpan);
  a = Math.min(Math.max(a, S.lo), S.hi - w);
  S.x0 = a; S.x1 = a + w;
  scheduleRefresh(delay);
}

// setView shows [a, b] x [c, d]; the whole height again makes y follow
// the totals (yAuto).
function setView(a, b, c, d, delay) {
  const top = yFull();
  let h = Math.max(Math.min(d - c, top), 1);
  c = Math.min(Math.max(c, 0), top - h);
  S.yAuto = c <= 0 && c + h >= top;
  if (!S.yAuto) { S.y0 = c; S.y1 = c + h; }
  setWindow(a, b, delay);
}

// zoom scales the view by f around (fx, fy), fractions of the plot from
// its left and bottom; fy null zooms x only.
function zoom(f, fx = 0.5, fy = 0.5, delay) {
  const span = S.x1 - S.x0;
  const c = S.x0 + span * fx;
  const ns = span * f;
  if (fy === null) { setWindow(c - ns * fx, c - ns * fx + ns, delay); return; }
  const [y0, y1] = yWindow();
  const cy = y0 + (y1 - y0) * fy, nh = (y1 - y0) * f;
  setView(c - ns * fx, c - ns * fx + ns, cy - nh * fy, cy - nh * fy + nh, delay);
}

function resetView(delay) {
  S.yAuto = true;
  setWindow(S.lo, S.hi, delay);
}

// ---------- search ----------
let searchTimer = 0;
function runSearch() {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(async () => {
    const addr = $('search-addr').value, frame = $('search-frame').value;
    if (!isTimeline()) return;
    if (!addr.trim() && !frame.trim()) {
      $('addr-count').textContent = ''; $('frame-count').textContent = '';
      // New sets would change the layer's key: rasterizing the window
      // again for nothing (it ran once after every first paint).
      if (S.addrMatch.size || S.frameMatch.size) {
        S.addrMatch = new Set(); S.frameMatch = new Set();
        drawPlot();
      }
      return;
    }
    try {
      const r = await api.search(S.p, addr, frame);
      S.addrMatch = new Set(r.addr.ids); S.frameMatch = new Set(r.frame.ids);
      const lbl = (n) => `${formatCount(n)} match${n === 1 ? '' : 'es'}`;
      $('addr-count').textContent = addr.trim() ? lbl(r.addr.count) : '';
      $('frame-count').textContent = frame.trim() ? lbl(r.frame.count) : '';
      drawPlot();
    } catch (e) { showError(String(e.message || e)); }
  }, 150);
}

// ---------- allocator state history ----------
const ROW = 20;
async function openState(h) {
  S.eventPages = new Map();
  const first = await api.events(S.p, 0, 200);
  S.eventsTotal = first.total;
  S.eventPages.set(0, first.lines);
  $('events-head').textContent = `${formatCount(first.total)} events (click or use ↑/↓ to choose the moment shown on the right)`;
  $('events-spacer').style.height = `${first.total * ROW}px`;
  let idx = first.total - 1;
  if (h && h.has('event')) idx = Math.min(Math.max(+h.get('event'), -1), first.total - 1);
  const ev = $('events');
  await selectEvent(idx);
  ev.scrollTop = Math.max(0, (idx + 1) * ROW - ev.clientHeight / 2);
  renderRows();
}

async function eventLine(i) {
  const page = Math.floor(i / 200);
  if (!S.eventPages.has(page)) {
    S.eventPages.set(page, null);
    const r = await api.events(S.p, page * 200, 200);
    S.eventPages.set(page, r.lines);
    renderRows();
  }
  const lines = S.eventPages.get(page);
  return lines ? lines[i - page * 200] : null;
}

function renderRows() {
  const ev = $('events');
  const top = ev.scrollTop, h = ev.clientHeight;
  const i0 = Math.max(0, Math.floor(top / ROW) - 5), i1 = Math.min(S.eventsTotal, Math.ceil((top + h) / ROW) + 5);
  for (const r of [...ev.querySelectorAll('.row')]) r.remove();
  const frag = document.createDocumentFragment();
  for (let i = i0; i < i1; i++) {
    const page = S.eventPages.get(Math.floor(i / 200));
    let text = page ? page[i % 200] : null;
    if (text == null) { eventLine(i); text = '…'; }
    const d = document.createElement('div');
    d.className = 'row' + (i === S.stateIdx ? ' sel' : '');
    d.style.top = `${i * ROW}px`;
    d.dataset.i = i;
    d.innerHTML = `<span class="i">${i}</span>${escapeHTML(text.split('\n')[0])}`;
    frag.appendChild(d);
  }
  ev.appendChild(frag);
}

async function selectEvent(idx) {
  S.stateIdx = idx;
  renderRows();
  const seq = ++S.seq;
  const t0 = performance.now();
  const st = await api.state(S.p, idx);
  if (seq !== S.seq) return;
  const tf = performance.now();
  S.state = st;
  const pct = (x) => `${(100 * x).toFixed(1)}%`;
  $('state-totals').innerHTML = `<span id="state-text" style="margin:0;color:inherit;font-weight:600">${escapeHTML(st.text)}</span>` +
    `<span>${formatCount(st.segments.length + (st.omitted || 0))} segments${st.omitted ? ` (drawing the largest ${formatCount(st.segments.length)})` : ''}</span>` +
    `<span>free in segments ${formatSize(st.free, false)} (fragmentation ${pct(st.fragmentation)}, largest free ${formatSize(st.largestFree, false)})</span>` +
    `<span>rounding waste ${formatSize(st.rounding, false)}</span>` +
    (embedded ? '' : `<a id="state-flame" target="_blank" href="api/flame?${q(S.p, { idx })}">flamegraph of this moment ↗</a>`);
  $('state-stack').textContent = idx >= 0 ? `${st.text}\n${st.event}\n${st.stack}` : 'State before the first event.';
  drawState();
  // [fetch+parse, draw] ms of each state shown; the bench logs them.
  window.gpumem.statePhases = (window.gpumem.statePhases || []).slice(-9).concat([[Math.round(tf - t0), Math.round(performance.now() - tf)]]);
  writeHash();
  document.body.dataset.ready = '1';
}

function hashAddr(s) {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
  return Math.abs(h);
}

// drawState packs segments (sorted by size, then address) into rows as wide
// as the largest segment, like memory_viz's MemoryView.
function drawState() {
  const c = $('state-canvas');
  const { ctx, w, h } = setupCanvas(c);
  ctx.clearRect(0, 0, w, h);
  const st = S.state;
  if (!st || !st.segments.length) {
    ctx.fillStyle = '#5b6670'; ctx.font = '14px system-ui'; ctx.fillText('No segments at this point.', 12, 24);
    return;
  }
  const segs = [...st.segments].sort((a, b) => a.size - b.size || (a.addr < b.addr ? -1 : 1));
  const rowW = Math.max(...segs.map(s => s.size));
  const pad = rowW / 200;
  const rows = [];
  let cur = [], used = 0;
  for (const s of segs) {
    if (used + s.size > rowW && cur.length) { rows.push(cur); cur = []; used = 0; }
    cur.push({ s, x: used }); used += s.size + pad;
  }
  if (cur.length) rows.push(cur);
  const rh = Math.max(6, Math.min(40, (h - 8) / rows.length));
  const sx = (w - 8) / (rowW + pad);
  const boxes = [];
  // Rows below the canvas are neither drawn nor hovered: at 6 px a row, a
  // big file's 20,000 segments fill thousands of rows, and drawing them
  // all took most of a state step's draw.
  rows.forEach((row, ri) => {
    const y = 4 + ri * rh;
    if (y >= h) return;
    for (const { s, x } of row) {
      const x0 = 4 + x * sx, sw = Math.max(1, s.size * sx);
      ctx.fillStyle = '#fff'; ctx.fillRect(x0, y, sw, rh * 0.8);
      for (const [off, size, req, pending, ver] of s.blocks) {
        const bx = x0 + off * sx;
        ctx.fillStyle = pending ? '#e15759' : tableau10[hashAddr(`${s.addr}${off}`) % 10];
        ctx.fillRect(bx, y, Math.max(0.5, req * sx), rh * 0.8);
        if (size > req) { ctx.fillStyle = '#d1242f'; ctx.fillRect(bx + req * sx, y, Math.max(0.5, (size - req) * sx), rh * 0.8); }
        boxes.push({ x0: bx, x1: bx + Math.max(1, size * sx), y, h: rh * 0.8, seg: s, off, size, req, pending, ver });
      }
      ctx.strokeStyle = '#000'; ctx.lineWidth = 1; ctx.strokeRect(x0 + 0.5, y + 0.5, sw - 1, rh * 0.8 - 1);
      boxes.push({ x0, x1: x0 + sw, y, h: rh * 0.8, seg: s });
    }
  });
  S.stateLayout = boxes;
}

function stateHover(px, py) {
  const boxes = S.stateLayout || [];
  for (const b of boxes) {
    if (px < b.x0 || px > b.x1 || py < b.y || py > b.y + b.h) continue;
    const s = b.seg;
    const segAddr = parseInt(s.addr.slice(2), 16);
    if (b.size !== undefined) {
      const addr = (segAddr + b.off).toString(16);
      if (px > b.x0 + (b.x1 - b.x0) * b.req / b.size && b.size > b.req) return `Free space lost due to rounding ${formatSize(b.size - b.req)} (stream ${s.stream})`;
      return `b'${addr}_${b.ver} ${formatSize(b.req)} allocation${b.pending ? ' (block freed but waiting due to record_stream)' : ''} (stream ${s.stream})`;
    }
    const used = s.blocks.reduce((a, x) => a + x[1], 0);
    const req = s.blocks.reduce((a, x) => a + x[2], 0);
    const free = s.size - used;
    const internal = used - req;
    return `${s.addr}: segment ${formatSize(s.size)} allocated, ${formatSize(free)} free (${(free + internal > 0 ? 100 * internal / (free + internal) : 0).toFixed(1)}% internal) (stream ${s.stream}${s.pool ? `, pool_id (${s.pool[0]}, ${s.pool[1]})` : ''})`;
  }
  return '';
}

function setupStateEvents() {
  const ev = $('events');
  ev.addEventListener('scroll', renderRows);
  ev.addEventListener('click', (e) => {
    const r = e.target.closest('.row');
    if (r) selectEvent(+r.dataset.i);
  });
  const c = $('state-canvas');
  c.addEventListener('mousemove', (e) => {
    const r = c.getBoundingClientRect();
    $('state-hover').textContent = stateHover(e.clientX - r.left, e.clientY - r.top);
  });
  new ResizeObserver(() => { if (S.p.view === 'state' && S.state) drawState(); }).observe(c);
}

function stepEvent(d) {
  const idx = Math.min(Math.max(S.stateIdx + d, 0), S.eventsTotal - 1);
  if (idx === S.stateIdx) return;
  const ev = $('events');
  const y = idx * ROW;
  if (y < ev.scrollTop) ev.scrollTop = y;
  else if (y + ROW > ev.scrollTop + ev.clientHeight) ev.scrollTop = y + ROW - ev.clientHeight;
  selectEvent(idx);
}

// ---------- controls ----------
function setupControls() {
  $('file').addEventListener('change', async () => {
    S.p.file = +$('file').value;
    if (curFile().loading) S.files = (await filesWhenReady(S.p.file)).files;
    S.p.device = curFile().defaultDevice;
    fillSelectors(); openView(null);
  });
  // Close the file shown: the server forgets it (uploads are kept until
  // closed, or until newer uploads push the oldest out).
  $('close-file').addEventListener('click', async () => {
    try {
      const r = await fetch('api/files/' + S.p.file, { method: 'DELETE' });
      const j = await r.json();
      if (!r.ok) throw new Error(j.error || r.statusText);
      S.files = j.files;
      if (!S.files.length) { showError('No snapshot loaded. Drop a snapshot file onto this page.'); return; }
      S.p.file = S.files[0].id; S.p.device = S.files[0].defaultDevice;
      fillSelectors(); openView(null);
    } catch (e) { showError(`Could not close the file: ${e.message || e}`); }
  });
  $('device').addEventListener('change', () => { S.p.device = +$('device').value; fillSelectors(); openView(null); });
  $('view').addEventListener('change', () => { S.p.view = $('view').value; openView(null); });
  $('mode').addEventListener('change', () => { S.p.mode = $('mode').value; openView(null); });
  $('detail').addEventListener('change', () => { S.p.detail = Math.max(0, Math.round(+$('detail').value || 0)); openView(null); });
  $('totals').addEventListener('change', () => { renderLegend(); refreshWindow(false); });
  $('fragcurve').addEventListener('change', () => {
    S.fragCurve = null; renderLegend(); writeHash();
    if ($('fragcurve').checked) loadFragCurve(S.x0, S.x1, plotSize().w); else drawPlot();
  });
  $('colorby').addEventListener('change', async () => {
    S.colorBy = $('colorby').value;
    await loadClasses(S.seq);
    renderLegend(); drawPlot(); writeHash();
  });
  $('search-addr').addEventListener('input', runSearch);
  $('search-frame').addEventListener('input', runSearch);
  $('help-btn').addEventListener('click', () => { $('help').hidden = !$('help').hidden; });
  $('help').addEventListener('click', () => { $('help').hidden = true; });
  document.addEventListener('keydown', (e) => {
    if (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT') {
      if (e.key === 'Escape') e.target.blur();
      return;
    }
    if (e.key === '?') { $('help').hidden = !$('help').hidden; return; }
    if (e.key === 'Escape') {
      $('help').hidden = true;
      if (S.selId >= 0) { S.selId = -1; drawPlot(); writeHash(); }
      return;
    }
    if (e.key >= '1' && e.key <= '5') { S.p.view = VIEWS[+e.key - 1]; $('view').value = S.p.view; openView(null); return; }
    if (isTimeline() && S.win) {
      const span = S.x1 - S.x0;
      switch (e.key) {
        case '+': case '=': zoom(1 / 1.5, 0.5, 0.5, 0); break;
        case '-': case '_': zoom(1.5, 0.5, 0.5, 0); break;
        case 'ArrowLeft': setWindow(S.x0 - span * 0.2, S.x1 - span * 0.2, 0); break;
        case 'ArrowUp': case 'ArrowDown': {
          const [y0, y1] = yWindow(), d = (y1 - y0) * 0.2 * (e.key === 'ArrowUp' ? 1 : -1);
          setView(S.x0, S.x1, y0 + d, y1 + d, 0); break;
        }
        case 'ArrowRight': setWindow(S.x0 + span * 0.2, S.x1 + span * 0.2, 0); break;
        case '0': case 'Home': resetView(0); break;
        case '/': $('search-frame').focus(); break;
        default: return;
      }
      e.preventDefault();
    } else if (S.p.view === 'state') {
      if (e.key === 'ArrowUp') { stepEvent(-1); e.preventDefault(); }
      if (e.key === 'ArrowDown') { stepEvent(1); e.preventDefault(); }
    }
  });
  window.addEventListener('hashchange', () => {
    S.lastHash = location.hash;
    const before = JSON.stringify(S.p);
    const h = readHash();
    if (JSON.stringify(S.p) !== before) { fillSelectors(); openView(h); }
  });
  // Drag-and-drop upload.
  let depth = 0;
  document.addEventListener('dragenter', (e) => { if (!embedded) { e.preventDefault(); depth++; $('drop').hidden = false; } });
  document.addEventListener('dragleave', () => { if (--depth <= 0) { depth = 0; $('drop').hidden = true; } });
  document.addEventListener('dragover', (e) => e.preventDefault());
  document.addEventListener('drop', async (e) => {
    e.preventDefault(); depth = 0; $('drop').hidden = true;
    if (embedded) { showError('This exported page cannot open other files; run gpumem serve.'); return; }
    for (const f of e.dataTransfer.files) await upload(f);
  });
}

async function upload(f) {
  showError('');
  $('summary').textContent = `Uploading and decoding ${f.name} (${formatSize(f.size, false)})…`;
  try {
    // A non-simple type: the server refuses the simple ones, which any
    // other site's page could send without asking first.
    const r = await fetch('api/upload?name=' + encodeURIComponent(f.name),
      { method: 'POST', body: f, headers: { 'Content-Type': 'application/octet-stream' } });
    const j = await r.json();
    if (!r.ok) throw new Error(j.error || r.statusText);
    S.files = (await api.files()).files;
    S.p.file = j.id; S.p.device = j.file.defaultDevice;
    fillSelectors();
    await openView(null);
  } catch (e) {
    showError(`Could not open ${f.name}: ${e.message || e}`);
    if (S.meta) renderSummary();
  }
}

Object.assign(window.gpumem, { zoom, setWindow, setView, resetView, hitTestAll });
setupControls();
setupPlotEvents();
setupStateEvents();
init();

// ---------- answers: colour by category / stream, what is live, OOM ----------
// The server computes them (internal/analysis, as gpumem peak and gpumem
// oom print them); the page only draws. A page from gpumem html has no
// server: the colour selector and the panel are hidden there.

function answersAvailable() { return !embedded && ['active', 'private'].includes(S.p.view); }

// loadClasses fetches the class of every allocation for "Colour by".
async function loadClasses(seq) {
  const sel = $('colorby');
  sel.disabled = !answersAvailable();
  $('fragcurve').disabled = !answersAvailable();
  sel.value = S.colorBy;
  S.classes = null; S.classNames = [];
  if (!answersAvailable() || S.colorBy === 'allocation') return;
  try {
    const r = await api.classes(S.p, S.colorBy);
    if (seq !== S.seq) return;
    const raw = new Uint8Array(b64ToBuffer(r.classes));
    // Category classes map to fixed colours (the same in every file).
    // Categories of a --categories file take the two colours left, in turn.
    const colour = r.legend.map((n, k) => r.by === 'category' ? (CATEGORY_COLOURS[n] ?? 8 + k % 2) : k % 10);
    S.classes = raw.map(k => colour[k]);
    const present = new Array(r.legend.length).fill(0);
    for (const k of raw) present[k]++;
    S.classNames = r.legend.map((n, k) => ({ name: n, colour: colour[k], count: present[k] })).filter(c => c.count > 0);
  } catch (e) {
    showError(String(e.message || e));
  }
}

// classLegend lists the categories (or streams) present, with their colours.
function classLegend() {
  return S.classNames.map(c => ['sw', tableau10[c.colour], `<span class="cls">${escapeHTML(c.name)}</span> (${formatCount(c.count)})`]);
}

// setMoment makes the answer panel answer for the moment clicked.
function setMoment(px) {
  if (!answersAvailable() || !S.layoutPlot) return;
  const L = S.layoutPlot;
  if (px < PAD.l || px > PAD.l + L.pw) return;
  S.moment = S.x0 + (px - PAD.l) / L.pw * (S.x1 - S.x0);
  S.siteMatch = new Set();
  showAnswer();
}

function drawMoment(ctx, X, ph) {
  if (S.moment === null) return;
  const x = X(S.moment);
  ctx.strokeStyle = '#111'; ctx.lineWidth = 1; ctx.setLineDash([2, 2]);
  ctx.beginPath(); ctx.moveTo(x + 0.5, PAD.t); ctx.lineTo(x + 0.5, PAD.t + ph); ctx.stroke();
  ctx.setLineDash([]);
}

function sizeText(n) { return formatSize(n, false); }

// showAnswer fills the panel with gpumem peak's answer for the moment (the
// peak until a moment is clicked).
async function showAnswer() {
  const panel = $('answer');
  panel.hidden = !answersAvailable();
  if (panel.hidden) return;
  const seq = ++S.answerSeq;
  let a;
  try {
    a = await api.peak(S.p, S.moment === null ? { at: 'peak' } : { x: S.moment });
  } catch (e) {
    panel.textContent = String(e.message || e);
    return;
  }
  if (seq !== S.answerSeq) return;
  const where = a.at.event >= 0 ? `after event e${a.at.event}` : 'before the first event';
  const cats = Object.entries(a.categories).filter(([, v]) => v > 0).sort((x, y) => y[1] - x[1])
    .map(([k, v]) => `<span class="chip"><i class="sw" style="background:${tableau10[CATEGORY_COLOURS[k] ?? 8]}"></i>${k} ${sizeText(v)}</span>`).join(' ');
  const f = a.fragmentation;
  const rows = a.sites.map((st, k) => `<tr data-site="${k}"><td class="num">${sizeText(st.bytes)}</td><td class="num">${(100 * st.share).toFixed(1)}%</td>` +
    `<td class="num">${formatCount(st.count)}</td><td class="cat" title="${escapeHTML(st.category_reason || '')}">${escapeHTML(st.category)}<div class="why">${escapeHTML((st.category_reason || '').split(':')[0])}</div></td><td class="frames">${escapeHTML(st.frames.length ? st.frames.join(' ← ') : '(no stack recorded)')}</td></tr>`).join('');
  panel.innerHTML = `<div class="answer-head"><b>Live at ${S.moment === null ? 'the peak' : 'the selected moment'}</b> (${where}, timestep ${a.at.timestep}): ` +
    `<b id="answer-live">${sizeText(a.live_bytes)}</b> in ${formatCount(a.live_count)} allocations · peak ${sizeText(a.peak_allocated_bytes)} · ` +
    `fragmentation ${f.headline.toFixed(3)} (largest free block ${sizeText(f.largest_free_block_bytes)} of ${sizeText(f.free_bytes)} free)` +
    (S.moment === null ? '' : ' <button id="answer-peak">Peak</button>') + `</div><div class="cats">${cats}</div>` +
    `<table id="sites"><thead><tr><th>bytes</th><th>share</th><th>count</th><th>category (rule; hover for why)</th><th>site (innermost user frames first; click a row to highlight)</th></tr></thead><tbody>${rows}</tbody></table>` +
    (a.sites_omitted ? `<div class="muted">${formatCount(a.sites_omitted)} smaller sites not listed</div>` : '');
  S.answer = a;
  if ($('answer-peak')) $('answer-peak').onclick = () => { S.moment = null; S.siteMatch = new Set(); showAnswer(); drawPlot(); };
  for (const tr of panel.querySelectorAll('tr[data-site]')) {
    tr.onclick = () => {
      const st = a.sites[+tr.dataset.site];
      const on = !tr.classList.contains('sel');
      for (const o of panel.querySelectorAll('tr.sel')) o.classList.remove('sel');
      if (on) tr.classList.add('sel');
      S.siteMatch = new Set(on ? st.items : []);
      drawPlot();
    };
  }
  drawPlot();
}

// oomMarkerAt is the OOM marker within 4 pixels of px, if any.
function oomMarkerAt(px) {
  if (embedded || !S.meta || !S.layoutPlot) return null;
  const L = S.layoutPlot;
  for (const m of S.meta.markers || []) {
    if (m.kind !== 'oom') continue;
    const xv = S.p.mode === 'time' ? m.time : m.event;
    if (Math.abs(L.X(xv) - px) <= 4) return m;
  }
  return null;
}

// showOOM opens gpumem oom's answer for the OOM marker clicked.
async function showOOM(marker) {
  const panel = $('answer');
  panel.hidden = false;
  const seq = ++S.answerSeq;
  let a;
  try { a = await api.oom(S.p); } catch (e) { panel.textContent = String(e.message || e); return; }
  if (seq !== S.answerSeq) return;
  const ooms = a.ooms.length ? a.ooms : [a];
  let o = ooms[0];
  for (const x of ooms) if (Math.abs(x.at.timestep - marker.event) < Math.abs(o.at.timestep - marker.event)) o = x;
  const li = (xs) => xs.map(x => `<li>${escapeHTML(x)}</li>`).join('');
  const avoid = (o.settings || []).filter(s => s.avoids_oom && s.config !== 'recorded').map(s => s.config);
  panel.innerHTML = `<div class="answer-head"><b>OOM</b> (after event e${o.at.event}): verdict <b id="oom-verdict">${escapeHTML(o.verdict)}</b> · ` +
    `request ${sizeText(o.requested_bytes)} · CUDA free ${sizeText(o.device_free_bytes)} · reserved − allocated ${sizeText(o.reserved_unallocated_bytes)} · ` +
    `largest free block ${sizeText(o.largest_free_block_bytes)} <button id="answer-peak">Back to the peak</button></div>` +
    `<div><b>Why</b><ul>${li(o.arithmetic)}</ul></div>` +
    `<div><b>Suggestions</b><ul>${li(o.suggestions.map(s => s.text)) || '<li>none</li>'}</ul></div>` +
    (o.settings && o.settings.length ? `<div class="muted">Allocator settings replayed at ${sizeText(o.settings[0].capacity_bytes)} (reserved + CUDA free): ` +
      `${avoid.length ? 'avoided by ' + escapeHTML(avoid.join('; ')) : 'none avoids it'}.</div>` : '');
  $('answer-peak').onclick = () => { S.moment = null; S.siteMatch = new Set(); showAnswer(); };
}

// ---------- fragmentation curve ----------

// loadFragCurve asks for the fragmentation headline over the window (when
// switched on) and redraws.
async function loadFragCurve(x0, x1, w) {
  if (!$('fragcurve').checked || !answersAvailable()) { S.fragCurve = null; return; }
  const seq = S.seq;
  try {
    const c = await api.fragCurve(S.p, x0, x1, w);
    if (seq !== S.seq && S.x0 !== x0) return;
    requestDraw(() => { S.fragCurve = c; });
  } catch (e) {
    showError(String(e.message || e));
  }
}

// drawFragCurve draws the fragmentation headline (0..1, right axis).
function drawFragCurve(ctx, X, pw, ph) {
  const c = S.fragCurve;
  if (!c || !$('fragcurve').checked) return;
  const Yf = (v) => PAD.t + ph - v * ph;
  ctx.strokeStyle = FRAG_COLOUR; ctx.lineWidth = 1.5;
  ctx.beginPath();
  c.xs.forEach((x, i) => { const px = X(x), py = Yf(c.headline[i]); if (i === 0) ctx.moveTo(px, py); else ctx.lineTo(px, py); });
  ctx.stroke();
  ctx.fillStyle = FRAG_COLOUR; ctx.font = '10px system-ui, sans-serif'; ctx.textAlign = 'right';
  ctx.fillText('frag 1', PAD.l + pw - 2, PAD.t + 10);
  ctx.fillText('0', PAD.l + pw - 2, PAD.t + ph - 3);
  ctx.textAlign = 'left';
}
