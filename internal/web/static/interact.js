// The timeline's interaction: hit tests, hover and click, drag and box
// zoom, the wheel, the minimap brush, and the view changes they make.

import { S, isTimeline } from './store.js';
import { $ } from './ui.js';
import { writeHash } from './address.js';
import { PAD, drawPlot, yFull, yWindow } from './plot.js';
import { oomMarkerAt, setMoment, showOOM } from './answers.js';
import { clearDetails, showElem } from './details.js';
import { plotSize, scheduleRefresh } from './timeline.js';

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
export function hitTestAll(px, py) {
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

// setWindow shows x range [a, b], keeping the visible bytes.
export function setWindow(a, b, delay) {
  const span = S.hi - S.lo;
  const minSpan = S.p.mode === 'time' ? 1 : 0.5;
  let w = Math.max(Math.min(b - a, span), minSpan);
  a = Math.min(Math.max(a, S.lo), S.hi - w);
  S.x0 = a; S.x1 = a + w;
  scheduleRefresh(delay);
}

// setView shows [a, b] x [c, d]; the whole height again makes y follow
// the totals (yAuto).
export function setView(a, b, c, d, delay) {
  const top = yFull();
  let h = Math.max(Math.min(d - c, top), 1);
  c = Math.min(Math.max(c, 0), top - h);
  S.yAuto = c <= 0 && c + h >= top;
  if (!S.yAuto) { S.y0 = c; S.y1 = c + h; }
  setWindow(a, b, delay);
}

// zoom scales the view by f around (fx, fy), fractions of the plot from
// its left and bottom; fy null zooms x only.
export function zoom(f, fx = 0.5, fy = 0.5, delay) {
  const span = S.x1 - S.x0;
  const c = S.x0 + span * fx;
  const ns = span * f;
  if (fy === null) { setWindow(c - ns * fx, c - ns * fx + ns, delay); return; }
  const [y0, y1] = yWindow();
  const cy = y0 + (y1 - y0) * fy, nh = (y1 - y0) * f;
  setView(c - ns * fx, c - ns * fx + ns, cy - nh * fy, cy - nh * fy + nh, delay);
}

// resetView shows the whole range and height.
export function resetView(delay) {
  S.yAuto = true;
  setWindow(S.lo, S.hi, delay);
}

// setupPlotEvents wires the plot's and the minimap's mouse, wheel and
// resize handling.
export function setupPlotEvents() {
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
