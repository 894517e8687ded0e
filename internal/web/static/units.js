// Shared by the views loaded on demand (compare, what-if, steps, ranks):
// sizes as the CLI prints them and small page helpers.

// human is internal/units.Human: "512 B" below 10 KiB, else two decimals
// of KiB, MiB or GiB with trailing zeros dropped ("1.5 GiB"). Go's
// FormatFloat rounds an exact tie to even where toFixed rounds it up, so
// ties are decided here (browsertests TestHumanMirrorsUnits).
export function human(n) {
  const KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024;
  if (n < 10 * KiB) return `${n} B`;
  if (n < MiB) return trimmed(n / KiB, 'KiB');
  if (n < GiB) return trimmed(n / MiB, 'MiB');
  return trimmed(n / GiB, 'GiB');
}

function trimmed(v, unit) {
  let s = v.toFixed(2);
  const t = v * 1000;
  if (Number.isInteger(t) && t % 10 === 5) { // an exact tie: half to even
    let q = Math.floor(t / 10);
    if (q % 2 === 1) q++;
    s = (q / 100).toFixed(2);
  }
  s = s.replace(/0+$/, '').replace(/\.$/, '');
  return `${s} ${unit}`;
}

// humanSigned is units.HumanSigned: "+20 MiB", "-512 B", "0".
export function humanSigned(d) {
  if (d > 0) return '+' + human(d);
  if (d < 0) return '-' + human(-d);
  return '0';
}

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
