// Drawing the timeline (Active Memory, Allocated incl. Private Pools and
// Active Cached Segment views): the plot's layers, polygons, totals
// curves, markers, axes and the minimap, from what the store holds.

import { S, isTimeline, publish } from './store.js';
import { $, formatCount, formatDuration, niceTicks, setupCanvas } from './ui.js';
import { formatSize } from './sizes.js';
import { decodeWindow } from './wincode.js';
import { fillPolygons, reserveRaster, scaleFns, tracePolygon } from './raster.js';

// PAD is the plot's margin around its data area, in CSS pixels.
export const PAD = { l: 76, r: 14, t: 12, b: 30 };

// yFull is the top of the whole-height view: the peak, or the highest
// totals curve once they are shown, with a little headroom.
export function yFull() {
  let y = S.meta ? S.meta.peak : 1;
  if (S.curves) {
    for (const arr of S.curves.v) for (let i = 0; i < arr.length; i++) if (arr[i] > y) y = arr[i];
  }
  return y * 1.04 || 1;
}

// yWindow is the visible byte range.
export function yWindow() {
  return S.yAuto ? [0, yFull()] : [S.y0, S.y1];
}

// requestDraw applies update (data that arrived after the window: markers,
// totals curves) at the next frame and redraws the plot then, once per
// frame however much arrived. Applying it there keeps S in step with what
// is on screen (hover hit-tests use the drawn layout).
let drawUpdates = null;
export function requestDraw(update) {
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

// drawPlot draws the timeline from S: the layer (grey band and filled
// polygons), outlines, totals curves, markers, the overlays subscribed
// to 'plot-overlay', the axes and the zoom box.
export function drawPlot() {
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
  publish('plot-overlay', ctx, X, pw, ph);
  ctx.restore();
  window.gpumem.drawn = drawn;
  drawAxes(ctx, w, h, pw, ph, vy0, vy1, X, Y);
  drawBox(ctx);
}

// polygonsInView lists the window's polygons that lie in view: pool
// envelopes, the allocations by colour (+10 when dimmed by a search) and
// those to outline (search matches, the hovered and the selected one).
function polygonsInView(win, vy0, vy1) {
  const bx0 = S.x0 - win.x0, bx1 = S.x1 - win.x0;
  // The server sends only polygons that meet the window asked for: in a
  // view that holds all of it (the view each window is drawn for) every
  // one lies in view, and no box is needed.
  const all = S.x0 <= win.x0 && S.x1 >= win.x1 && vy0 <= win.y0 && vy1 >= win.y1;
  const bb = all ? null : win.boxes;
  const searching = S.addrMatch.size > 0 || S.frameMatch.size > 0 || S.siteMatch.size > 0;
  const cls = S.classes;
  const groups = Array.from({ length: 20 }, () => []);
  const envelopes = [], outlined = [];
  // Read once: the loop runs once per polygon (15,000 on a first paint).
  const { starts, ids, kinds } = win, selId = S.selId, hoverId = S.hoverId;
  let drawn = 0;
  for (let i = 0; i < win.n; i++) {
    if (starts[i + 1] - starts[i] < 2) continue;
    if (!all && (bb[4 * i + 1] < bx0 || bb[4 * i] > bx1 || bb[4 * i + 3] < vy0 || bb[4 * i + 2] > vy1)) continue;
    drawn++;
    const id = ids[i];
    const match = searching && (S.addrMatch.has(id) || S.frameMatch.has(id) || S.siteMatch.has(id));
    if (match || id === selId || id === hoverId) outlined.push(i);
    if (kinds[i] === 2) { envelopes.push(i); continue; }
    groups[(cls && id < cls.length ? cls[id] : id) % 10 + (searching && !match ? 10 : 0)].push(i);
  }
  return { groups, envelopes, outlined, drawn };
}

// warmRaster rasterizes a made-up window of ten polygons into the plot's
// layer at its size, once the snapshot is decoded and while the server
// lays out the first view: the first paint then finds the rasterizer's
// tables allocated and its code compiled. (On the 80 MB tile that first
// raster took 40-48 ms cold against 25-30 ms warm.)
export function warmRaster() {
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
  reserveRaster(n);
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
  // Setting a canvas's size, even to the one it has, gives it a new
  // bitmap (4 MB, faulted in as it is drawn); at the same size it is
  // cleared instead, to the same transparent pixels, and its state is
  // kept to the default by save and restore.
  const bw = Math.round(w * dpr), bh = Math.round(h * dpr);
  if (c.width !== bw || c.height !== bh) { c.width = bw; c.height = bh; }
  const ctx = c.getContext('2d', { willReadFrequently: true });
  ctx.save();
  ctx.setTransform(1, 0, 0, 1, 0, 0); ctx.clearRect(0, 0, bw, bh);
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
  ctx.restore();
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
export function drawMinimap() {
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
