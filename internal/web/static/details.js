// The details panel under the timeline: the text of the allocation(s)
// hovered or pinned.

import { S } from './store.js';
import { $, formatCount } from './ui.js';
import { api } from './api.js';
import { answersAvailable } from './answers.js';

// clearDetails puts back the details panel's prompt.
export function clearDetails() { $('details').textContent = DETAILS_PROMPT; }
const DETAILS_PROMPT = 'Hover over an allocation to see its details; click to pin it.';

async function elemDetails(id) {
  let e = S.elemCache.get(id);
  if (!e) {
    e = await api.elem(S.p, id);
    // Before the server has made the categories the details lack one:
    // ask again next time.
    if (e.category || !answersAvailable()) S.elemCache.set(id, e);
  }
  return e;
}

// showElem shows the details of id, or, when several allocations share
// the cursor's pixel, of all of them (ids, largest first).
export async function showElem(id, pin, ids = [id]) {
  if (id < 0) return;
  const list = ids.slice(0, 12);
  let es;
  try { es = await Promise.all(list.map(elemDetails)); } catch (err) { $('details').textContent = String(err.message || err); return; }
  if (!(pin || S.selId < 0 || S.selId === id)) return;
  // The cursor left (or moved on) while the details were fetched.
  if (!pin && S.selId !== id && S.hoverId !== id) return;
  const envNote = S.meta && id >= S.meta.elements ? "\nThe envelope is the pool's high-water mark of max(active, reserved); its blocks are drawn inside it." : '';
  // The category and why (gpumem peak's category_reason), once the
  // server has classified the device's allocations.
  const why = (e) => e.category ? `\ncategory: ${e.category} (${e.category_reason})` : '';
  if (es.length === 1) {
    $('details').textContent = es[0].text + why(es[0]) + envNote;
    return;
  }
  const more = ids.length > list.length ? ` (the largest ${list.length} shown)` : '';
  $('details').textContent = `${formatCount(ids.length)} allocations under the cursor, largest first${more}:\n\n` +
    es.map((e, k) => `[${k + 1}] ${e.text}${why(e)}`).join('\n\n');
}
