// The reader of /api/window's answers (window.go): the polygons' points as
// sent, or made here from the slides that make them (windowSlides), the
// same points bit for bit. No page state: node runs it in the tests.

// decodeWindow reads the little-endian arrays of /api/window: polygons
// (bottom edge left to right, then top edge right to left) in data units,
// largest first, and per pixel column the lowest and highest total.
export function decodeWindow(buf) {
  const h = new Float64Array(buf, 0, 10);
  const [x0, x1, y0, y1, nS, nP, w, peak, summarized, flags] = h;
  let off = 80;
  const i32 = (n) => { const a = new Int32Array(buf, off, n); off += 4 * n; return a; };
  const f32 = (n) => { const a = new Float32Array(buf, off, n); off += 4 * n; return a; };
  let p;
  if (flags & 4) {
    p = slidePolygons(buf, h);
    off = buf.byteLength - 4 * (3 * w + 1);
  } else {
    const ids = i32(nS), kinds = i32(nS), counts = i32(nS);
    p = { n: nS, ids, kinds, counts, xs: f32(nP), ys: f32(nP) };
    if (flags & 8 && !warmSlides.done && typeof requestIdleCallback === 'function') {
      warmSlides.done = true;
      requestIdleCallback(() => warmSlides(nP / 2), { timeout: 500 });
    }
  }
  const { n, ids, kinds, counts, xs, ys } = p;
  const colX = f32(w + 1), colMax = f32(w), colMin = f32(w);
  const starts = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) starts[i + 1] = starts[i] + counts[i];
  return {
    seq: ++decodeWindow.seq, x0, x1, y0, y1, peak, summarized, truncated: (flags & 1) !== 0, exact: (flags & 2) !== 0,
    n, w, ids, kinds, counts, starts, xs, ys, colX, colMax, colMin,
    // Each polygon's bounding box, for hit tests and for what lies in a
    // view other than the window's own (polygonsInView): made on first
    // use, not before the window's first draw (5 ms of a first paint).
    get boxes() { return this.boxes_ || (this.boxes_ = polygonBoxes(n, starts, xs, ys)); },
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

// slidePolygons makes a slides answer's polygons: replay's query.go sweep
// (its marks, columns, Fenwick sums of the completed frees and the ramps
// of the sliding ones, the points where a bottom edge changes, simplify,
// the test for polygons outside the window, the top edges) and window.go's
// conversion to the answer's units, step for step in the same float64 and
// float32 operations, so that every point is the one the server would
// have sent. The sums of slides are of whole bytes, exact in any order;
// the ramps are summed in the server's order.
function slidePolygons(buf, h) {
  const [, , y0, y1, nv, , w] = h;
  const [t0, t1, hgt, nG, nS, nR] = new Float64Array(buf, 80, 8);
  let off = 144;
  const f64 = (n) => { const a = new Float64Array(buf, off, n); off += 8 * n; return a; };
  const i32 = (n) => { const a = new Int32Array(buf, off, n); off += 4 * n; return a; };
  const f32 = (n) => { const a = new Float32Array(buf, off, n); off += 4 * n; return a; };
  const base = f64(nv), size = f64(nv), startX = f64(nv), endX = f64(nv), colT = f64(w + 1);
  const groupX = f64(nG), slideBytes = f64(nS), rampSize = f64(nR), rampEnd = f64(nR);
  const vis = i32(nv), rank = i32(nv), startAx = f32(nv), endAx = f32(nv), colAx = f32(w + 1);
  const groupN = i32(nG), slideQ = i32(nS), rampQ = i32(nR);
  const fr = Math.fround;
  const tpp = (t1 - t0) / w, bpp = (y1 - y0) / hgt;

  // The completed frees, a Fenwick tree by the first drawn element above
  // them; gi, si: the next group and slide. The ramping frees are
  // rampQ[rd, rs): started (end < x), not yet completed (end + 3 <= x).
  const fen = new Float64Array(nv + 1);
  let gi = 0, si = 0, rs = 0, rd = 0, dirty = nv;
  const advanceTo = (x) => {
    for (; gi < nG && groupX[gi] <= x; gi++) {
      for (const e = si + groupN[gi]; si < e; si++) {
        const k = slideQ[si], s = slideBytes[si];
        if (k < dirty) dirty = k;
        for (let i = k + 1; i <= nv; i += i & -i) fen[i] += s;
      }
    }
    for (; rs < nR && rampEnd[rs] < x; rs++) if (rampQ[rs] < dirty) dirty = rampQ[rs];
    while (rd < rs && rampEnd[rd] + 3 <= x) rd++;
  };
  const ramping = (k, x) => {
    let c = 0;
    for (let j = rd; j < rs; j++) if (rampQ[j] <= k) c += rampSize[j] * Math.min(1, (x - rampEnd[j]) / 3);
    return c;
  };
  const fenSum = (k) => {
    let v = 0;
    for (let i = k + 1; i > 0; i -= i & -i) v += fen[i];
    return v;
  };
  const cAt = (k, x) => fenSum(k) + ramping(k, x);

  // The marks: each element's first and last sample, in time order,
  // starts before ends at the same time.
  const marks = new Int32Array(2 * nv);
  for (let k = 0; k < nv; k++) { marks[2 * k] = 2 * k; marks[2 * k + 1] = 2 * k + 1; }
  const markX = (m) => (m & 1 ? endX[m >> 1] : startX[m >> 1]);
  marks.sort((a, b) => markX(a) - markX(b) || (a & 1) - (b & 1));

  // The points' x in pixels and the answer's, where the sweep samples.
  const colPx = new Float32Array(w + 1), startPx = new Float32Array(nv), endPx = new Float32Array(nv);
  for (let c = 0; c <= w; c++) colPx[c] = (colT[c] - t0) / tpp;
  for (let k = 0; k < nv; k++) { startPx[k] = (startX[k] - t0) / tpp; endPx[k] = (endX[k] - t0) / tpp; }

  // The points as they come, in the log kept between windows: element k,
  // where (a column, or -1 its first sample, -2 its last) and y (pixels).
  const L = pointLog;
  let np = 0, lk = L.k, lsrc = L.src, ly = L.y;
  const at = new Int32Array(nv + 1); // each element's points, then where they start
  const c0 = new Float64Array(nv), lastVal = new Float64Array(nv), lastX = new Float64Array(nv);
  const alive = new Int32Array((nv + 31) >> 5);
  const emit = (k, x, src, v) => {
    if (np === lk.length) { growLog(np); lk = L.k; lsrc = L.src; ly = L.y; }
    lk[np] = k; lsrc[np] = src; ly[np] = (y1 - v) / bpp; np++;
    at[k + 1]++;
    lastX[k] = x; lastVal[k] = v;
  };
  let prevX = t0, prevCol = 0;
  const change = (k, x, src, v) => {
    if (v === lastVal[k]) return;
    if (prevX > lastX[k] && prevX < x) emit(k, prevX, prevCol, lastVal[k]);
    emit(k, x, src, v);
  };
  const startAt = (k, x) => {
    c0[k] = cAt(k, x);
    alive[k >> 5] |= 1 << (k & 31);
    emit(k, x, -1, base[k]);
  };
  const endAt = (k, x) => {
    if ((alive[k >> 5] & (1 << (k & 31))) === 0) return;
    const v = base[k] - (cAt(k, x) - c0[k]);
    change(k, x, -2, v);
    if (lastX[k] < x) emit(k, x, -2, v);
    alive[k >> 5] &= ~(1 << (k & 31));
  };
  const nm = 2 * nv;
  let mi = 0;
  for (let col = 0; col <= w; col++) {
    const xc = colT[col];
    for (; mi < nm && markX(marks[mi]) < xc; mi++) {
      const m = marks[mi], k = m >> 1;
      advanceTo(markX(m));
      if (m & 1) endAt(k, endX[k]);
      else startAt(k, startX[k]);
    }
    advanceTo(xc);
    for (; mi < nm && (marks[mi] & 1) === 0 && markX(marks[mi]) === xc; mi++) startAt(marks[mi] >> 1, xc);
    let lo = dirty;
    for (let j = rd; j < rs; j++) if (rampQ[j] < lo) lo = rampQ[j];
    if (lo < nv) {
      const ramps = rs > rd;
      for (let wi = lo >> 5; wi < alive.length; wi++) {
        let word = alive[wi];
        if (wi === lo >> 5) word &= -1 << (lo & 31);
        while (word !== 0) {
          const k = (wi << 5) | (31 - Math.clz32(word & -word));
          word &= word - 1;
          let v = fenSum(k);
          if (ramps) v += ramping(k, xc);
          if ((v = base[k] - (v - c0[k])) !== lastVal[k]) change(k, xc, col, v);
        }
      }
    }
    dirty = nv;
    for (; mi < nm && markX(marks[mi]) === xc; mi++) endAt(marks[mi] >> 1, xc);
    prevX = xc; prevCol = col;
  }

  // Each element's points in time order (a counting sort of the log),
  // then simplify's: interior points of flat runs and repeats dropped,
  // and the test for polygons outside the window.
  for (let k = 0; k < nv; k++) at[k + 1] += at[k];
  const fill = at.slice(0, nv);
  const ss = L.ssrc, sy = L.sy;
  for (let i = 0; i < np; i++) {
    const j = fill[lk[i]]++;
    ss[j] = lsrc[i]; sy[j] = ly[i];
  }
  const kept = new Int32Array(nv), keptAt = new Int32Array(nv), sizePx = new Float32Array(nv);
  let o = 0, nPts = 0, n = 0;
  for (let k = 0; k < nv; k++) {
    const s = at[k], e = at[k + 1], first = o;
    keptAt[k] = o;
    let ox = NaN, oy = NaN;
    for (let i = s; i < e; i++) {
      const src = ss[i], y = sy[i], x = src >= 0 ? colPx[src] : src === -1 ? startPx[k] : endPx[k];
      if (i > s && i < e - 1 && sy[i - 1] === y && sy[i + 1] === y) continue;
      if (o > first && ox === x && oy === y) continue;
      ss[o] = src; sy[o] = y; o++;
      ox = x; oy = y;
    }
    const m = o - first;
    if (m < 2) continue;
    sizePx[k] = size[k] / bpp;
    let lo = sy[first], hi = lo;
    for (let i = first + 1; i < o; i++) {
      const y = sy[i];
      if (y < lo) lo = y;
      else if (y > hi) hi = y;
    }
    if (hi < 0 || fr(lo - sizePx[k]) > hgt) continue;
    kept[k] = m;
    nPts += 2 * m;
    n++;
  }

  // The polygons, largest first: the bottom edge, then the top one back.
  const kOf = new Int32Array(nv);
  for (let k = 0; k < nv; k++) kOf[rank[k]] = k;
  const ids = new Int32Array(n), kinds = new Int32Array(n), counts = new Int32Array(n);
  const xs = new Float32Array(nPts), ys = new Float32Array(nPts);
  let i = 0, p = 0;
  for (let r = 0; r < nv; r++) {
    const k = kOf[r], m = kept[k];
    if (m === 0) continue;
    ids[i] = vis[k]; counts[i] = 2 * m; i++;
    const s = keptAt[k], sp = sizePx[k], top = p + 2 * m - 1;
    for (let j = 0; j < m; j++) {
      const src = ss[s + j], y = sy[s + j];
      const ax = src >= 0 ? colAx[src] : src === -1 ? startAx[k] : endAx[k];
      xs[p + j] = ax; ys[p + j] = y1 - y * bpp;
      xs[top - j] = ax; ys[top - j] = y1 - fr(y - sp) * bpp;
    }
    p += 2 * m;
  }
  return { n, ids, kinds, counts, xs, ys };
}

// pointLog holds slidePolygons' points between windows (a zoomed-out
// window of the 264 MB tile has 2 M of them before simplify): growing
// it by doubling for every window took a fifth of the window's decode.
const pointLog = { k: new Int32Array(0), src: new Int32Array(0), y: new Float32Array(0), ssrc: new Int32Array(0), sy: new Float32Array(0) };

// growLog doubles pointLog (or makes it hold at least want points),
// keeping its first n points.
function growLog(n, want = 0) {
  const L = pointLog, cap = Math.max(1 << 16, 2 * L.k.length, want);
  const k = new Int32Array(cap), src = new Int32Array(cap), y = new Float32Array(cap);
  k.set(L.k.subarray(0, n)); src.set(L.src.subarray(0, n)); y.set(L.y.subarray(0, n));
  Object.assign(L, { k, src, y, ssrc: new Int32Array(cap), sy: new Float32Array(cap) });
}

// warmSlides readies slidePolygons once a timeline's next windows are to
// come as slides (flag 8 on a window with points, window.go), while the
// user looks at the first: the point log at the size of that window's
// bottom edges (points), its pages touched, and the code compiled on a
// made-up window. The first slides window of the 264 MB tile took 230-260
// ms to make in the page cold, against 90-140 ms for the later ones; after
// this warm-up (100-120 ms, in idle time) 100-120 ms.
export function warmSlides(points) {
  if (points > pointLog.k.length) {
    growLog(0, Math.ceil(points * 1.25));
    for (const a of Object.values(pointLog)) a.fill(0);
  }
  // 128 elements over 512 columns, their first and last samples inside
  // columns, one slide at every column and a free ramping at every
  // fourth.
  const nv = 128, w = 512, nG = w, nR = w / 4;
  const n64 = 10 + 8 + 4 * nv + (w + 1) + nG + nG + 2 * nR;
  const n32 = 4 * nv + (w + 1) + nG + nG + nR + 3 * w + 1;
  const buf = new ArrayBuffer(8 * n64 + 4 * n32);
  const f64 = new Float64Array(buf, 0, n64), i32 = new Int32Array(buf, 8 * n64, n32), f32 = new Float32Array(buf, 8 * n64, n32);
  f64.set([0, w, 0, 1e9, nv, 0, w, 1e9, 0, 4, 0, w, 100, nG, nG, nR, 0, 0]);
  let o = 18, p = 0;
  for (let k = 0; k < nv; k++) f64[o + k] = 1e6 * (k + 1); // base
  for (let k = 0; k < nv; k++) f64[o + nv + k] = 5e5; // size
  for (let k = 0; k < nv; k++) f64[o + 2 * nv + k] = k * 0.37; // first sample
  for (let k = 0; k < nv; k++) f64[o + 3 * nv + k] = w - k * 0.21; // last
  o += 4 * nv;
  for (let c = 0; c <= w; c++) f64[o + c] = c;
  o += w + 1;
  for (let g = 0; g < nG; g++) f64[o + g] = g + 1; // the groups' times
  for (let g = 0; g < nG; g++) f64[o + nG + g] = 1000 + g; // their bytes
  o += 2 * nG;
  for (let j = 0; j < nR; j++) { f64[o + j] = 300; f64[o + nR + j] = 4 * j + 0.5; }
  for (let k = 0; k < nv; k++) { i32[p + k] = k; i32[p + nv + k] = nv - 1 - k; }
  p += 2 * nv;
  for (let k = 0; k < nv; k++) { f32[p + k] = k * 0.37; f32[p + nv + k] = w - k * 0.21; }
  p += 2 * nv;
  for (let c = 0; c <= w; c++) f32[p + c] = c;
  p += w + 1;
  for (let g = 0; g < nG; g++) { i32[p + g] = 1; i32[p + nG + g] = (g * 7) % nv; }
  p += 2 * nG;
  for (let j = 0; j < nR; j++) i32[p + j] = (j * 5) % nv;
  for (let i = 0; i < 3; i++) decodeWindow(buf);
}
