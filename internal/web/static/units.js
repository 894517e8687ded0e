// Shared by the views loaded on demand (compare, what-if, steps, ranks):
// sizes as the CLI prints them and small page helpers.

// The size formats are internal/units' sizes.js (served as /sizes.js).
export { human, humanSigned, python } from './sizes.js';

export function escapeHTML(s) {
  return String(s).replace(/[&<>"']/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
}

// getJSON fetches an answer; a failed request throws the server's error.
export async function getJSON(url, init) {
  const r = await fetch(url, init);
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

// siteStrings asks the server for each site (a list of frames) as the
// CLI prints it (analysis.SiteString).
export async function siteStrings(sites) {
  if (!sites.length) return [];
  return getJSON('api/sites', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(sites) });
}

// baseName is the last element of a path.
export function baseName(p) {
  return String(p).split(/[\\/]/).pop();
}

// fileOptions fills a <select> with the served files, selecting id.
export function fileOptions(sel, files, id) {
  sel.innerHTML = '';
  for (const f of files) if (!f.error) sel.add(new Option(f.name, f.id));
  sel.value = id;
}

// durationUS is analysis.FormatDurationUS: "850us", "12.5ms", "3.20s".
export function durationUS(us) {
  if (us < 1000) return `${us}us`;
  if (us < 1e6) return `${us / 1e3}ms`;
  return `${(us / 1e6).toFixed(2)}s`;
}

// signedPct is Go's %+.1f%%.
export function signedPct(x) {
  const s = x.toFixed(1);
  return (s.startsWith('-') ? s : '+' + s) + '%';
}

// curveBuckets is how many buckets of events a view's curves over a trace
// get (/api/totals, /api/sitecurve, /api/sim's curve): two pixel columns
// of the plot each (the views' canvases are at most 1200 pixels wide, 90
// of them margins), so that the mouse reads every bucket.
export function curveBuckets(el) {
  return Math.max(50, Math.floor((Math.min(el.clientWidth || 1000, 1200) - 90) / 2));
}
