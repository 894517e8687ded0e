// The header's controls, the keyboard, hashchange and drag-and-drop
// upload.

import { S, VIEWS, curFile, isTimeline } from './store.js';
import { $, showError } from './ui.js';
import { formatSize } from './sizes.js';
import { api, embedded } from './api.js';
import { readHash, writeHash } from './address.js';
import { drawPlot, yWindow } from './plot.js';
import { loadClasses, loadFragCurve } from './answers.js';
import { plotSize, refreshWindow, renderLegend, renderSummary, runSearch } from './timeline.js';
import { resetView, setView, setWindow, zoom } from './interact.js';
import { stepEvent } from './state.js';
import { filesWhenReady, fillSelectors, openView } from './views.js';

// setupControls wires the header's controls, the keys, hashchange and
// drag-and-drop.
export function setupControls() {
  $('file').addEventListener('change', async () => {
    S.p.file = +$('file').value;
    if (curFile().loading) S.files = (await filesWhenReady(S.p.file)).files;
    S.p.device = curFile().defaultDevice;
    fillSelectors(); openView(null);
  });
  // Close the file shown: the server forgets it (uploads are kept until
  // closed, or until newer uploads push the oldest out).
  $('close-file').addEventListener('click', async () => {
    try {
      const r = await fetch('api/files/' + S.p.file, { method: 'DELETE' });
      const j = await r.json();
      if (!r.ok) throw new Error(j.error || r.statusText);
      S.files = j.files;
      if (!S.files.length) { showError('No snapshot loaded. Drop a snapshot file onto this page.'); return; }
      S.p.file = S.files[0].id; S.p.device = S.files[0].defaultDevice;
      fillSelectors(); openView(null);
    } catch (e) { showError(`Could not close the file: ${e.message || e}`); }
  });
  $('device').addEventListener('change', () => { S.p.device = +$('device').value; fillSelectors(); openView(null); });
  $('view').addEventListener('change', () => { S.p.view = $('view').value; openView(null); });
  $('mode').addEventListener('change', () => { S.p.mode = $('mode').value; openView(null); });
  $('detail').addEventListener('change', () => { S.p.detail = Math.max(0, Math.round(+$('detail').value || 0)); openView(null); });
  $('totals').addEventListener('change', () => { renderLegend(); refreshWindow(false); });
  $('fragcurve').addEventListener('change', () => {
    S.fragCurve = null; renderLegend(); writeHash();
    if ($('fragcurve').checked) loadFragCurve(S.x0, S.x1, plotSize().w); else drawPlot();
  });
  $('colorby').addEventListener('change', async () => {
    S.colorBy = $('colorby').value;
    await loadClasses(S.seq);
    renderLegend(); drawPlot(); writeHash();
  });
  $('search-addr').addEventListener('input', runSearch);
  $('search-frame').addEventListener('input', runSearch);
  $('help-btn').addEventListener('click', () => { $('help').hidden = !$('help').hidden; });
  $('help').addEventListener('click', () => { $('help').hidden = true; });
  document.addEventListener('keydown', (e) => {
    if (e.target.tagName === 'INPUT' || e.target.tagName === 'SELECT') {
      if (e.key === 'Escape') e.target.blur();
      return;
    }
    if (e.key === '?') { $('help').hidden = !$('help').hidden; return; }
    if (e.key === 'Escape') {
      $('help').hidden = true;
      if (S.selId >= 0) { S.selId = -1; drawPlot(); writeHash(); }
      return;
    }
    if (e.key >= '1' && e.key <= '5') { S.p.view = VIEWS[+e.key - 1]; $('view').value = S.p.view; openView(null); return; }
    if (isTimeline() && S.win) {
      const span = S.x1 - S.x0;
      switch (e.key) {
        case '+': case '=': zoom(1 / 1.5, 0.5, 0.5, 0); break;
        case '-': case '_': zoom(1.5, 0.5, 0.5, 0); break;
        case 'ArrowLeft': setWindow(S.x0 - span * 0.2, S.x1 - span * 0.2, 0); break;
        case 'ArrowUp': case 'ArrowDown': {
          const [y0, y1] = yWindow(), d = (y1 - y0) * 0.2 * (e.key === 'ArrowUp' ? 1 : -1);
          setView(S.x0, S.x1, y0 + d, y1 + d, 0); break;
        }
        case 'ArrowRight': setWindow(S.x0 + span * 0.2, S.x1 + span * 0.2, 0); break;
        case '0': case 'Home': resetView(0); break;
        case '/': $('search-frame').focus(); break;
        default: return;
      }
      e.preventDefault();
    } else if (S.p.view === 'state') {
      if (e.key === 'ArrowUp') { stepEvent(-1); e.preventDefault(); }
      if (e.key === 'ArrowDown') { stepEvent(1); e.preventDefault(); }
    }
  });
  window.addEventListener('hashchange', () => {
    S.lastHash = location.hash;
    const before = JSON.stringify(S.p);
    const h = readHash();
    if (JSON.stringify(S.p) !== before) { fillSelectors(); openView(h); }
  });
  // Drag-and-drop upload.
  let depth = 0;
  document.addEventListener('dragenter', (e) => { if (!embedded) { e.preventDefault(); depth++; $('drop').hidden = false; } });
  document.addEventListener('dragleave', () => { if (--depth <= 0) { depth = 0; $('drop').hidden = true; } });
  document.addEventListener('dragover', (e) => e.preventDefault());
  document.addEventListener('drop', async (e) => {
    e.preventDefault(); depth = 0; $('drop').hidden = true;
    if (embedded) { showError('This exported page cannot open other files; run gpumem serve.'); return; }
    for (const f of e.dataTransfer.files) await upload(f);
  });
}

async function upload(f) {
  showError('');
  $('summary').textContent = `Uploading and decoding ${f.name} (${formatSize(f.size, false)})…`;
  try {
    // A non-simple type: the server refuses the simple ones, which any
    // other site's page could send without asking first.
    const r = await fetch('api/upload?name=' + encodeURIComponent(f.name),
      { method: 'POST', body: f, headers: { 'Content-Type': 'application/octet-stream' } });
    const j = await r.json();
    if (!r.ok) throw new Error(j.error || r.statusText);
    S.files = (await api.files()).files;
    S.p.file = j.id; S.p.device = j.file.defaultDevice;
    fillSelectors();
    await openView(null);
  } catch (e) {
    showError(`Could not open ${f.name}: ${e.message || e}`);
    if (S.meta) renderSummary();
  }
}
