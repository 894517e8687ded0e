// The timeline's rasterizer: fills thousands of allocation polygons
// into a canvas's pixels with sub-pixel coverage (as memory_viz's SVG
// tints thin allocations), much faster than canvas path filling. Pure
// drawing: no page state.

import { tableau10 } from './ui.js';

// tracePolygon adds polygon i of win to ctx's path.
export function tracePolygon(ctx, win, i, X, Y) {
  const s = win.starts[i], e = win.starts[i + 1], base = win.x0;
  ctx.moveTo(X(base + win.xs[s]), Y(win.ys[s]));
  for (let k = s + 1; k < e; k++) ctx.lineTo(X(base + win.xs[k]), Y(win.ys[k]));
  ctx.closePath();
}

// The rasterizer's difference table and step lists, kept between draws.
// The table is all zeros between draws: the sweep clears each row once it
// has read it (while the row is in the cache), instead of a separate
// pass over all of it before the next draw; dirty says a draw stopped
// between the two (it then clears it all).
const rasterAcc = { buf: new Float32Array(0), dirty: false };
const rasterSteps = { rows: new Float64Array(8), cols: new Float64Array(8) };
// The plot's scale and the clip, for rasterPolygon (fillPolygons says why
// in an array).
const rasterParams = new Float64Array(16);
// The first and last rows of the table that rasterPolygon wrote to.
const rasterBand = new Int32Array(2);

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
export function scaleFns(sc) {
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
  const bx = E.bx, by = E.by, ty = E.ty, xs = R.xs, ys = R.ys, acc = R.acc, rs = R.rs, cs = R.cs, P = R.p;
  const dpr = P[0], base = P[1], ox = P[2], sx0 = P[3], sdx = P[4], spw = P[5], oy = P[6], sy0 = P[7], sdy = P[8], sph = P[9];
  const cx0 = P[10], cx1 = P[11], cy0 = P[12], cy1 = P[13], rowOff = P[14], org = P[15], band = R.band;
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
      if (r0 < band[0]) band[0] = r0;
      if (r1 > band[1]) band[1] = r1;
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
      if (r0 < band[0]) band[0] = r0;
      if (r1 > band[1]) band[1] = r1;
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
export function fillPolygons(ctx, win, v, sc, dpr, clip) {
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
  if (rasterAcc.dirty) acc.fill(0);
  rasterAcc.dirty = true;
  // X and Y inline (the same arithmetic), in one object of one shape for
  // every call: rasterPolygon, called once per polygon, is compiled by
  // the engine within the first draw, where one long loop here waited
  // for on-stack replacement. The numbers travel in a Float64Array, not
  // as the object's fields: a field that held a small integer in one
  // draw (a scale of 1, an origin of 0) and a fraction in the next
  // changes the object's shape, and the engine then drops the code it
  // compiled for the old one (V8: "Maps became deprecated during
  // optimization", after warmRaster's integral scale).
  const P = rasterParams;
  P[0] = dpr; P[1] = win.x0; P[2] = sc.ox; P[3] = sc.x0; P[4] = sc.dx; P[5] = sc.pw; P[6] = sc.oy; P[7] = sc.y0; P[8] = sc.dy; P[9] = sc.ph;
  P[10] = cx0; P[11] = cx1; P[12] = cy0; P[13] = cy1; P[14] = 4 * RW; P[15] = -4 * (cy0 * RW + cx0);
  const band = rasterBand;
  band[0] = cy1 + 1; band[1] = cy0 - 1;
  const R = { acc, rs: rasterSteps.rows, cs: rasterSteps.cols, xs: win.xs, ys: win.ys, p: P, band };
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
  // Only the rows from the first that a polygon wrote to are swept (above
  // it every sum is 0, and the sweep changes no pixel), read from the
  // canvas and written back: a first window's polygons lie in a band of
  // the plot (the grey band and white are above and below it).
  const lo = band[0] - cy0, hi = band[1] - cy0; // in the table, 0 to RH
  if (hi < lo) { rasterAcc.dirty = false; return; } // nothing drawn
  if (rasterAcc.col === undefined || rasterAcc.col.length < 4 * RW) rasterAcc.col = new Float64Array(4 * RW);
  const col = rasterAcc.col;
  col.fill(0, 0, 4 * RW);
  const last = Math.min(hi, RH - 1);
  const img = ctx.getImageData(cx0, cy0 + lo, cx1 - cx0, last - lo + 1), px = img.data;
  for (let row = lo; row <= last; row++) {
    sweepRow(acc, col, px, 4 * row * RW, 4 * (row - lo) * (RW - 1), RW);
    acc.fill(0, 4 * row * RW, 4 * (row + 1) * RW);
  }
  if (hi === RH) acc.fill(0, 4 * RH * RW, n); // the row past the clip's last
  rasterAcc.dirty = false;
  ctx.putImageData(img, cx0, cy0 + lo);
  // Below the last row written to the sums no longer change: the rows
  // there change where a column's weight is left above the sweep's
  // threshold (float32 rounding), which the sweep then mixes in as it
  // would have.
  if (last + 1 < RH && heldWeight(col, RW)) {
    const rest = ctx.getImageData(cx0, cy0 + last + 1, cx1 - cx0, RH - last - 1);
    for (let row = last + 1; row < RH; row++) sweepRow(acc, col, rest.data, 4 * row * RW, 4 * (row - last - 1) * (RW - 1), RW);
    ctx.putImageData(rest, cx0, cy0 + last + 1);
  }
}

// heldWeight says whether a column's summed weight in col passes the
// sweep's threshold (sweepRow's test, as it is written there).
function heldWeight(col, RW) {
  for (let c = 0; c < 4 * (RW - 1); c += 4) if (!(col[c + 3] <= 1e-4)) return true;
  return false;
}

// reserveRaster makes the difference table at least n numbers long, its
// pages touched, so that the first draw at that size does not allocate.
export function reserveRaster(n) {
  if (rasterAcc.buf.length < n) rasterAcc.buf = new Float32Array(n).fill(0);
}
