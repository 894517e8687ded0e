// Which view is open: the file, device and view selectors, and opening
// a view (a timeline, the state history, the settings, or one of the
// views loaded on demand: compare, whatif, steps, ranks).

import { EXTRA_VIEWS, S, curFile, isTimeline } from './store.js';
import { $, showError } from './ui.js';
import { getJSON } from './units.js';
import { formatSize } from './sizes.js';
import { api, embedded } from './api.js';
import { writeHash } from './address.js';
import { cancelRefresh, openTimeline } from './timeline.js';
import { openState } from './state.js';

// filesWhenReady returns the file list once file id (or the first file)
// is decoded: gpumem serve decodes in the background while the page
// loads. Meanwhile it shows the decoding progress. The server answers
// files?wait at once when the file is decoded already or is not there:
// one request, where asking for the list first was one more beside the
// decode (a request is CPU in three of Chromium's processes).
export async function filesWhenReady(id) {
  if (embedded) return api.files();
  let done = false;
  const ready = getJSON('api/files?wait=' + id).finally(() => { done = true; });
  (async () => {
    // A fast load shows no progress box at all (and the browser spends
    // nothing on it while the server decodes).
    await new Promise(r => setTimeout(r, 300));
    while (!done) {
      let list;
      try { list = await api.files(); } catch (e) { break; }
      if (done) break;
      const f = list.files.find(f => f.id === id) || list.files[0];
      if (!f || !f.loading) break;
      const pct = f.size > 0 ? ` (${Math.floor(100 * f.done / f.size)}%)` : '';
      $('loading').textContent = `Loading ${f.name}: ${formatSize(f.done, false)}` +
        (f.size > 0 ? ` of ${formatSize(f.size, false)}${pct}` : '') + '…';
      $('loading').hidden = false;
      // Every half second: each poll is a request, a layout and a paint
      // while the server decodes on the same two cores (at 200 ms, the
      // 1 GB tile's load took Chromium 30-70 ms more CPU).
      await new Promise(r => setTimeout(r, 500));
    }
  })();
  let list;
  try { list = await ready; } finally { $('loading').hidden = true; }
  // File id is not there (closed): the first file, once it is decoded.
  const first = list.files[0];
  if (!list.files.some(f => f.id === id) && first && first.loading) return filesWhenReady(first.id);
  return list;
}

// fillSelectors fills the file and device selectors and sets the
// controls to S.p.
export function fillSelectors() {
  const fs = $('file');
  fs.innerHTML = '';
  for (const f of S.files) fs.add(new Option(f.name + (f.loading ? ' (loading)' : f.error ? ' (failed)' : ''), f.id));
  fs.value = S.p.file;
  const ds = $('device');
  ds.innerHTML = '';
  const f = curFile();
  $('close-file').hidden = embedded;
  for (const d of f.devices) ds.add(new Option(`${d.name || 'cuda:' + d.device} (${d.events} events, ${d.segments} segments)`, d.device));
  if (!f.devices.some(d => d.device === S.p.device)) S.p.device = f.defaultDevice;
  ds.value = S.p.device;
  $('view').value = S.p.view;
  $('mode').value = S.p.mode;
  $('detail').value = S.p.detail;
  const dev = f.devices.find(d => d.device === S.p.device);
  $('mode').options[1].disabled = !(dev && dev.hasTime);
  if (S.p.mode === 'time' && !(dev && dev.hasTime)) { S.p.mode = 'event'; $('mode').value = 'event'; }
}

// openView shows the view S.p names (h: the address parameters, or null).
export async function openView(h) {
  showError('');
  // A timeline refresh still under way belongs to the view being left:
  // it must neither draw nor mark this one ready.
  S.seq++;
  cancelRefresh();
  document.body.dataset.ready = '';
  // A torch.profiler output has no segments: the views drawn from them
  // say so, and what to record instead, rather than drawing nothing.
  const f = S.files && curFile();
  const missing = f && f.unavailable && f.unavailable[S.p.view];
  $('missing-view').hidden = !missing;
  $('missing').textContent = missing || '';
  $('timeline-view').hidden = !!missing || !isTimeline();
  $('state-view').hidden = !!missing || S.p.view !== 'state';
  $('settings-view').hidden = !!missing || S.p.view !== 'settings';
  $('extra-view').hidden = !!missing || !EXTRA_VIEWS.includes(S.p.view);
  document.querySelector('.tl-only').style.visibility = !missing && isTimeline() ? '' : 'hidden';
  if (missing) {
    document.body.dataset.ready = '1';
    writeHash();
    return;
  }
  try {
    if (isTimeline()) {
      await openTimeline(h); // its first window writes the address
      return;
    }
    if (S.p.view === 'state') await openState(h);
    else if (EXTRA_VIEWS.includes(S.p.view)) await openExtra();
    else await openSettings();
  } catch (e) {
    showError(String(e.message || e));
  }
  writeHash();
}

async function openExtra() {
  // A fresh element per opening: a view left before its answer came
  // writes into a detached one.
  const el = document.createElement('div');
  $('extra-view').replaceChildren(el);
  const mod = await import(`./${S.p.view}.js`);
  await mod.open({
    el, files: S.files, file: S.p.file, device: S.p.device,
    // go opens another view: the address changes and hashchange opens it.
    go: (p) => { location.hash = '#' + new URLSearchParams(p).toString(); },
  });
  document.body.dataset.ready = '1';
}

async function openSettings() {
  const r = await api.settings(S.p);
  $('settings').textContent = r.settings ? JSON.stringify(r.settings, null, 2) : 'No allocator settings found.';
  document.body.dataset.ready = '1';
}
