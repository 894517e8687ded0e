// The Compare view: gpumem diff of two served files (GET /api/diff, the
// same answer as `gpumem diff --json`): the two runs' peaks, the live
// bytes by category and by allocation site at the chosen moment. Clicking
// a site highlights it and shows its frames and its figures in both runs.
import { human, humanSigned, escapeHTML, getJSON, siteStrings, baseName, fileOptions } from './units.js';

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
    <h3>Sites by change of live bytes (innermost user frames; ${top.length} of ${d.sites.length})</h3>
    <table class="xv" id="cmp-sites"><tr><th class="num">B − A</th><th class="num">A</th><th class="num">B</th><th class="num">allocs A/B</th><th>site</th></tr>
    ${top.map((s, i) => `<tr data-site="${i}"><td class="num delta">${humanSigned(s.delta_bytes)}</td><td class="num">${human(s.a_bytes)}</td><td class="num">${human(s.b_bytes)}</td><td class="num">${s.a_allocations}/${s.b_allocations}</td><td class="site">${escapeHTML(names[i])}</td></tr>`).join('')}
    </table>
    <div id="cmp-open" hidden>Highlight its allocations (the timeline's frame search for its innermost frame) in the timeline of
      <button id="cmp-open-a">A</button> <button id="cmp-open-b">B</button></div>
    <pre id="cmp-site" class="details">Click a site to see its frames in both runs.</pre>
    <h3>Allocator settings</h3>
    <p id="cmp-settings">${d.settings.length ? d.settings.map(s => `${escapeHTML(s.key)}: ${escapeHTML(s.a)} → ${escapeHTML(s.b)}`).join('<br>') : 'the same'}</p>`;
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
