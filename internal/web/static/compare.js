// The Compare view: gpumem diff of two served files (GET /api/diff, the
// same answer as `gpumem diff --json`): the two runs' peaks, the live
// bytes by category and by allocation site at the chosen moment. Clicking
// a site highlights it and shows its frames and its figures in both runs.
import { human, humanSigned, escapeHTML, getJSON, siteStrings, baseName, fileOptions, durationUS } from './units.js';

const CATEGORIES = ['parameter', 'optimizer_state', 'gradient', 'activation', 'temporary', 'input', 'autograd_detail', 'unknown'];

export async function open(ctx) {
  const { el, files } = ctx;
  const b0 = ctx.compareB ?? files.findIndex(f => f.id !== ctx.file && !f.error);
  el.innerHTML = `<div class="xv-head">Compare <label>A <select id="cmp-a"></select></label>
    <label>B <select id="cmp-b"></select></label>
    <label>at <select id="cmp-at"><option value="peak">peak</option><option value="reserved-peak">reserved peak</option><option value="end">end</option></select></label>
    <span class="muted">(gpumem diff A B)</span></div><div id="cmp-body"></div>`;
  if (files.filter(f => !f.error).length < 2) {
    el.querySelector('#cmp-body').innerHTML = '<p class="muted">Compare needs two snapshots: serve two files (gpumem serve A B) or drop a second one onto the page.</p>';
    return;
  }
  fileOptions(el.querySelector('#cmp-a'), files, ctx.file);
  fileOptions(el.querySelector('#cmp-b'), files, b0 >= 0 ? files[b0].id : ctx.file);
  const run = () => render(ctx, +el.querySelector('#cmp-a').value, +el.querySelector('#cmp-b').value, el.querySelector('#cmp-at').value);
  for (const id of ['#cmp-a', '#cmp-b', '#cmp-at']) el.querySelector(id).addEventListener('change', run);
  await run();
}

async function render(ctx, a, b, at) {
  const body = ctx.el.querySelector('#cmp-body');
  body.dataset.ready = '';
  body.innerHTML = '<p class="muted">Comparing…</p>';
  let d;
  try {
    d = await getJSON(`api/diff?a=${a}&b=${b}&at=${encodeURIComponent(at)}`);
  } catch (e) {
    body.innerHTML = `<p class="xv-error">${escapeHTML(e.message)}</p>`;
    return;
  }
  const top = d.sites.slice(0, 15);
  const names = await siteStrings(top.map(s => s.frames));
  const row = (name, x, y, cls = '') => `<tr class="${cls}"><td>${name}</td><td class="num">${human(x)}</td><td class="num">${human(y)}</td><td class="num delta">${humanSigned(y - x)}</td></tr>`;
  const momentOf = (s) => s.event === null ? s.at : `${s.at} (event ${s.event})`;
  let cats = '';
  for (const c of CATEGORIES) {
    const x = d.a.categories[c] || 0, y = d.b.categories[c] || 0;
    if (x || y) cats += row(`&nbsp;&nbsp;${c}`, x, y, 'cat').replace('<tr class="cat">', `<tr class="cat" data-cat="${c}">`);
  }
  const maxPeak = Math.max(d.a.peak_reserved_bytes, d.b.peak_reserved_bytes, 1);
  const bar = (v, cls) => `<div class="bar ${cls}" style="width:${(100 * v / maxPeak).toFixed(1)}%"></div>`;
  body.innerHTML = `
    <p><b>A</b> ${escapeHTML(baseName(d.a.file))} (cuda:${d.a.device}) &nbsp; <b>B</b> ${escapeHTML(baseName(d.b.file))} (cuda:${d.b.device})</p>
    <div class="xv-cols">
    <div><h3>Peaks</h3>
    <table class="xv" id="cmp-peaks"><tr><th></th><th class="num">A</th><th class="num">B</th><th class="num">B − A</th></tr>
      ${row('peak active', d.a.peak_allocated_bytes, d.b.peak_allocated_bytes)}
      ${row('peak reserved', d.a.peak_reserved_bytes, d.b.peak_reserved_bytes)}
      ${row('allocated over the trace', d.a.allocated_total_bytes, d.b.allocated_total_bytes)}
      <tr><td>allocations</td><td class="num">${d.a.allocations}</td><td class="num">${d.b.allocations}</td><td class="num">${d.b.allocations - d.a.allocations >= 0 ? '+' : ''}${d.b.allocations - d.a.allocations}</td></tr>
    </table>
    <div class="bars" title="peak active (dark) within peak reserved (light)">
      <div>A</div><div class="track">${bar(d.a.peak_reserved_bytes, 'res')}${bar(d.a.peak_allocated_bytes, 'act')}</div>
      <div>B</div><div class="track">${bar(d.b.peak_reserved_bytes, 'res')}${bar(d.b.peak_allocated_bytes, 'act')}</div>
    </div></div>
    <div><h3>Live at ${escapeHTML(momentOf(d.a))} / ${escapeHTML(momentOf(d.b))}, by category</h3>
    <table class="xv" id="cmp-cats"><tr><th></th><th class="num">A</th><th class="num">B</th><th class="num">B − A</th></tr>
      ${row('live', d.a.live_bytes, d.b.live_bytes)}${cats}</table></div>
    </div>
    <h3>The two Active Memory Timelines (highest requested bytes per ${'<select id="cmp-align"><option value="events">share of the trace\'s events</option><option value="time">time from the first event</option></select>'}) and B − A</h3>
    <canvas id="cmp-curves" width="1000" height="260"></canvas>
    <div class="muted" id="cmp-curves-legend"><span style="color:#4e79a7">■</span> A &nbsp; <span style="color:#f28e2c">■</span> B &nbsp; <span style="color:#59a14f">■</span> B − A (below; red where negative); dashed: reserved</div>
    <h3>Sites by change of live bytes (innermost user frames; ${top.length} of ${d.sites.length})</h3>
    <table class="xv" id="cmp-sites"><tr><th class="num">B − A</th><th class="num">A</th><th class="num">B</th><th class="num">allocs A/B</th><th>site</th></tr>
    ${top.map((s, i) => `<tr data-site="${i}"><td class="num delta">${humanSigned(s.delta_bytes)}</td><td class="num">${human(s.a_bytes)}</td><td class="num">${human(s.b_bytes)}</td><td class="num">${s.a_allocations}/${s.b_allocations}</td><td class="site">${escapeHTML(names[i])}</td></tr>`).join('')}
    </table>
    <div id="cmp-open" hidden>Highlight its allocations (the timeline's frame search for its innermost frame) in the timeline of
      <button id="cmp-open-a">A</button> <button id="cmp-open-b">B</button></div>
    <pre id="cmp-site" class="details">Click a site to see its frames in both runs.</pre>
    <h3>Allocator settings</h3>
    <p id="cmp-settings">${d.settings.length ? d.settings.map(s => `${escapeHTML(s.key)}: ${escapeHTML(s.a)} → ${escapeHTML(s.b)}`).join('<br>') : 'the same'}</p>`;
  const [ta, tb] = await Promise.all([getJSON(`api/totals?file=${a}&device=${d.a.device}`), getJSON(`api/totals?file=${b}&device=${d.b.device}`)]);
  const align = body.querySelector('#cmp-align');
  if (!ta.time_us_from_start || !tb.time_us_from_start) align.querySelector('option[value="time"]').disabled = true;
  const redraw = () => drawCurves(body.querySelector('#cmp-curves'), ta, tb, align.value);
  align.addEventListener('change', redraw);
  redraw();
  body.querySelector('#cmp-sites').addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-site]');
    if (!tr) return;
    for (const r of body.querySelectorAll('#cmp-sites tr.sel')) r.classList.remove('sel');
    tr.classList.add('sel');
    const s = top[+tr.dataset.site];
    body.querySelector('#cmp-open').hidden = false;
    const open = (id, dev) => ctx.go({ file: id, device: dev, view: 'active', frame: s.frames[0] });
    body.querySelector('#cmp-open-a').onclick = () => open(a, d.a.device);
    body.querySelector('#cmp-open-b').onclick = () => open(b, d.b.device);
    body.querySelector('#cmp-site').textContent = `${names[+tr.dataset.site]}\n\n` +
      `A: ${human(s.a_bytes)} live in ${s.a_allocations} allocations over the trace\n` +
      `B: ${human(s.b_bytes)} live in ${s.b_allocations} allocations over the trace\n` +
      `B − A: ${humanSigned(s.delta_bytes)}\n\nframes (innermost first):\n  ${s.frames.join('\n  ')}`;
  });
  body.dataset.ready = '1';
}

// drawCurves draws both runs' requested (solid) and reserved (dashed)
// totals, aligned by the share of each trace's events or by the time from
// each trace's first event, and below them B − A of the requested totals
// where both runs have a value.
function drawCurves(c, ta, tb, align) {
  const dpr = window.devicePixelRatio || 1;
  const W = c.clientWidth || 1000, H = 260;
  c.width = W * dpr; c.height = H * dpr; c.style.height = H + 'px';
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, W, H);
  const L = 80, R = 10, top = { y: 8, h: 150 }, bot = { y: 180, h: 70 };
  // x of bucket k of run t, in [0, 1] of the common axis.
  const span = align === 'time' ? Math.max(last(ta.time_us_from_start), last(tb.time_us_from_start), 1) : 1;
  const xOf = (t, k) => align === 'time' ? t.time_us_from_start[k] / span : t.first_event[k] / Math.max(t.events, 1);
  const ymax = Math.max(...ta.reserved_max, ...tb.reserved_max, ...ta.requested_max, ...tb.requested_max, 1);
  const X = (u) => L + u * (W - L - R);
  g.font = '11px system-ui, sans-serif'; g.fillStyle = '#5b6670'; g.strokeStyle = '#d5dae0';
  g.strokeRect(L, top.y, W - L - R, top.h); g.strokeRect(L, bot.y, W - L - R, bot.h);
  g.textAlign = 'right';
  g.fillText(human(ymax), L - 4, top.y + 10); g.fillText('0', L - 4, top.y + top.h);
  const line = (t, vals, colour, dash) => {
    g.beginPath(); g.setLineDash(dash ? [4, 3] : []); g.strokeStyle = colour; g.lineWidth = 1.5;
    vals.forEach((v, k) => {
      const x = X(xOf(t, k)), y = top.y + top.h * (1 - v / ymax);
      if (k === 0) g.moveTo(x, y); else g.lineTo(x, y);
    });
    g.stroke(); g.setLineDash([]);
  };
  line(ta, ta.reserved_max, '#a0cbe8', true); line(tb, tb.reserved_max, '#ffbe7d', true);
  line(ta, ta.requested_max, '#4e79a7'); line(tb, tb.requested_max, '#f28e2c');
  // B − A on a common grid, where both runs have started and not ended.
  const at = (t, u) => {
    let lo = 0, hi = t.requested_max.length - 1;
    if (!t.requested_max.length || u < xOf(t, 0)) return null;
    if (align === 'time' && u > t.time_us_from_start[hi] / span) return null;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (xOf(t, m) <= u) lo = m; else hi = m - 1; }
    return t.requested_max[lo];
  };
  const N = 300, diffs = [];
  for (let j = 0; j < N; j++) {
    const u = j / (N - 1), va = at(ta, u), vb = at(tb, u);
    diffs.push(va === null || vb === null ? null : vb - va);
  }
  const dmax = Math.max(1, ...diffs.filter(v => v !== null).map(Math.abs));
  const mid = bot.y + bot.h / 2;
  g.strokeStyle = '#d5dae0'; g.beginPath(); g.moveTo(L, mid); g.lineTo(W - R, mid); g.stroke();
  g.fillStyle = '#5b6670';
  g.fillText(humanSigned(dmax), L - 4, bot.y + 10); g.fillText(humanSigned(-dmax), L - 4, bot.y + bot.h);
  diffs.forEach((v, j) => {
    if (v === null) return;
    const x = X(j / (N - 1)), h = (bot.h / 2) * v / dmax;
    g.fillStyle = v < 0 ? '#e15759' : '#59a14f';
    g.fillRect(x, v < 0 ? mid : mid - h, Math.max(1, (W - L - R) / N), Math.abs(h));
  });
  g.textAlign = 'left'; g.fillStyle = '#5b6670';
  g.fillText(align === 'time' ? `0 … ${durationUS(span)}` : '0 … 100% of each trace', L, H - 2);
}

function last(a) { return a && a.length ? a[a.length - 1] : 0; }
