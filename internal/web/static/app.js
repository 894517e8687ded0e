// gpumem viewer: draws what the gpumem server (or the data embedded by
// "gpumem html") returns for the visible window on Canvas2D. This entry
// module starts the page; the views are modules around one store
// (store.js). Go inlines the whole module graph into the page as one
// script (internal/web/bundle.go), so that it loads in one request and
// from file://.

import { EXTRA_VIEWS, S, curFile, isTimeline } from './store.js';
import { $, showError } from './ui.js';
import { api, embedded } from './api.js';
import { readHash } from './address.js';
import { warmRaster } from './plot.js';
import { drawPlaceholder, plotSize } from './timeline.js';
import { hitTestAll, resetView, setView, setWindow, setupPlotEvents, zoom } from './interact.js';
import { setupStateEvents } from './state.js';
import { filesWhenReady, fillSelectors, openView } from './views.js';
import { setupControls } from './controls.js';

async function init() {
  // An exported page has no server: what only the server answers (the
  // panel of what is live at a clicked moment) is not promised.
  if (embedded) for (const el of document.querySelectorAll('.served-only')) el.hidden = true;
  S.lastHash = location.hash; // see writeHash
  if (embedded && embedded.initial) Object.assign(S.p, embedded.initial);
  // The page written by gpumem html has no server to answer these.
  if (embedded) for (const v of EXTRA_VIEWS) $('view').querySelector(`option[value="${v}"]`).remove();
  const h = readHash();
  // First paint in one round trip: the file list, the view's description
  // and its first (whole-range) window are asked for together; without a
  // device in the address the server picks memory_viz's default.
  if (!embedded && isTimeline()) {
    $('timeline-view').hidden = false;
    const p = { ...S.p, device: h.has('device') ? S.p.device : null };
    const x = h.has('x0') && h.has('x1') && +h.get('x1') > +h.get('x0') ? { x0: +h.get('x0'), x1: +h.get('x1') } : {};
    const y = h.has('y0') && h.has('y1') && +h.get('y1') > +h.get('y0') ? { y0: +h.get('y0'), y1: +h.get('y1') } : {};
    const { w, h: hgt } = plotSize();
    S.prefetch = { device: p.device, mode: p.mode, view: p.view, x, meta: api.meta(p), win: api.window(p, x.x0, x.x1, w, hgt, y.y0, y.y1) };
    S.prefetch.meta.catch(() => {}); S.prefetch.win.catch(() => {});
    drawPlaceholder();
  }
  try {
    const f = await filesWhenReady(S.p.file);
    S.files = f.files;
    if (!S.files.length) { showError('No snapshot loaded. Drop a snapshot file onto this page.'); return; }
    if (!curFile()) S.p.file = S.files[0].id;
    if (!h.has('device') && !embedded) S.p.device = curFile().defaultDevice;
    if (S.prefetch && S.prefetch.device === null) S.prefetch.device = S.p.device;
    if (S.prefetch) {
      // The server lays out the first view and answers its window now
      // (20-30 ms on the 80 MB tile): the page changes nothing on screen
      // meanwhile, and fills the selectors and opens the view once the
      // window is here, so that the selectors, the summary, the legend and
      // the plot change in the task that draws it, in one layout and one
      // frame. A frame for the selectors alone (a layout and a commit,
      // 10-15 ms of the renderer) began as the window came and held its
      // draw back. A window that takes longer (the 1 GB tile's, 130-200
      // ms) is not waited for: the selectors' frame is then drawn while
      // it comes, off the path to its paint.
      warmRaster();
      await Promise.race([S.prefetch.win.catch(() => {}), new Promise(r => setTimeout(r, 50))]);
    }
    fillSelectors();
    await openView(h);
  } catch (e) {
    showError(String(e.message || e));
  }
}

Object.assign(window.gpumem, { zoom, setWindow, setView, resetView, hitTestAll });
setupControls();
setupPlotEvents();
setupStateEvents();
init();
