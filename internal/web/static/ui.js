// Small page helpers every view shares: the element lookup, the palette,
// number and duration formats, axis ticks, canvas set-up, the error line
// and the after-first-paint scheduler. No state.

// $ is the element with id.
export const $ = (id) => document.getElementById(id);
// tableau10 is the palette (memory_viz's).
export const tableau10 = ['#4e79a7', '#f28e2c', '#e15759', '#76b7b2', '#59a14f', '#edc949', '#af7aa1', '#ff9da7', '#9c755f', '#bab0ab'];

// Category colours (tableau10 indices; the same in every file) and the
// fragmentation curve's colour.
export const CATEGORY_COLOURS = { parameter: 0, optimizer_state: 1, gradient: 2, activation: 3, temporary: 4, input: 5, autograd_detail: 6, unknown: 7 };
export const FRAG_COLOUR = '#b35806';

// formatCount writes a whole number with thousands separators. It is not
// toLocaleString: that loads the locale tables on first use, which cost
// the first paint 10 ms.
export function formatCount(n) {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// niceTicks returns round tick values for [lo, hi]; bytes use powers of 1024.
export function niceTicks(lo, hi, n, bytes, integer = false) {
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

// formatDuration writes a time-axis label: µs, ms, s or min.
export function formatDuration(us) {
  const a = Math.abs(us);
  if (a >= 60e6) return `${(us / 60e6).toFixed(a >= 600e6 ? 0 : 1)} min`;
  if (a >= 1e6) return `${(us / 1e6).toFixed(a >= 10e6 ? 1 : 2)} s`;
  if (a >= 1e3) return `${(us / 1e3).toFixed(a >= 10e3 ? 1 : 2)} ms`;
  return `${us.toFixed(0)} µs`;
}

// showError shows msg in the error line ("" hides it).
export function showError(msg) {
  const e = $('error');
  e.textContent = msg; e.hidden = !msg;
}

// afterPaint runs fn when the frame after the one being drawn begins, so
// that what the first paint does not show (the address bar, the curves
// and markers requests) does not delay it.
export function afterPaint(fn) {
  requestAnimationFrame(() => requestAnimationFrame(fn));
}

// setupCanvas sizes c's backing store to its box and returns its context.
// An opaque canvas (the plot: it paints its own white background) is
// cheaper for Chromium to rasterize and composite.
export function setupCanvas(c, opaque = false) {
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth, h = c.clientHeight;
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
    c.width = Math.round(w * dpr); c.height = Math.round(h * dpr);
  }
  const ctx = c.getContext('2d', { alpha: !opaque });
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return { ctx, w, h };
}
