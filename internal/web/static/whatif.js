// The What-if view: gpumem sim on the file shown (GET /api/sim, the same
// answer as `gpumem sim --json`): replay the recorded requests under
// other allocator settings, or the sweep of common ones, and see each
// setting's verdict and replayed peak reserved against the recorded one.
import { human, humanSigned, escapeHTML, getJSON, baseName, signedPct } from './units.js';

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
  const q = new URLSearchParams({ file: ctx.file, device: ctx.device });
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
  body.innerHTML = html;
  body.dataset.ready = '1';
}

// bars draws a replayed peak (dark) against the recorded one (the line).
function bars(v, rec) {
  const m = Math.max(v, rec, 1) * 1.05;
  return `<div class="track" title="replayed ${human(v)}, recorded ${human(rec)}"><div class="bar act" style="width:${(100 * v / m).toFixed(1)}%"></div>` +
    `<div class="mark" style="left:${(100 * rec / m).toFixed(1)}%"></div></div>`;
}
