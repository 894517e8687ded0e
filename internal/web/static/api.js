// Data access: the server's /api (or the bundle a gpumem html page
// embeds, which answers the same calls offline), and the readers of its
// binary arrays (curves; windows: wincode.js).

import { getJSON } from './units.js';
import { formatSize } from './sizes.js';
import { decodeWindow } from './wincode.js';

// b64ToBuffer decodes base64 into an ArrayBuffer.
export function b64ToBuffer(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out.buffer;
}

// decodeCurves reads /api/curves: n, then x - x0, allocated, reserved, active.
function decodeCurves(buf, x0) {
  const f = new Float32Array(buf);
  const n = f[0];
  return { x0, n, xs: f.subarray(1, 1 + n), v: [f.subarray(1 + n, 1 + 2 * n), f.subarray(1 + 2 * n, 1 + 3 * n), f.subarray(1 + 3 * n, 1 + 4 * n)] };
}

// gpumem html embeds its bundle as gzipped JSON in base64; the browser
// inflates it.
export const embedded = await (async () => {
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
export function q(p, extra) {
  const o = { file: p.file, device: p.device, view: p.view, detail: p.detail, mode: p.mode, ...extra };
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== null && v !== undefined) u.set(k, v);
  return u.toString();
}

const serverAPI = {
  files: () => getJSON('api/files'),
  meta: (p) => getJSON('api/meta?' + q(p)),
  async window(p, x0, x1, w, h, y0, y1, detail) {
    // enc=slides: a window whose polygons slide under many frees comes as
    // the slides that make its points (wincode.js), a few MB less.
    const r = await fetch('api/window?' + q(p, { x0, x1, w, h, y0, y1, detail, enc: 'slides' }));
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

// api answers the page's data requests: the server's, or the embedded
// bundle's on a page from gpumem html.
export const api = embedded ? embeddedAPI(embedded) : serverAPI;
