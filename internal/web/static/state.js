// The Allocator State History view: the virtual list of trace events
// and the state after the one chosen (drawn by segments.js).

import { S } from './store.js';
import { $, formatCount } from './ui.js';
import { escapeHTML } from './units.js';
import { formatSize } from './sizes.js';
import { api, embedded, q } from './api.js';
import { writeHash } from './address.js';
import { drawState, stateHover } from './segments.js';

// ROW is an event row's height in the list, in CSS pixels.
const ROW = 20;

// openState opens the state history at the event the address names
// (h), or the last.
export async function openState(h) {
  S.eventPages = new Map();
  const first = await api.events(S.p, 0, 200);
  S.eventsTotal = first.total;
  S.eventPages.set(0, first.lines);
  $('events-head').textContent = `${formatCount(first.total)} events (click or use ↑/↓ to choose the moment shown on the right)`;
  $('events-spacer').style.height = `${first.total * ROW}px`;
  let idx = first.total - 1;
  if (h && h.has('event')) idx = Math.min(Math.max(+h.get('event'), -1), first.total - 1);
  const ev = $('events');
  await selectEvent(idx);
  ev.scrollTop = Math.max(0, (idx + 1) * ROW - ev.clientHeight / 2);
  renderRows();
}

async function eventLine(i) {
  const page = Math.floor(i / 200);
  if (!S.eventPages.has(page)) {
    S.eventPages.set(page, null);
    const r = await api.events(S.p, page * 200, 200);
    S.eventPages.set(page, r.lines);
    renderRows();
  }
  const lines = S.eventPages.get(page);
  return lines ? lines[i - page * 200] : null;
}

function renderRows() {
  const ev = $('events');
  const top = ev.scrollTop, h = ev.clientHeight;
  const i0 = Math.max(0, Math.floor(top / ROW) - 5), i1 = Math.min(S.eventsTotal, Math.ceil((top + h) / ROW) + 5);
  for (const r of [...ev.querySelectorAll('.row')]) r.remove();
  const frag = document.createDocumentFragment();
  for (let i = i0; i < i1; i++) {
    const page = S.eventPages.get(Math.floor(i / 200));
    let text = page ? page[i % 200] : null;
    if (text == null) { eventLine(i); text = '…'; }
    const d = document.createElement('div');
    d.className = 'row' + (i === S.stateIdx ? ' sel' : '');
    d.style.top = `${i * ROW}px`;
    d.dataset.i = i;
    d.innerHTML = `<span class="i">${i}</span>${escapeHTML(text.split('\n')[0])}`;
    frag.appendChild(d);
  }
  ev.appendChild(frag);
}

async function selectEvent(idx) {
  S.stateIdx = idx;
  renderRows();
  const seq = ++S.seq;
  const t0 = performance.now();
  const st = await api.state(S.p, idx);
  if (seq !== S.seq) return;
  const tf = performance.now();
  S.state = st;
  const pct = (x) => `${(100 * x).toFixed(1)}%`;
  $('state-totals').innerHTML = `<span id="state-text" style="margin:0;color:inherit;font-weight:600">${escapeHTML(st.text)}</span>` +
    `<span>${formatCount(st.segments.length + (st.omitted || 0))} segments${st.omitted ? ` (drawing the largest ${formatCount(st.segments.length)})` : ''}</span>` +
    `<span>free in segments ${formatSize(st.free, false)} (fragmentation ${pct(st.fragmentation)}, largest free ${formatSize(st.largestFree, false)})</span>` +
    `<span>rounding waste ${formatSize(st.rounding, false)}</span>` +
    (embedded ? '' : `<a id="state-flame" target="_blank" href="api/flame?${q(S.p, { idx })}">flamegraph of this moment ↗</a>`);
  $('state-stack').textContent = idx >= 0 ? `${st.text}\n${st.event}\n${st.stack}` : 'State before the first event.';
  drawState();
  // [fetch+parse, draw] ms of each state shown; the bench logs them.
  window.gpumem.statePhases = (window.gpumem.statePhases || []).slice(-9).concat([[Math.round(tf - t0), Math.round(performance.now() - tf)]]);
  writeHash();
  document.body.dataset.ready = '1';
}

// setupStateEvents wires the event list and the state canvas.
export function setupStateEvents() {
  const ev = $('events');
  ev.addEventListener('scroll', renderRows);
  ev.addEventListener('click', (e) => {
    const r = e.target.closest('.row');
    if (r) selectEvent(+r.dataset.i);
  });
  const c = $('state-canvas');
  c.addEventListener('mousemove', (e) => {
    const r = c.getBoundingClientRect();
    $('state-hover').textContent = stateHover(e.clientX - r.left, e.clientY - r.top);
  });
  new ResizeObserver(() => { if (S.p.view === 'state' && S.state) drawState(); }).observe(c);
}

// stepEvent moves the chosen event by d, keeping it in view.
export function stepEvent(d) {
  const idx = Math.min(Math.max(S.stateIdx + d, 0), S.eventsTotal - 1);
  if (idx === S.stateIdx) return;
  const ev = $('events');
  const y = idx * ROW;
  if (y < ev.scrollTop) ev.scrollTop = y;
  else if (y + ROW > ev.scrollTop + ev.clientHeight) ev.scrollTop = y + ROW - ev.clientHeight;
  selectEvent(idx);
}
