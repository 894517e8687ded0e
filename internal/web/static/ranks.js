// The Ranks view: gpumem ranks over the files served (GET /api/ranks, the
// same answer as `gpumem ranks --json`): one row per rank, the spread of
// the peaks and the outlier. Clicking a row opens that rank's timeline.
import { human, humanSigned, escapeHTML, getJSON, baseName, durationUS } from './units.js';

export async function open(ctx) {
  const { el, files } = ctx;
  el.innerHTML = '<div class="xv-head">Ranks <span class="muted">(gpumem ranks over the files served)</span></div><div id="rk-body"><p class="muted">Reading every rank…</p></div>';
  const body = el.querySelector('#rk-body');
  let r;
  try {
    r = await getJSON('api/ranks');
  } catch (e) {
    body.innerHTML = `<p class="xv-error">${escapeHTML(e.message)}</p>`;
    return;
  }
  // A row's file: the served file of that name (serve names files by
  // their base name, a repeated one with " (2)" and so on).
  const used = new Set();
  const fileOf = (path) => {
    const b = baseName(path);
    const f = files.find(f => !used.has(f.id) && !f.error && (f.name === b || f.name.startsWith(b + ' (') || baseName(f.name) === b));
    if (f) used.add(f.id);
    return f ? f.id : -1;
  };
  const ids = r.ranks.map(row => fileOf(row.file));
  const max = Math.max(...r.ranks.map(x => x.peak_reserved_bytes), 1);
  // As the CLI's "peak at": the time from the trace's first event, else
  // the event, else the state before the trace or the dump.
  const at = (row) => row.source ? '-' : row.peak_time_us_from_start !== null ? durationUS(row.peak_time_us_from_start)
    : row.peak_event !== null ? `event ${row.peak_event}` : 'before trace / dump';
  const out = r.outlier;
  body.innerHTML = `<table class="xv" id="rk-table"><tr><th>rank</th><th class="num">peak active</th><th class="num">peak reserved</th><th>peak at</th><th class="num">fragmentation</th><th>top site at peak</th><th>file</th><th>peak active (dark) within reserved</th></tr>
    ${r.ranks.map((row, i) => `<tr data-row="${i}" class="${out && out.rank === row.rank && out.file === row.file ? 'outlier' : ''}"><td>${row.rank}</td><td class="num">${human(row.peak_allocated_bytes)}</td><td class="num">${human(row.peak_reserved_bytes)}</td>` +
      `<td>${at(row)}</td><td class="num">${row.source === 'monitor' ? '-' : row.fragmentation_at_peak.toFixed(3)}</td><td class="site">${row.top_site ? escapeHTML(human(row.top_site_bytes) + ' ' + row.top_site) : '-'}</td>` +
      `<td>${escapeHTML(baseName(row.file))}</td><td><div class="track"><div class="bar res" style="width:${(100 * row.peak_reserved_bytes / max).toFixed(1)}%"></div><div class="bar act" style="width:${(100 * row.peak_allocated_bytes / max).toFixed(1)}%"></div></div></td></tr>`).join('')}
    </table>
    <p id="rk-spread">peak active: median ${human(r.median_peak_allocated_bytes)}, spread ${human(r.spread_bytes)} (${r.spread_percent_of_median.toFixed(1)}% of the median)</p>
    <p id="rk-outlier">${r.ranks.length < 3 ? 'outlier: needs at least 3 ranks' : !out ? 'outlier: none (every rank within 5% of the median)'
      : `outlier: rank ${out.rank} (${escapeHTML(baseName(out.file))}), ${humanSigned(out.bytes_from_median)} from the median (${(out.percent_from_median >= 0 ? '+' : '') + out.percent_from_median.toFixed(1)}%)`}</p>
    <p class="muted">Click a rank to open its timeline.</p>`;
  body.querySelector('#rk-table').addEventListener('click', (e) => {
    const tr = e.target.closest('tr[data-row]');
    if (!tr || ids[+tr.dataset.row] < 0) return;
    const id = ids[+tr.dataset.row];
    ctx.go({ file: id, device: r.ranks[+tr.dataset.row].device, view: 'active' });
  });
}
