// The Compare view: gpumem diff of two served files (GET /api/diff, the
// same answer as `gpumem diff --json`): the two runs' peaks, the live
// bytes by category and by allocation site at the chosen moment, and the
// two runs' Active Memory Timeline totals (GET /api/totals) aligned by
// event, time or step (GET /api/steps, gpumem steps of each) with B − A.
// Clicking a site shows its frames and figures in both runs and fills its
// live bytes under both curves (GET /api/sitecurve).
import { human, humanSigned, escapeHTML, getJSON, siteStrings, baseName, fileOptions, durationUS, curveBuckets } from './units.js';

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
    <h3>The two Active Memory Timelines (highest requested bytes per <select id="cmp-align"><option value="events">share of the trace's events</option><option value="time">time from the first event</option><option value="steps" disabled>step (finding steps…)</option></select>) and B − A</h3>
    <p class="muted" id="cmp-align-note"></p>
    <canvas id="cmp-curves" width="1000" height="260"></canvas>
    <div class="muted" id="cmp-curves-legend"><span style="color:#4e79a7">■</span> A &nbsp; <span style="color:#f28e2c">■</span> B &nbsp; <span style="color:#59a14f">■</span> B − A (below; red where negative); dashed: reserved; dotted upright: each run's moment; filled: the site picked below, also on its own scale</div>
    <div id="cmp-readout" class="readout">Hover over the curves to read both runs at that point.</div>
    <div id="cmp-steps-wrap" hidden><h3>Step by step (gpumem steps of each run)</h3><table class="xv" id="cmp-steps"></table></div>
    <h3>Sites by change of live bytes (innermost user frames; ${top.length} of ${d.sites.length})</h3>
    <table class="xv" id="cmp-sites"><tr><th class="num">B − A</th><th class="num">A</th><th class="num">B</th><th class="num">allocs A/B</th><th>site</th></tr>
    ${top.map((s, i) => `<tr data-site="${i}"><td class="num delta">${humanSigned(s.delta_bytes)}</td><td class="num">${human(s.a_bytes)}</td><td class="num">${human(s.b_bytes)}</td><td class="num">${s.a_allocations}/${s.b_allocations}</td><td class="site">${escapeHTML(names[i])}</td></tr>`).join('')}
    </table>
    <div id="cmp-open" hidden>Highlight its allocations (the timeline's frame search for its innermost frame) in the timeline of
      <button id="cmp-open-a">A</button> <button id="cmp-open-b">B</button></div>
    <pre id="cmp-site" class="details">Click a site to see its frames in both runs.</pre>
    <h3>Allocator settings</h3>
    <p id="cmp-settings">${d.settings.length ? d.settings.map(s => `${escapeHTML(s.key)}: ${escapeHTML(s.a)} → ${escapeHTML(s.b)}`).join('<br>') : 'the same'}</p>`;
  const buckets = curveBuckets(body);
  let ta, tb;
  try {
    [ta, tb] = await Promise.all([getJSON(`api/totals?file=${a}&device=${d.a.device}&n=${buckets}`), getJSON(`api/totals?file=${b}&device=${d.b.device}&n=${buckets}`)]);
  } catch (e) { // the tables stand; say why the curves are missing
    body.querySelector('#cmp-readout').textContent = `The curves could not be drawn: ${e.message}`;
    body.dataset.ready = '1';
    return;
  }
  const v = { ta, tb, align: 'events', steps: null, site: null, names: [baseName(d.a.file), baseName(d.b.file)], moments: [d.a.event, d.b.event] };
  const canvas = body.querySelector('#cmp-curves'), readout = body.querySelector('#cmp-readout');
  const alignSel = body.querySelector('#cmp-align'), note = body.querySelector('#cmp-align-note');
  if (!ta.time_us_from_start || !tb.time_us_from_start) alignSel.querySelector('option[value="time"]').disabled = true;
  const redraw = () => { v.layout = drawCurves(canvas, v); };
  alignSel.addEventListener('change', () => {
    v.align = alignSel.value;
    note.textContent = v.align === 'steps' || (v.steps && !v.steps.k) ? stepsNote(v) : '';
    stepTable(body.querySelector('#cmp-steps-wrap'), v);
    redraw();
  });
  canvas.addEventListener('mousemove', (e) => {
    const r = canvas.getBoundingClientRect();
    readout.textContent = readAt(v, e.clientX - r.left) || 'Hover over the curves to read both runs at that point.';
  });
  redraw();
  // The steps of both runs (gpumem steps), for the alignment by step.
  const stepsReady = Promise.all([a, b].map((id, k) => getJSON(`api/steps?file=${id}&device=${k ? d.b.device : d.a.device}`).catch(e => ({ error: e.message }))))
    .then(([sa, sb]) => {
      v.steps = { a: sa, b: sb, k: Math.min(stepCount(sa), stepCount(sb)) };
      const opt = alignSel.querySelector('option[value="steps"]');
      opt.disabled = v.steps.k === 0;
      opt.textContent = v.steps.k ? 'step (step k of A over step k of B)' : 'step (not found in both runs)';
      if (!v.steps.k) note.textContent = stepsNote(v);
      body.dataset.steps = '1';
    });
  body.querySelector('#cmp-sites').addEventListener('click', async (e) => {
    const tr = e.target.closest('tr[data-site]');
    if (!tr) return;
    for (const r of body.querySelectorAll('#cmp-sites tr.sel')) r.classList.remove('sel');
    tr.classList.add('sel');
    const k = +tr.dataset.site, s = top[k];
    body.querySelector('#cmp-open').hidden = false;
    const open = (id, dev) => ctx.go({ file: id, device: dev, view: 'active', frame: s.frames[0] });
    body.querySelector('#cmp-open-a').onclick = () => open(a, d.a.device);
    body.querySelector('#cmp-open-b').onclick = () => open(b, d.b.device);
    body.querySelector('#cmp-site').textContent = `${names[k]}\n\n` +
      `A: ${human(s.a_bytes)} live in ${s.a_allocations} allocations over the trace\n` +
      `B: ${human(s.b_bytes)} live in ${s.b_allocations} allocations over the trace\n` +
      `B − A: ${humanSigned(s.delta_bytes)}\n\nframes (innermost first):\n  ${s.frames.join('\n  ')}`;
    // Its allocations in both runs: the site's live bytes under each
    // run's curve (analysis.SiteCurve, on the curves' buckets).
    body.dataset.site = '';
    // No depth: the server's default is the diff's (one place).
    const q = `&n=${buckets}` + s.frames.map(f => '&frame=' + encodeURIComponent(f)).join('');
    try {
      const [ca, cb] = await Promise.all([getJSON(`api/sitecurve?file=${a}&device=${d.a.device}${q}`), getJSON(`api/sitecurve?file=${b}&device=${d.b.device}${q}`)]);
      if (!tr.classList.contains('sel')) return; // another site was picked since
      v.site = { a: ca, b: cb, name: names[k] };
      redraw();
      body.dataset.site = String(k);
    } catch (err) {
      body.querySelector('#cmp-site').textContent += `\n\n${err.message}`;
    }
  });
  await stepsReady;
  body.dataset.ready = '1';
}


// stepCount is how many steps a steps answer found: none when it failed
// or fell back to the whole trace as one step.
function stepCount(st) {
  if (!st || st.error || !st.steps || /^whole trace/.test(st.source)) return 0;
  return st.steps.length;
}

// stepsNote says how the runs are aligned by step, or why they cannot be.
function stepsNote(v) {
  if (!v.steps) return 'Finding the steps of both runs…';
  const why = (st, who) => st.error ? `${who}: ${st.error}` : `${who} has no steps (${st.source || 'none found'}: no ProfilerStep or optimizer.step annotations and no repeating allocation pattern)`;
  const { a, b, k } = v.steps;
  if (!k) return 'Alignment by step needs steps in both runs: ' + [stepCount(a) ? '' : why(a, `A (${v.names[0]})`), stepCount(b) ? '' : why(b, `B (${v.names[1]})`)].filter(Boolean).join('; ') + '.';
  const na = a.steps.length, nb = b.steps.length;
  return `Aligned by step: step k of A over step k of B for the first ${k} step${k > 1 ? 's' : ''} (A: ${na} from ${a.source}; B: ${nb} from ${b.source})` +
    (na !== nb ? `; ${na > nb ? 'A' : 'B'}'s steps ${k}..${Math.max(na, nb) - 1} are drawn after step ${k - 1}` : '') +
    '; what comes before step 0 or after the last step is drawn at the ends.';
}

// STEP_ROWS is the most steps the step table lists.
const STEP_ROWS = 200;

// stepTable fills the table of the aligned steps (shown when aligned by
// step): each step's events and peak in A and in B, as gpumem steps of
// each prints them, and B − A of the peaks.
function stepTable(wrap, v) {
  wrap.hidden = v.align !== 'steps' || !v.steps || !v.steps.k;
  if (wrap.hidden) return;
  const { a, b, k } = v.steps;
  const rows = [];
  for (let i = 0; i < Math.min(k, STEP_ROWS); i++) {
    const x = a.steps[i], y = b.steps[i];
    rows.push(`<tr><td>${escapeHTML(x.name)}</td><td>${x.first_event}..${x.last_event}</td><td class="num">${human(x.peak_bytes)}</td>` +
      `<td>${y.first_event}..${y.last_event}</td><td class="num">${human(y.peak_bytes)}</td><td class="num delta">${humanSigned(y.peak_bytes - x.peak_bytes)}</td></tr>`);
  }
  wrap.querySelector('table').innerHTML = '<tr><th>step</th><th>A events</th><th class="num">A peak</th><th>B events</th><th class="num">B peak</th><th class="num">B − A</th></tr>' +
    rows.join('') + (k > STEP_ROWS ? `<tr><td colspan="6" class="muted">… and ${k - STEP_ROWS} more steps</td></tr>` : '');
}

// stepAnchors maps run t's events onto the step axis: events of step k
// (k < K) on [k, k+1), what precedes step 0 on [−1, 0), what follows step
// K−1 on [K, K+1); gaps between steps collapse onto the boundary.
function stepAnchors(t, st, K) {
  const s = st.steps, out = [[0, -1], [s[0].first_event, 0]];
  for (let k = 0; k < K; k++) out.push([s[k].first_event, k], [s[k].last_event + 1, k + 1]);
  if (s[K - 1].last_event + 1 < t.events) out.push([t.events, K + 1]);
  return out;
}

// along maps event e by anchors (sorted by event; the last anchor at or
// before e, interpolated towards the next).
function along(anchors, e) {
  let lo = 0;
  for (let hi = anchors.length - 1; lo < hi;) { const m = (lo + hi + 1) >> 1; if (anchors[m][0] <= e) lo = m; else hi = m - 1; }
  const [e0, u0] = anchors[lo], next = anchors.slice(lo + 1).find(x => x[0] > e0);
  if (!next) return u0;
  return u0 + (next[1] - u0) * (e - e0) / (next[0] - e0);
}

// axis is how both runs' buckets lie on the common x axis, [0, 1].
function axis(v) {
  const { ta, tb, align } = v;
  if (align === 'time') {
    const span = Math.max(last(ta.time_us_from_start), last(tb.time_us_from_start), 1);
    return { span, xOf: (t, k) => t.time_us_from_start[k] / span, end: (t) => last(t.time_us_from_start) / span };
  }
  if (align === 'steps' && v.steps && v.steps.k) {
    const K = v.steps.k, an = new Map([[ta, stepAnchors(ta, v.steps.a, K)], [tb, stepAnchors(tb, v.steps.b, K)]]);
    // Room before step 0 and after step K−1 only when a run has events there.
    const lo = [...an.values()].some(x => x[1][0] > 0) ? -1 : 0, hi = [...an.values()].some(x => last(x)[1] > K) ? K + 1 : K;
    const norm = (u) => (u - lo) / (hi - lo);
    // A run ends at the end of its step K−1 when nothing follows it.
    return { K, lo, hi, norm, xOf: (t, k) => norm(along(an.get(t), t.first_event[k])), end: (t) => norm(last(an.get(t))[1]) };
  }
  return { xOf: (t, k) => t.first_event[k] / Math.max(t.events, 1), end: () => 1 };
}

// bucketAt is the bucket of run t drawn at u, or −1 outside the run.
function bucketAt(t, ax, u) {
  const n = t.first_event.length;
  if (!n || u < ax.xOf(t, 0) || u > ax.end(t)) return -1;
  let lo = 0;
  for (let hi = n - 1; lo < hi;) { const m = (lo + hi + 1) >> 1; if (ax.xOf(t, m) <= u) lo = m; else hi = m - 1; }
  return lo;
}

// stepOf names where event e of a run lies on the step axis.
function stepOf(st, K, e) {
  const s = st.steps;
  if (e < s[0].first_event) return 'before step 0';
  for (let k = 0; k < K; k++) if (e >= s[k].first_event && e <= s[k].last_event) return s[k].name;
  return e > s[K - 1].last_event ? `after ${s[K - 1].name}` : 'between steps';
}

// readAt is the readout at pixel x of the curves: each run's bucket
// there (its events, requested and reserved bytes, the picked site's).
function readAt(v, px) {
  const lay = v.layout;
  if (!lay || px < lay.L || px > lay.W - lay.R) return '';
  const u = (px - lay.L) / (lay.W - lay.L - lay.R), ax = lay.ax;
  const one = (who, t, st, site) => {
    const k = bucketAt(t, ax, u);
    if (k < 0) return `${who}: —`;
    const e0 = t.first_event[k], e1 = (k + 1 < t.first_event.length ? t.first_event[k + 1] : t.events) - 1;
    return `${who}: events ${e0}..${e1}` + (ax.K ? ` (${stepOf(st, ax.K, e0)})` : '') +
      `, requested ${human(t.requested_max[k])}, reserved ${human(t.reserved_max[k])}` + (site ? `, site ${human(site.bytes_max[k])}` : '');
  };
  const ka = bucketAt(v.ta, ax, u), kb = bucketAt(v.tb, ax, u);
  return [one('A', v.ta, v.steps && v.steps.a, v.site && v.site.a), one('B', v.tb, v.steps && v.steps.b, v.site && v.site.b),
    ka >= 0 && kb >= 0 ? `B − A: ${humanSigned(v.tb.requested_max[kb] - v.ta.requested_max[ka])}` : ''].filter(Boolean).join('\n');
}

// drawCurves draws both runs' requested (solid) and reserved (dashed)
// totals, aligned by the share of each trace's events, by the time from
// each trace's first event or by step, the picked site's live bytes filled
// under each, and below them B − A of the requested totals where both runs
// have a value. It returns the layout the readout reads.
function drawCurves(c, v) {
  const { ta, tb } = v;
  const dpr = window.devicePixelRatio || 1;
  // A picked site gets a panel of its own between the totals and B − A,
  // on its own scale (a site is often a sliver of the totals).
  const sp = v.site ? { y: 180, h: 70 } : null;
  const W = c.clientWidth || 1000, H = sp ? 350 : 260;
  c.width = W * dpr; c.height = H * dpr; c.style.height = H + 'px';
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, W, H);
  const L = 80, R = 10, top = { y: 8, h: 150 }, bot = { y: sp ? 270 : 180, h: 70 };
  const ax = axis(v), xOf = ax.xOf;
  const ymax = Math.max(...ta.reserved_max, ...tb.reserved_max, ...ta.requested_max, ...tb.requested_max, 1);
  const X = (u) => L + u * (W - L - R), Y = (val) => top.y + top.h * (1 - val / ymax);
  g.font = '11px system-ui, sans-serif'; g.fillStyle = '#5b6670'; g.strokeStyle = '#d5dae0';
  g.strokeRect(L, top.y, W - L - R, top.h); g.strokeRect(L, bot.y, W - L - R, bot.h);
  g.textAlign = 'right';
  g.fillText(human(ymax), L - 4, top.y + 10); g.fillText('0', L - 4, top.y + top.h);
  if (ax.K) { // the step boundaries, labelled with A's step names
    const every = Math.max(1, Math.ceil(ax.K / 12));
    g.textAlign = 'center';
    for (let k = 0; k <= ax.K; k++) {
      const x = X(ax.norm(k));
      g.strokeStyle = '#e3e7eb'; g.beginPath(); g.moveTo(x, top.y); g.lineTo(x, bot.y + bot.h); g.stroke();
      if (k < ax.K && k % every === 0) { g.fillStyle = '#5b6670'; g.fillText(String(k), X(ax.norm(k + 0.5)), top.y + top.h + 12); }
    }
  }
  const fill = (t, vals, colour, y) => {
    g.beginPath(); g.moveTo(X(xOf(t, 0)), y(0));
    vals.forEach((val, k) => {
      const x0 = X(xOf(t, k)), x1 = k + 1 < vals.length ? X(xOf(t, k + 1)) : X(ax.end(t));
      g.lineTo(x0, y(val)); g.lineTo(x1, y(val));
    });
    g.lineTo(X(ax.end(t)), y(0)); g.closePath();
    g.globalAlpha = 0.45; g.fillStyle = colour; g.fill(); g.globalAlpha = 1;
  };
  if (v.site) {
    fill(ta, v.site.a.bytes_max, '#4e79a7', Y); fill(tb, v.site.b.bytes_max, '#f28e2c', Y);
    const smax = Math.max(1, ...v.site.a.bytes_max, ...v.site.b.bytes_max);
    const SY = (val) => sp.y + sp.h * (1 - val / smax);
    g.strokeStyle = '#d5dae0'; g.strokeRect(L, sp.y, W - L - R, sp.h);
    fill(ta, v.site.a.bytes_max, '#4e79a7', SY); fill(tb, v.site.b.bytes_max, '#f28e2c', SY);
    g.fillStyle = '#5b6670'; g.textAlign = 'right';
    g.fillText(human(smax), L - 4, sp.y + 10); g.fillText('0', L - 4, sp.y + sp.h);
    g.textAlign = 'left'; g.fillText('the picked site, live', L + 4, sp.y + 12);
  }
  // Each run's moment of the diff (peak, end, …): a line in its colour.
  v.moments.forEach((e, i) => {
    const t = i ? tb : ta;
    if (e === null || e === undefined || !t.first_event.length) return;
    let k = 0;
    for (let hi = t.first_event.length - 1; k < hi;) { const m = (k + hi + 1) >> 1; if (t.first_event[m] <= e) k = m; else hi = m - 1; }
    const x = X(xOf(t, k));
    g.setLineDash([2, 3]); g.strokeStyle = i ? '#f28e2c' : '#4e79a7'; g.lineWidth = 1;
    g.beginPath(); g.moveTo(x, top.y); g.lineTo(x, top.y + top.h); g.stroke(); g.setLineDash([]);
  });
  const line = (t, vals, colour, dash) => {
    g.beginPath(); g.setLineDash(dash ? [4, 3] : []); g.strokeStyle = colour; g.lineWidth = 1.5;
    vals.forEach((val, k) => {
      const x = X(xOf(t, k)), y = Y(val);
      if (k === 0) g.moveTo(x, y); else g.lineTo(x, y);
    });
    g.stroke(); g.setLineDash([]);
  };
  line(ta, ta.reserved_max, '#a0cbe8', true); line(tb, tb.reserved_max, '#ffbe7d', true);
  line(ta, ta.requested_max, '#4e79a7'); line(tb, tb.requested_max, '#f28e2c');
  // B − A on a common grid, where both runs have started and not ended.
  const N = 300, diffs = [];
  for (let j = 0; j < N; j++) {
    const u = j / (N - 1), ka = bucketAt(ta, ax, u), kb = bucketAt(tb, ax, u);
    diffs.push(ka < 0 || kb < 0 ? null : tb.requested_max[kb] - ta.requested_max[ka]);
  }
  const dmax = Math.max(1, ...diffs.filter(d => d !== null).map(Math.abs));
  const mid = bot.y + bot.h / 2;
  g.strokeStyle = '#d5dae0'; g.beginPath(); g.moveTo(L, mid); g.lineTo(W - R, mid); g.stroke();
  g.fillStyle = '#5b6670'; g.textAlign = 'right';
  g.fillText(humanSigned(dmax), L - 4, bot.y + 10); g.fillText(humanSigned(-dmax), L - 4, bot.y + bot.h);
  diffs.forEach((d, j) => {
    if (d === null) return;
    const x = X(j / (N - 1)), h = (bot.h / 2) * d / dmax;
    g.fillStyle = d < 0 ? '#e15759' : '#59a14f';
    g.fillRect(x, d < 0 ? mid : mid - h, Math.max(1, (W - L - R) / N), Math.abs(h));
  });
  g.textAlign = 'left'; g.fillStyle = '#5b6670';
  g.fillText(ax.K ? `${ax.lo < 0 ? 'before step 0 | ' : ''}steps 0 … ${ax.K - 1}${ax.hi > ax.K ? ' | after' : ''}` : v.align === 'time' ? `0 … ${durationUS(ax.span)}` : '0 … 100% of each trace', L, H - 2);
  // Where the readout reads (tests hover there): the plot's pixels and,
  // by step, the step axis it spans.
  c.dataset.plot = JSON.stringify(ax.K ? { left: L, right: W - R, lo: ax.lo, hi: ax.hi } : { left: L, right: W - R });
  return { L, R, W, ax };
}

function last(a) { return a && a.length ? a[a.length - 1] : 0; }
