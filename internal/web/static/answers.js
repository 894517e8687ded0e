// Answers on the timeline: colour by category / stream, what is live at
// the peak or a clicked moment (gpumem peak), why an OOM happened (gpumem
// oom) and the fragmentation curve. The server computes them
// (internal/analysis, as the CLI prints them); this module only draws. A
// page from gpumem html has no server: the colour selector and the panel
// are hidden there.

import { S, subscribe } from './store.js';
import { $, CATEGORY_COLOURS, FRAG_COLOUR, formatCount, showError, tableau10 } from './ui.js';
import { escapeHTML } from './units.js';
import { formatSize } from './sizes.js';
import { api, b64ToBuffer, embedded } from './api.js';
import { PAD, drawPlot, requestDraw } from './plot.js';

// answersAvailable says whether the view shown has the server's answers
// (served pages; the Active and Private timelines).
export function answersAvailable() { return !embedded && ['active', 'private'].includes(S.p.view); }

// loadClasses fetches the class of every allocation for "Colour by".
export async function loadClasses(seq) {
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
export function classLegend() {
  return S.classNames.map(c => ['sw', tableau10[c.colour], `<span class="cls">${escapeHTML(c.name)}</span> (${formatCount(c.count)})`]);
}

// setMoment makes the answer panel answer for the moment clicked.
export function setMoment(px) {
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
export async function showAnswer() {
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
export function oomMarkerAt(px) {
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
export async function showOOM(marker) {
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

// loadFragCurve asks for the fragmentation headline over the window (when
// switched on) and redraws.
export async function loadFragCurve(x0, x1, w) {
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

// The moment line and the fragmentation curve are drawn over the plot.
subscribe('plot-overlay', (ctx, X, pw, ph) => {
  drawMoment(ctx, X, ph);
  drawFragCurve(ctx, X, pw, ph);
});
