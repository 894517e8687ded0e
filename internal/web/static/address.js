// The page address: which file, device, view, window and selection it
// shows, read on load and on hashchange, written as the view changes.

import { EXTRA_VIEWS, S, VIEWS, isTimeline } from './store.js';
import { $ } from './ui.js';
import { embedded } from './api.js';

// readHash applies the address to S.p (and the controls it names) and
// returns its parameters, for the view to take its window and selection.
export function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  const p = S.p;
  if (h.has('file')) p.file = +h.get('file') || 0;
  if (h.has('device')) p.device = +h.get('device') || 0;
  if (h.has('view') && VIEWS.includes(h.get('view')) && !(embedded && EXTRA_VIEWS.includes(h.get('view')))) p.view = h.get('view');
  if (h.has('detail')) p.detail = Math.max(0, +h.get('detail') || 0);
  if (h.has('mode')) p.mode = h.get('mode') === 'time' ? 'time' : 'event';
  if (h.has('color') && ['category', 'stream'].includes(h.get('color'))) S.colorBy = h.get('color');
  if (h.has('frag')) $('fragcurve').checked = h.get('frag') === '1';
  if (h.has('frame')) $('search-frame').value = h.get('frame'); // a stack-frame search, as the Compare view opens a site
  return h;
}

// writeHash writes what is shown into the address, without a history
// entry.
export function writeHash() {
  const h = new URLSearchParams({ file: S.p.file, device: S.p.device, view: S.p.view });
  if (S.p.detail !== 15000) h.set('detail', S.p.detail);
  if (S.p.mode !== 'event') h.set('mode', S.p.mode);
  if (S.colorBy !== 'allocation') h.set('color', S.colorBy);
  if ($('fragcurve').checked) h.set('frag', '1');
  if (isTimeline()) {
    if (S.x0 !== S.lo || S.x1 !== S.hi) { h.set('x0', +S.x0.toPrecision(12)); h.set('x1', +S.x1.toPrecision(12)); }
    if (!S.yAuto) { h.set('y0', Math.round(S.y0)); h.set('y1', Math.round(S.y1)); }
    if (S.selId >= 0) h.set('sel', S.selId);
  }
  if (S.p.view === 'state' && S.stateIdx >= 0) h.set('event', S.stateIdx);
  const hash = '#' + h.toString();
  // An address changed by someone else (a link, the user) since our last
  // write is left alone: its hashchange is on its way and opens that view.
  if (location.hash !== S.lastHash) return;
  if (location.hash !== hash) history.replaceState(null, '', hash);
  S.lastHash = hash;
}
