// The timeline's data flow: opening a timeline view, asking for the
// visible window and the totals curves as the view moves, the summary
// line, the legend and the searches.

import { S, curFile, isTimeline } from './store.js';
import { $, FRAG_COLOUR, afterPaint, formatCount, setupCanvas, showError, tableau10 } from './ui.js';
import { escapeHTML } from './units.js';
import { formatSize } from './sizes.js';
import { api } from './api.js';
import { writeHash } from './address.js';
import { PAD, drawMinimap, drawPlot, requestDraw, yFull, yWindow } from './plot.js';
import { answersAvailable, classLegend, loadClasses, loadFragCurve, showAnswer } from './answers.js';
import { clearDetails, showElem } from './details.js';

// takePrefetch returns init's requests if they match what is opened now.
function takePrefetch() {
  const pf = S.prefetch;
  S.prefetch = null;
  if (!pf || pf.view !== S.p.view || pf.mode !== S.p.mode || (pf.device !== null && pf.device !== S.p.device)) return null;
  return pf;
}

// openTimeline opens the timeline view S.p names, with the window and
// selection of the address parameters h (null: the whole range).
export async function openTimeline(h) {
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
  // The first window comes right after the description (the server
  // answers both once the view is laid out): the summary, the legend and
  // the plot then change together, in one layout and one frame, rather
  // than a frame for the text alone on the way to the first paint.
  if (pf) await pf.win.catch(() => {});
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

// renderSummary writes the line above the plot: file, device, events,
// peak, allocations and Detail.
export function renderSummary() {
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

// renderLegend writes the legend: colours, the grey band, lines, markers.
export function renderLegend() {
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

// scheduleRefresh redraws what the page has at once and asks for the new
// window after delay ms: a wheel or a drag sends bursts of moves, a key
// press one step.
let refreshTimer = 0;
export function scheduleRefresh(delay = 40) {
  S.moving = true; // until the new window is there, drawPlot moves the last layer
  drawPlot(); // instant: re-project what we have
  drawMinimap();
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => refreshWindow(false), delay);
}

// cancelRefresh drops a window request scheduled and not yet sent.
export function cancelRefresh() { clearTimeout(refreshTimer); }

// plotSize is the plot's data area in CSS pixels: the window's size.
export function plotSize() {
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
export async function refreshWindow(first, pending) {
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

// drawPlaceholder draws the empty plot frame while the snapshot loads: the
// user sees where the timeline will be, and the canvas, its font and the
// page layout are set up before the data arrives instead of after.
export function drawPlaceholder() {
  renderLegend();
  // The summary's bold text (the file name, the peak) is the page's first
  // bold: laying it out loads the bold face, 2-3 ms that were on the path
  // from the data's arrival to the first paint. A hidden bold word loads
  // it now, while the page waits; renderSummary replaces it.
  $('summary').innerHTML = 'Loading…<b class="font-warm" aria-hidden="true">gpumem 0123456789</b>';
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

let searchTimer = 0;
// runSearch runs the address and frame searches (150 ms after the last
// key) and outlines the matches.
export function runSearch() {
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
