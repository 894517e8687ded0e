// The Steps view: gpumem steps on the file shown (GET /api/steps, the
// same answer as `gpumem steps --json`): per training step its events,
// live bytes at its start, peak and peak phase, the live bytes as each
// phase ends, its duration, and the leak check. Clicking a step opens the
// Active Memory Timeline zoomed to it.
import { human, humanSigned, escapeHTML, getJSON, siteStrings, baseName, durationUS } from './units.js';

export async function open(ctx) {
  const { el } = ctx;
  el.innerHTML = '<div class="xv-head">Steps <span class="muted">(gpumem steps)</span></div><div id="st-body"><p class="muted">Finding the steps…</p></div>';
  const body = el.querySelector('#st-body');
  let r;
  try {
    r = await getJSON(`api/steps?file=${ctx.file}&device=${ctx.device}`);
  } catch (e) {
    body.innerHTML = `<p class="xv-error">${escapeHTML(e.message)}</p>`;
    return;
  }
  const name = escapeHTML(baseName(r.file));
  if (!r.steps.length) {
    body.innerHTML = `<p id="st-summary">${name} device ${r.device}: no steps found (no ProfilerStep or optimizer annotations, no repeating allocation sites)</p>`;
    return;
  }
  const n = r.steps.length;
  const phase = (v) => v ? human(v) : '-';
  let leak;
  if (n < 3) leak = 'leak check: needs at least 3 steps (the first is warm-up)';
  else if (r.leak) leak = `LEAK: live memory at the start of every step from step 1 on, and at the end, grows by ${humanSigned(r.growth_per_step_bytes)} per step`;
  else leak = `no leak: live memory at the start of steps 1..${n - 1} and at the end does not keep growing (${humanSigned(r.growth_per_step_bytes)} per step on average)`;
  const sites = r.leak ? r.growing_sites.slice(0, 10) : [];
  const names = await siteStrings(sites.map(s => s.frames));
  const maxPeak = Math.max(...r.steps.map(s => s.peak_bytes), 1);
  body.innerHTML = `<p id="st-summary">${name} device ${r.device}: ${n} step${n === 1 ? '' : 's'} (from ${escapeHTML(r.source)}). Click a step to zoom the timeline to it.</p>
    <table class="xv" id="st-table"><tr><th>step</th><th>events</th><th class="num">live at start</th><th class="num">peak</th><th>peak phase</th><th class="num">end of forward</th><th class="num">end of backward</th><th class="num">end of optimizer</th><th class="num">duration</th><th>peak</th></tr>
    ${r.steps.map((s, i) => `<tr data-step="${i}"><td>${escapeHTML(s.name)}</td><td>${s.first_event}..${s.last_event}</td><td class="num">${human(s.start_bytes)}</td><td class="num">${human(s.peak_bytes)}</td><td>${s.peak_phase}</td>` +
      `<td class="num">${phase(s.forward_end_bytes)}</td><td class="num">${phase(s.backward_end_bytes)}</td><td class="num">${phase(s.optimizer_end_bytes)}</td><td class="num">${s.time_us ? durationUS(s.duration_us) : '-'}</td>` +
      `<td><div class="track"><div class="bar res" style="width:${(100 * s.start_bytes / maxPeak).toFixed(1)}%"></div><div class="bar act" style="left:${(100 * s.start_bytes / maxPeak).toFixed(1)}%;width:${(100 * (s.peak_bytes - s.start_bytes) / maxPeak).toFixed(1)}%"></div></div></td></tr>`).join('')}
    </table>
    <p id="st-leak" class="${r.leak ? 'xv-error' : ''}">${leak}</p>
    ${sites.length ? `<p>sites that grew from the start of step 1 to the end:</p><table class="xv" id="st-sites">${sites.map((s, i) => `<tr><td class="num">${humanSigned(s.growth_bytes)}</td><td class="site">${escapeHTML(names[i])}</td></tr>`).join('')}</table>` : ''}`;
  body.querySelector('#st-table').addEventListener('click', async (e) => {
    const tr = e.target.closest('tr[data-step]');
    if (!tr) return;
    const s = r.steps[+tr.dataset.step];
    // The step's events on the timeline's timestep axis: from just before
    // its first event to just after its last.
    const specs = [s.first_event > 0 ? `e${s.first_event - 1}` : 'e0', `e${s.last_event}`];
    try {
      const [a, b] = await getJSON(`api/moment?file=${ctx.file}&device=${ctx.device}&at=${specs.join(',')}`);
      const x0 = s.first_event > 0 ? a.timestep : 0;
      ctx.go({ file: ctx.file, device: ctx.device, view: 'active', x0, x1: Math.max(b.timestep + 1, x0 + 1) });
    } catch (err) {
      body.querySelector('#st-leak').textContent = err.message;
    }
  });
}
