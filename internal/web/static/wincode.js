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

  // The points as they come: element, x (pixels), the answer's x, y
  // (pixels).
  let cap = 1 << 14, np = 0;
  let pk = new Int32Array(cap), ppx = new Float32Array(cap), pax = new Float32Array(cap), ppy = new Float32Array(cap);
  const grow = () => {
    cap *= 2;
    const k2 = new Int32Array(cap), a2 = new Float32Array(cap), b2 = new Float32Array(cap), c2 = new Float32Array(cap);
    k2.set(pk); a2.set(ppx); b2.set(pax); c2.set(ppy);
    pk = k2; ppx = a2; pax = b2; ppy = c2;
  };
  const c0 = new Float64Array(nv), lastVal = new Float64Array(nv), lastX = new Float64Array(nv);
  const alive = new Int32Array((nv + 31) >> 5);
  const emit = (k, x, ax, v) => {
    if (np === cap) grow();
    pk[np] = k; ppx[np] = fr((x - t0) / tpp); pax[np] = ax; ppy[np] = fr((y1 - v) / bpp); np++;
    lastX[k] = x; lastVal[k] = v;
  };
  let prevX = t0, prevAx = colAx[0];
  const change = (k, x, ax, v) => {
    if (v === lastVal[k]) return;
    if (prevX > lastX[k] && prevX < x) emit(k, prevX, prevAx, lastVal[k]);
    emit(k, x, ax, v);
  };
  const startAt = (k, x, ax) => {
    c0[k] = cAt(k, x);
    alive[k >> 5] |= 1 << (k & 31);
    emit(k, x, ax, base[k]);
  };
  const endAt = (k, x, ax) => {
    if ((alive[k >> 5] & (1 << (k & 31))) === 0) return;
    const v = base[k] - (cAt(k, x) - c0[k]);
    change(k, x, ax, v);
    if (lastX[k] < x) emit(k, x, ax, v);
    alive[k >> 5] &= ~(1 << (k & 31));
  };
  const nm = 2 * nv;
  let mi = 0;
  for (let col = 0; col <= w; col++) {
    const xc = colT[col], axc = colAx[col];
    for (; mi < nm && markX(marks[mi]) < xc; mi++) {
      const m = marks[mi], k = m >> 1;
      advanceTo(markX(m));
      if (m & 1) endAt(k, endX[k], endAx[k]);
      else startAt(k, startX[k], startAx[k]);
    }
    advanceTo(xc);
    for (; mi < nm && (marks[mi] & 1) === 0 && markX(marks[mi]) === xc; mi++) {
      const k = marks[mi] >> 1;
      startAt(k, xc, startAx[k]);
    }
    let lo = dirty;
    for (let j = rd; j < rs; j++) if (rampQ[j] < lo) lo = rampQ[j];
    if (lo < nv) {
      const ramps = rs > rd;
      for (let wi = lo >> 5; wi < alive.length; wi++) {
        let word = alive[wi];
        if (wi === lo >> 5) word &= -1 << (lo & 31);
        while (word !== 0) {
          const bit = 31 - Math.clz32(word & -word);
          word &= word - 1;
          const k = (wi << 5) | bit;
          let v = fenSum(k);
          if (ramps) v += ramping(k, xc);
          if ((v = base[k] - (v - c0[k])) !== lastVal[k]) change(k, xc, axc, v);
        }
      }
    }
    dirty = nv;
    for (; mi < nm && markX(marks[mi]) === xc; mi++) {
      const k = marks[mi] >> 1;
      endAt(k, xc, endAx[k]);
    }
    prevX = xc; prevAx = axc;
  }

  // Each element's points in time order (a counting sort of the log),
  // then simplify's: interior points of flat runs and repeats dropped.
  const at = new Int32Array(nv + 1);
  for (let i = 0; i < np; i++) at[pk[i] + 1]++;
  for (let k = 0; k < nv; k++) at[k + 1] += at[k];
  const fill = at.slice(0, nv);
  const sx = new Float32Array(np), sa = new Float32Array(np), sy = new Float32Array(np);
  for (let i = 0; i < np; i++) {
    const j = fill[pk[i]]++;
    sx[j] = ppx[i]; sa[j] = pax[i]; sy[j] = ppy[i];
  }
  const kept = new Int32Array(nv), keptAt = new Int32Array(nv);
  const sizePx = new Float32Array(nv);
  let o = 0, nPts = 0;
  for (let k = 0; k < nv; k++) {
    const s = at[k], n = at[k + 1] - s;
    keptAt[k] = o;
    for (let i = 0; i < n; i++) {
      const x = sx[s + i], y = sy[s + i];
      if (i > 0 && i < n - 1 && sy[s + i - 1] === y && sy[s + i + 1] === y) continue;
      if (o > keptAt[k] && sx[o - 1] === x && sy[o - 1] === y) continue;
      sx[o] = x; sa[o] = sa[s + i]; sy[o] = y; o++;
    }
    let m = o - keptAt[k];
    if (m >= 2) {
      sizePx[k] = fr(size[k] / bpp);
      let lo = sy[keptAt[k]], hi = lo;
      for (let i = keptAt[k] + 1; i < o; i++) {
        const y = sy[i];
        if (y < lo) lo = y;
        else if (y > hi) hi = y;
      }
      if (hi < 0 || fr(lo - sizePx[k]) > hgt) m = 0;
    } else m = 0;
    kept[k] = m;
    nPts += 2 * m;
  }

  // The polygons, largest first: the bottom edge, then the top one back.
  const kOf = new Int32Array(nv);
  let n = 0;
  for (let k = 0; k < nv; k++) {
    kOf[rank[k]] = k;
    if (kept[k] > 0) n++;
  }
  const ids = new Int32Array(n), kinds = new Int32Array(n), counts = new Int32Array(n);
  const xs = new Float32Array(nPts), ys = new Float32Array(nPts);
  let i = 0, p = 0;
  for (let r = 0; r < nv; r++) {
    const k = kOf[r], m = kept[k];
    if (m === 0) continue;
    ids[i] = vis[k]; counts[i] = 2 * m; i++;
    const s = keptAt[k], sp = sizePx[k];
    for (let j = s; j < s + m; j++, p++) { xs[p] = sa[j]; ys[p] = y1 - sy[j] * bpp; }
    for (let j = s + m - 1; j >= s; j--, p++) { xs[p] = sa[j]; ys[p] = y1 - fr(sy[j] - sp) * bpp; }
  }
  return { n, ids, kinds, counts, xs, ys };
}
