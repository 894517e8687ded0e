// The What-if view: gpumem sim on the file shown (GET /api/sim with
// curve=N, the same answer as `gpumem sim --json --curve N`): replay the
// recorded requests under other allocator settings, or the sweep of common
// ones, and see each setting's replayed reserved curve over the recorded
// one, its verdict and its peak reserved against the recorded one.
import { human, humanSigned, escapeHTML, getJSON, baseName, signedPct, curveBuckets } from './units.js';

export async function open(ctx) {
  const { el } = ctx;
  el.innerHTML = `<div class="xv-head">What-if <label>Settings <select id="wi-mode">
      <option value="sweep">sweep of common settings</option>
      <option value="recorded">the recorded settings (validation)</option>
      <option value="config">PYTORCH_CUDA_ALLOC_CONF:</option></select></label>
    <input id="wi-config" type="text" size="44" placeholder="expandable_segments:True,max_split_size_mb:128" disabled>
    <label title="Device memory: empty for unlimited, a size such as 80GiB, or oom for the capacity the recorded OOM implies">Capacity <input id="wi-capacity" type="text" size="9" placeholder="unlimited"></label>
    <button id="wi-run">Replay</button> <span class="muted">(gpumem sim)</span></div><div id="wi-body"></div>`;
  const mode = el.querySelector('#wi-mode'), cfg = el.querySelector('#wi-config');
  mode.addEventListener('change', () => { cfg.disabled = mode.value !== 'config'; if (!cfg.disabled) cfg.focus(); });
  const run = () => render(ctx, mode.value, cfg.value.trim(), el.querySelector('#wi-capacity').value.trim());
  el.querySelector('#wi-run').addEventListener('click', run);
  cfg.addEventListener('keydown', (e) => { if (e.key === 'Enter') run(); });
  await run();
}

async function render(ctx, mode, config, capacity) {
  const body = ctx.el.querySelector('#wi-body');
  body.dataset.ready = '';
  body.innerHTML = '<p class="muted">Replaying…</p>';
  const q = new URLSearchParams({ file: ctx.file, device: ctx.device, curve: curveBuckets(body) });
  if (mode === 'sweep') q.set('sweep', '1');
  if (mode === 'config') q.set('config', config || 'default');
  if (capacity) q.set('capacity', capacity);
  let r;
  try {
    r = await getJSON('api/sim?' + q);
  } catch (e) {
    body.innerHTML = `<p class="xv-error">${escapeHTML(e.message)}</p>`;
    return;
  }
  const rec = r.recorded.peak_reserved_bytes;
  let html = `<p>${escapeHTML(baseName(r.file))} device ${r.device}: ${r.events} events; recorded peak reserved <b id="wi-recorded">${human(rec)}</b>` +
    (r.trace_start.segments > 0 ? `; the trace starts with ${human(r.trace_start.reserved_bytes)} reserved in ${r.trace_start.segments} segments made before recording (${r.from_empty ? 'replayed from an empty allocator' : 'kept as recorded'})` : '') + '</p>';
  if (r.capacity_from_oom) {
    const c = r.capacity_from_oom;
    html += `<p>Recorded OOM at event ${c.event}; the capacity it implies: ${human(c.reserved_bytes)} reserved + ${human(c.device_free_bytes)} free = <b>${human(c.capacity_bytes)}</b></p>`;
  }
  if (r.oom_what_if) {
    html += `<table class="xv" id="wi-table"><tr><th>config</th><th>recorded OOM</th><th>first OOM of the model</th><th class="num">peak reserved</th><th>replayed vs recorded peak reserved</th></tr>`;
    let fits = 0;
    for (const o of r.oom_what_if) {
      if (!o.still_oom) fits++;
      html += `<tr><td>${escapeHTML(o.config)}</td><td class="verdict ${o.still_oom ? 'bad' : 'good'}">${o.still_oom ? 'still OOM' : 'fits'}</td>` +
        `<td>${o.first_oom_event < 0 ? 'none' : `event ${o.first_oom_event}` + (o.first_oom_size ? ` (${human(o.first_oom_size)})` : '')}</td>` +
        `<td class="num">${human(o.peak_reserved_bytes)}</td><td>${bars(o.peak_reserved_bytes, rec)}</td></tr>`;
    }
    html += `</table><p id="wi-verdict">${fits === 0 ? `No setting avoids the OOM at ${human(r.capacity_from_oom.capacity_bytes)}.` : `${fits} of ${r.oom_what_if.length} settings serve the request that ran out of memory at ${human(r.capacity_from_oom.capacity_bytes)}.`}</p>`;
  } else if (r.sweep) {
    const base = r.sweep.find(s => s.config === 'default');
    html += `<p>Replayed ${r.from_empty ? 'from an empty allocator' : 'from the recorded layout'} under ${r.sweep.length} settings, best first by peak reserved.</p>` +
      `<table class="xv" id="wi-table"><tr><th>config</th><th class="num">peak reserved</th><th class="num">vs default</th><th class="num">peak allocated</th><th class="num">unalloc@peak</th><th class="num">cudaMalloc</th><th class="num">cudaFree</th><th class="num">OOMs</th><th>verdict</th><th>replayed vs recorded peak reserved</th></tr>`;
    for (const s of r.sweep) {
      let rel = '-', verdict = 'the baseline', cls = '';
      if (base && base.peak_reserved_bytes > 0 && s.config !== 'default') {
        rel = `${humanSigned(s.delta_reserved_bytes)} (${signedPct(100 * s.delta_reserved_bytes / base.peak_reserved_bytes)})`;
        verdict = s.delta_reserved_bytes < 0 ? 'lower' : s.delta_reserved_bytes > 0 ? 'higher' : 'the same';
        cls = s.delta_reserved_bytes < 0 ? 'good' : s.delta_reserved_bytes > 0 ? 'bad' : '';
      }
      if (s.ooms > 0) { verdict = `${s.ooms} OOM${s.ooms > 1 ? 's' : ''}`; cls = 'bad'; }
      html += `<tr><td>${escapeHTML(s.config)}</td><td class="num">${human(s.peak_reserved_bytes)}</td><td class="num">${rel}</td><td class="num">${human(s.peak_allocated_bytes)}</td>` +
        `<td class="num">${(100 * s.unallocated_at_peak).toFixed(1)}%</td><td class="num">${s.cuda_malloc_count}</td><td class="num">${s.cuda_free_count}</td><td class="num">${s.ooms}</td>` +
        `<td class="verdict ${cls}">${verdict}</td><td>${bars(s.peak_reserved_bytes, rec)}</td></tr>`;
    }
    html += '</table>';
    const best = r.sweep[0];
    if (base) {
      html += `<p id="wi-verdict">${best.config === 'default' || best.delta_reserved_bytes >= 0
        ? `No setting lowers peak reserved below the default (${human(base.peak_reserved_bytes)}).`
        : `Best: ${escapeHTML(best.config)} lowers peak reserved by ${human(-best.delta_reserved_bytes)} (${(-100 * best.delta_reserved_bytes / base.peak_reserved_bytes).toFixed(1)}%) versus the default ${human(base.peak_reserved_bytes)}.`}</p>`;
    }
  } else {
    const p = r.predicted;
    html += `<p>Under <b>${escapeHTML(r.config)}</b>:</p><table class="xv" id="wi-table"><tr><th></th><th class="num">replayed</th><th class="num">recorded</th></tr>` +
      `<tr><td>peak reserved</td><td class="num">${human(p.peak_reserved_bytes)}</td><td class="num">${human(rec)}</td></tr>` +
      `<tr><td>peak allocated</td><td class="num">${human(p.peak_allocated_bytes)}</td><td class="num"></td></tr>` +
      `<tr><td>cudaMalloc</td><td class="num">${p.cuda_malloc_count}</td><td class="num">${r.recorded.cuda_malloc_count}</td></tr>` +
      `<tr><td>cudaFree</td><td class="num">${p.cuda_free_count}</td><td class="num">${r.recorded.cuda_free_count}</td></tr>` +
      `<tr><td>OOMs</td><td class="num">${p.ooms.length}</td><td class="num">${r.recorded.ooms.length}</td></tr></table>` +
      `<div class="wi-bar">${bars(p.peak_reserved_bytes, rec)}</div>` +
      `<p id="wi-verdict">Verdict: peak reserved ${humanSigned(p.peak_reserved_bytes - rec)} against the recording` +
      (p.ooms.length ? `; ${p.ooms.length} OOM${p.ooms.length > 1 ? 's' : ''} (first at event ${p.ooms[0].event}, ${human(p.ooms[0].size)})` : '') + '.</p>';
    if (r.validation) {
      const v = r.validation;
      html += `<p>Validation: allocation addresses ${v.alloc_addresses_matched}/${v.alloc_addresses_total}, segment events ${v.segment_events_matched}/${v.segment_events_total}, ` +
        `segment releases ${v.segment_releases_matched}/${v.segment_releases_total}; final state ${v.final_state_matches ? 'matches' : 'differs'}.</p>`;
    }
  }
  if (r.curve) {
    html += `<h3>Reserved bytes over the trace: recorded (black, dashed) and replayed ${r.predicted && !r.sweep && !r.oom_what_if ? 'under this setting' : "under each setting (its row's colour; click a row to pick it)"}</h3>
      <canvas id="wi-curves" width="1000" height="280"></canvas>
      <div id="wi-readout" class="readout">Hover over the curves to read them at that point.</div>`;
  }
  body.innerHTML = html;
  if (r.curve) {
    try {
      curves(body, r);
    } catch (e) { // the table stands; say what went wrong with the curves
      body.querySelector('#wi-readout').textContent = `The curves could not be drawn: ${e.message}`;
    }
  }
  body.dataset.ready = '1';
}

const COLOURS = ['#4e79a7', '#f28e2c', '#e15759', '#76b7b2', '#59a14f', '#edc949', '#af7aa1', '#ff9da7', '#9c755f', '#17becf', '#bcbd22', '#7f7f7f'];

// curves draws the replayed reserved curves over the recorded one, gives
// each setting's row its colour, and lets a click on a row pick its curve
// (drawn bold, the others faint) and the mouse read the curves.
function curves(body, r) {
  const c = body.querySelector('#wi-curves'), readout = body.querySelector('#wi-readout');
  // The sweep's and the OOM what-if's rows are settings; one replay's
  // table is its figures, and the legend says which curve is which.
  const rows = r.sweep || r.oom_what_if ? [...body.querySelectorAll('#wi-table tr')].filter(tr => tr.querySelector('td')) : [];
  const cv = r.curve, n = cv.recorded_reserved_max.length;
  if (!rows.length) readout.insertAdjacentHTML('beforebegin', `<div class="muted"><span class="swatch" style="background:#24292f"></span>recorded <span class="swatch" style="background:${COLOURS[0]}"></span>replayed under ${escapeHTML(cv.replayed[0].config)}</div>`);
  // Row k of the table is curve k (both in the answer's order).
  const v = { picked: -1, layout: null };
  rows.forEach((tr, k) => {
    if (k >= cv.replayed.length) return;
    tr.dataset.curve = String(k);
    tr.cells[0].insertAdjacentHTML('afterbegin', `<span class="swatch" style="background:${COLOURS[k % COLOURS.length]}"></span>`);
  });
  const redraw = () => { v.layout = drawSim(c, r, v.picked); };
  body.querySelector('#wi-table').addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-curve]');
    if (!tr) return;
    const k = +tr.dataset.curve;
    v.picked = v.picked === k ? -1 : k;
    for (const x of rows) x.classList.toggle('sel', x === tr && v.picked === k);
    redraw();
  });
  c.addEventListener('mousemove', (e) => {
    const lay = v.layout, rect = c.getBoundingClientRect(), px = e.clientX - rect.left;
    if (!lay || px < lay.L || px > lay.W - lay.R || !n) return;
    const b = Math.min(n - 1, Math.floor((px - lay.L) / (lay.W - lay.L - lay.R) * n));
    const e0 = cv.first_event[b], e1 = (b + 1 < n ? cv.first_event[b + 1] : r.events) - 1;
    const order = v.picked >= 0 ? [v.picked] : cv.replayed.map((_, k) => k);
    readout.textContent = `events ${e0}..${e1}: recorded ${human(cv.recorded_reserved_max[b])}\n` +
      order.map(k => `${cv.replayed[k].config}: ${human(cv.replayed[k].reserved_max[b])}`).join('\n');
  });
  redraw();
}

// drawSim draws the recorded reserved curve (black, thick) and each
// replay's (its row's colour; the picked one bold, the others faint when
// one is picked), a dot at each replay's peak, and the capacity the
// replays ran under when there is one. It returns the layout the readout
// reads.
function drawSim(c, r, picked) {
  const cv = r.curve, n = cv.recorded_reserved_max.length;
  const dpr = window.devicePixelRatio || 1;
  const W = c.clientWidth || 1000, H = 280, L = 80, R = 10, T = 8, B = 24;
  c.width = W * dpr; c.height = H * dpr; c.style.height = H + 'px';
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, W, H);
  const capacity = r.capacity_from_oom ? r.capacity_from_oom.capacity_bytes : 0;
  // The y axis spans the curves (not from 0: settings differ by a few
  // percent of what is reserved), its ticks say where it starts.
  const all = [...cv.recorded_reserved_max, ...cv.replayed.flatMap(x => x.reserved_max)];
  const hi = Math.max(1, capacity, ...all), lo0 = Math.min(...all, capacity || Infinity);
  const pad = Math.max((hi - lo0) * 0.06, hi * 0.002), ymin = Math.max(0, lo0 - pad), ymax = hi + pad;
  const X = (b) => L + (W - L - R) * b / Math.max(n, 1), Y = (val) => T + (H - T - B) * (1 - (val - ymin) / (ymax - ymin));
  g.font = '11px system-ui, sans-serif'; g.strokeStyle = '#d5dae0'; g.strokeRect(L, T, W - L - R, H - T - B);
  g.fillStyle = '#5b6670'; g.textAlign = 'right';
  for (const f of [0, 0.25, 0.5, 0.75, 1]) { const val = ymin + (ymax - ymin) * f; g.fillText(human(Math.round(val)), L - 4, Y(val) + 4); }
  g.textAlign = 'left'; g.fillText(`event 0 … ${r.events - 1}`, L, H - 6);
  // Steps: each bucket's value held to the next bucket.
  const line = (vals, colour, width, alpha, dash) => {
    g.beginPath(); g.strokeStyle = colour; g.lineWidth = width; g.globalAlpha = alpha; g.setLineDash(dash || []);
    vals.forEach((val, b) => { if (b === 0) g.moveTo(X(b), Y(val)); else g.lineTo(X(b), Y(vals[b - 1])), g.lineTo(X(b), Y(val)); });
    if (vals.length) g.lineTo(X(vals.length), Y(vals[vals.length - 1]));
    g.stroke(); g.globalAlpha = 1; g.setLineDash([]);
  };
  if (capacity) {
    g.setLineDash([6, 4]); g.strokeStyle = '#cf222e'; g.lineWidth = 1;
    g.beginPath(); g.moveTo(L, Y(capacity)); g.lineTo(W - R, Y(capacity)); g.stroke(); g.setLineDash([]);
    g.fillStyle = '#cf222e'; g.textAlign = 'right'; g.fillText(`capacity ${human(capacity)}`, W - R - 4, Y(capacity) - 4);
  }
  cv.replayed.forEach((x, k) => {
    if (k === picked) return;
    line(x.reserved_max, COLOURS[k % COLOURS.length], 1.2, picked >= 0 ? 0.25 : 0.9);
  });
  if (picked >= 0) line(cv.replayed[picked].reserved_max, COLOURS[picked % COLOURS.length], 2.5, 1);
  // The recording on top, dashed, so that a replay that follows it
  // exactly still shows both.
  line(cv.recorded_reserved_max, '#24292f', 1.6, 1, [6, 4]);
  cv.replayed.forEach((x, k) => { // each replay's peak
    if (picked >= 0 && k !== picked) return;
    let b = 0;
    x.reserved_max.forEach((val, j) => { if (val > x.reserved_max[b]) b = j; });
    g.fillStyle = COLOURS[k % COLOURS.length];
    g.beginPath(); g.arc(X(b + 0.5), Y(x.reserved_max[b]), 3.5, 0, 2 * Math.PI); g.fill();
  });
  c.dataset.plot = JSON.stringify({ left: L, right: W - R, buckets: n }); // where the readout reads (tests hover there)
  return { L, R, W };
}

// bars draws a replayed peak (dark) against the recorded one (the line).
function bars(v, rec) {
  const m = Math.max(v, rec, 1) * 1.05;
  return `<div class="track" title="replayed ${human(v)}, recorded ${human(rec)}"><div class="bar act" style="width:${(100 * v / m).toFixed(1)}%"></div>` +
    `<div class="mark" style="left:${(100 * rec / m).toFixed(1)}%"></div></div>`;
}
