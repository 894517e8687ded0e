// The allocator state view's segment map: segments packed into rows
// (memory_viz's MemoryView) with their blocks, and the hover text.

import { S } from './store.js';
import { $, setupCanvas, tableau10 } from './ui.js';
import { formatSize } from './sizes.js';

function hashAddr(s) {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
  return Math.abs(h);
}

// drawState packs segments (sorted by size, then address) into rows as wide
// as the largest segment, like memory_viz's MemoryView.
export function drawState() {
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

// stateHover is the text for the block or segment under (px, py) in
// the state canvas, as memory_viz words it.
export function stateHover(px, py) {
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
