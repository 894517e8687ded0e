// The page for a gpumem watch log: per device, used memory over time with
// the device's total, each report period's peak and the alerts; under it,
// each process's memory. Data: GET /api/watch?log=N (see watchlog.go).

import { python as fmtBytes } from './sizes.js'; // PyTorch's _format_size ("42.0GiB"), as the rest of gpumem

const COLORS = ['#1f6feb', '#d1242f', '#1a7f37', '#8250df', '#bf8700', '#0a7ea4', '#cf222e', '#6e7781'];

function fmtTime(start, s) {
  const d = new Date(Date.parse(start) + s * 1000);
  return d.toISOString().slice(11, 23);
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  Object.assign(e, attrs || {});
  for (const k of kids) e.append(k);
  return e;
}

const tip = document.getElementById('tip');

// chart draws series [{t:[], v:[], color, width}] against x in [0, tMax] and
// y in [0, yMax]; marks are extra drawings (peaks, alerts) in data space.
function chart(box, tMax, yMax, series, marks, start) {
  const canvas = el('canvas');
  box.append(canvas);
  const pad = { l: 64, r: 8, t: 8, b: 18 };
  function draw() {
    const dpr = window.devicePixelRatio || 1;
    const w = box.clientWidth, h = box.clientHeight;
    canvas.width = w * dpr; canvas.height = h * dpr;
    const g = canvas.getContext('2d');
    g.scale(dpr, dpr);
    g.clearRect(0, 0, w, h);
    const X = (t) => pad.l + (tMax > 0 ? t / tMax : 0) * (w - pad.l - pad.r);
    const Y = (v) => h - pad.b - (yMax > 0 ? v / yMax : 0) * (h - pad.t - pad.b);
    g.font = '11px system-ui, sans-serif';
    g.fillStyle = '#5b6670'; g.strokeStyle = '#eef0f3'; g.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const v = yMax * i / 4, y = Math.round(Y(v)) + 0.5;
      g.beginPath(); g.moveTo(pad.l, y); g.lineTo(w - pad.r, y); g.stroke();
      g.fillText(fmtBytes(v), 4, y + 4);
    }
    for (let i = 0; i <= 5; i++) {
      const t = tMax * i / 5;
      g.fillText(fmtTime(start, t).slice(0, 8), Math.min(X(t), w - 52), h - 4);
    }
    for (const m of marks) m(g, X, Y);
    for (const s of series) {
      g.strokeStyle = s.color; g.lineWidth = s.width || 1.5; g.setLineDash(s.dash || []);
      g.beginPath();
      for (let i = 0; i < s.t.length; i++) {
        const x = X(s.t[i]), y = Y(s.v[i]);
        if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
      }
      g.stroke();
    }
    g.setLineDash([]);
  }
  draw();
  new ResizeObserver(draw).observe(box);
  canvas.addEventListener('mousemove', (ev) => {
    const r = canvas.getBoundingClientRect();
    const t = (ev.clientX - r.left - pad.l) / (r.width - pad.l - pad.r) * tMax;
    if (t < 0 || t > tMax) { tip.hidden = true; return; }
    const lines = [fmtTime(start, t)];
    for (const s of series) {
      if (!s.label || s.t.length === 0) continue;
      let i = s.t.findIndex((x) => x >= t);
      if (i < 0) i = s.t.length - 1;
      lines.push(s.label + '  ' + fmtBytes(s.v[i]));
    }
    tip.textContent = lines.join('\n');
    tip.style.left = (ev.clientX + 14) + 'px'; tip.style.top = (ev.clientY + 10) + 'px';
    tip.hidden = false;
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
}

function render(data) {
  data.devices = data.devices || [];
  data.alerts = data.alerts || [];
  for (const d of data.devices) { d.reports = d.reports || []; d.procs = d.procs || []; }
  const main = document.getElementById('watch');
  main.replaceChildren();
  let tMax = 0;
  for (const d of data.devices) if (d.t.length) tMax = Math.max(tMax, d.t[d.t.length - 1]);
  document.getElementById('meta').textContent =
    `${data.backend || '?'} · from ${data.start.replace('T', ' ').slice(0, 19)} UTC · ${tMax.toFixed(1)} s` +
    (data.truncated ? ' · the last line was cut off (skipped)' : '');
  if (data.devices.length === 0) {
    main.append(el('p', { textContent: 'This log has no samples.' }));
    return;
  }
  for (const d of data.devices) {
    const id = d.mig != null ? `${d.gpu}/${d.mig}` : `${d.gpu}`;
    const peak = d.used.reduce((a, b) => Math.max(a, b), 0);
    const box = el('section', { className: 'dev' });
    // In the page before its charts, which draw at their laid-out size
    // (drawn outside it, they were 0 wide until the resize observer ran,
    // after the page said it was ready).
    main.append(box);
    box.append(el('h2', { textContent: `GPU ${id}  ${d.name || ''}` }),
      el('div', { className: 'sub', textContent: `${d.uuid} · total ${fmtBytes(d.total)} · peak ${fmtBytes(peak)} · ${d.samples} samples, ${d.reports.length} report periods` }));
    const keys = el('div', { className: 'keys' });
    const key = (color, text, dash) => keys.append(el('span', {}, el('span', { className: 'ln', style: `border-top-color:${color};border-top-style:${dash ? 'dashed' : 'solid'}` }), text));
    key('#1d232a', 'used'); key('#8c959f', 'total', true); key('#d1242f', 'peak of each report period'); key('#bf8700', 'alert');
    box.append(keys);
    const c1 = el('div', { className: 'chart' });
    box.append(c1);
    const marks = [
      (g, X, Y) => { // report periods: the peak as a step line over its period
        g.strokeStyle = '#d1242f'; g.lineWidth = 1;
        for (const r of d.reports) {
          g.beginPath(); g.moveTo(X(r.start), Y(r.peak)); g.lineTo(X(r.end), Y(r.peak)); g.stroke();
          g.beginPath(); g.arc(X(r.peak_t), Y(r.peak), 2.5, 0, 2 * Math.PI); g.fillStyle = '#d1242f'; g.fill();
        }
      },
      (g, X, Y) => {
        g.strokeStyle = '#bf8700'; g.lineWidth = 1;
        for (const a of data.alerts) {
          if (a.gpu !== d.gpu || (a.mig ?? null) !== (d.mig ?? null)) continue;
          g.beginPath(); g.moveTo(X(a.t), Y(0)); g.lineTo(X(a.t), Y(d.total)); g.stroke();
        }
      },
    ];
    const series = [
      { t: [0, tMax], v: [d.total, d.total], color: '#8c959f', dash: [4, 3], width: 1 },
      { t: d.t, v: d.used, color: '#1d232a', label: 'used' },
    ];
    chart(c1, tMax, d.total, series, marks, data.start);
    if (d.procs.length) {
      const pkeys = el('div', { className: 'keys' });
      const ps = d.procs.map((p, i) => {
        const color = COLORS[i % COLORS.length];
        pkeys.append(el('span', {}, el('span', { className: 'ln', style: `border-top-color:${color}` }), `pid ${p.pid} ${p.cmd}`));
        return { t: p.t, v: p.used, color, label: `pid ${p.pid}` };
      });
      const c2 = el('div', { className: 'chart procs' });
      box.append(c2, pkeys);
      const pmax = Math.max(...d.procs.map((p) => p.used.reduce((a, b) => Math.max(a, b), 0)));
      chart(c2, tMax, pmax * 1.05 || 1, ps, [], data.start);
    }
  }
}

async function load(n) {
  const err = document.getElementById('error');
  try {
    const res = await fetch('/api/watch?log=' + n);
    if (!res.ok) throw new Error(await res.text());
    const data = await res.json();
    const sel = document.getElementById('log');
    if (sel.options.length !== data.logs.length) {
      sel.replaceChildren(...data.logs.map((name, i) => el('option', { value: i, textContent: name })));
    }
    sel.value = String(n);
    document.title = 'gpumem: ' + data.name;
    render(data);
    document.body.dataset.ready = '1';
    err.hidden = true;
  } catch (e) {
    err.textContent = 'gpumem: ' + e.message;
    err.hidden = false;
  }
}

document.getElementById('log').addEventListener('change', (ev) => load(Number(ev.target.value)));
load(Number(new URLSearchParams(location.search).get('log') || 0));
