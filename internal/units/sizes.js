// Sizes as gpumem's Go code prints them (internal/units), for every page
// and for the flamegraph SVG's script (which inlines this file with its
// exports dropped): the one JavaScript copy of these rules, checked
// against the Go functions in Chromium (browsertests TestHumanMirrorsUnits).
// Go's FormatFloat rounds an exact tie to even where toFixed rounds it up,
// so ties are decided here.

// human is internal/units.Human: "512 B" below 10 KiB, else two decimals
// of KiB, MiB or GiB with trailing zeros dropped ("1.5 GiB").
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

// python is units.Python, PyTorch's _format_size: "512.0B", "42.0GiB".
export function python(n) {
  let num = n;
  for (const unit of ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei', 'Zi']) {
    if (Math.abs(num) < 1024) return fixed1(num) + unit + 'B';
    num /= 1024;
  }
  return fixed1(num) + 'YiB';
}

// fixed1 is strconv.FormatFloat(v, 'f', 1, 64): toFixed(1) but for an
// exact tie, which goes to the even digit.
function fixed1(v) {
  const a = Math.abs(v), t = a * 20;
  if (Number.isInteger(t) && t % 2 === 1) {
    let q = Math.floor(a * 10);
    if (q % 2 === 1) q++;
    return (v < 0 ? '-' : '') + (q / 10).toFixed(1);
  }
  return v.toFixed(1);
}

// formatSize is memory_viz's JavaScript formatSize, which units.Viz and
// VizShort (showBytes false) mirror: toFixed's own rounding, as memory_viz.
export function formatSize(num, showBytes = true) {
  const orig = num;
  for (const unit of ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei', 'Zi']) {
    if (Math.abs(num) < 1024) {
      return showBytes ? `${num.toFixed(1)}${unit}B (${orig} bytes)` : `${num.toFixed(1)}${unit}B`;
    }
    num /= 1024;
  }
  return `${num.toFixed(1)}YiB`;
}
