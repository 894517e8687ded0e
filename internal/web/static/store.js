// The page's one store: the state object S (what is shown and the data
// it is drawn from), read and written by every view module, and a small
// publish/subscribe for the signals that cross views without one module
// importing the other's internals.

import { formatSize } from './sizes.js';

// VIEWS are the views, in the View selector's order (keys 1-5 pick the
// first five).
export const VIEWS = ['active', 'private', 'state', 'segments', 'settings', 'compare', 'whatif', 'steps', 'ranks'];
// The views that answer what the CLI answers (diff, sim, steps, ranks):
// each its own module, loaded when first opened (none before first paint).
export const EXTRA_VIEWS = ['compare', 'whatif', 'steps', 'ranks'];

// S is the state: the request parameters (p: file, device, view, detail,
// x-axis mode), the timeline's data and view, the selection and searches,
// the state history's position and the answers shown. Its fields are
// plain data; a module that changes what others draw calls their
// functions or publishes (below). The browser tests read it as
// window.gpumem.S.
export const S = {
  files: [], p: { file: 0, device: 0, view: 'active', detail: 15000, mode: 'event' },
  meta: null, win: null, curves: null, full: null, x0: 0, x1: 1, lo: 0, hi: 1,
  // The visible bytes: [y0, y1], or the whole height while yAuto.
  y0: 0, y1: 1, yAuto: true,
  hoverId: -1, selId: -1, elemCache: new Map(), addrMatch: new Set(), frameMatch: new Set(),
  seq: 0, stateIdx: -1, eventsTotal: 0, eventPages: new Map(), layoutPlot: null, stateLayout: null,
  // Colour by category or stream: a class per allocation and the legend's
  // names (null: colour by allocation). The answer panel: the moment it
  // answers for (x, null = the peak) and the allocations of the row clicked.
  colorBy: 'allocation', classes: null, classNames: [], moment: null, siteMatch: new Set(), answerSeq: 0,
};
window.gpumem = { S, formatSize, refreshed: 0 };

// Topics: 'plot-overlay' (ctx, X, pw, ph): drawn over the timeline's plot,
// inside its clip, after the markers (the answers' moment line and
// fragmentation curve). A subscriber is called in the order subscribed.
const subscribers = new Map();

// subscribe calls fn on each publish of topic.
export function subscribe(topic, fn) {
  if (!subscribers.has(topic)) subscribers.set(topic, []);
  subscribers.get(topic).push(fn);
}

// publish calls topic's subscribers with args.
export function publish(topic, ...args) {
  for (const fn of subscribers.get(topic) || []) fn(...args);
}

// isTimeline says whether the view shown is one of the timelines.
export const isTimeline = () => ['active', 'private', 'segments'].includes(S.p.view);

// curFile is the file shown: ids stay the same when a file is closed.
export function curFile() { return S.files.find(f => f.id === S.p.file); }
