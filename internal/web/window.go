package web

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/gpumem/gpumem/internal/replay"
)

// windowHeader is the size of a window answer's header (Float64[10]).
const windowHeader = 80

// windowPolygons reads the polygon count from a window answer's header.
func windowPolygons(win []byte) int {
	return int(math.Float64frombits(binary.LittleEndian.Uint64(win[32:40])))
}

// windowQuery is a request for the visible part of a timeline.
type windowQuery struct {
	X0, X1 float64 // visible x range, in mode units
	Y0, Y1 float64 // visible byte range; Y1 <= Y0: the whole height
	W, H   int     // canvas size in pixels
	Mode   string  // "event" (timesteps) or "time" (time_us)
	// Detail is how many of the largest allocations intersecting the
	// window get their own polygon (the page's Detail control); the rest
	// are summarised. 0 draws none.
	Detail int
	// Slides asks for the slides encoding where the window comes from the
	// sweep (windowSlides; the page's requests do).
	Slides bool
}

// indexBesideFirst is the number of elements from which a timeline's
// window index (the stack's blocks and the buckets, Timeline.StartIndexes)
// is built beside its first window rather than after it. The build takes
// about 20 ms a million elements on one core; the first zoom comes 100-150
// ms after the first window's answer, while the page draws that window on
// the other core. On the 1 GB tile (5.3 M elements) the build, started
// after the answer, was not done by then, and the first two zooms were
// answered without it in 43-58 ms of CPU, against 15-30 ms with it. Beside
// the first window, whose answer needs no index and which the page waits
// for, the second core is otherwise idle: the address versions' pass and
// the rest of the background work wait for the user's requests. Below
// this size (4 M elements, an 80 ms build) the build is done before the
// first zoom when started after the answer, and the first window is not
// slowed by sharing the cores and the memory bandwidth with it: on the
// 264 MB tile (1.6 M elements) the first window's wall time rose from
// 77-190 to 280-340 ms at load 6 with the build beside it.
var indexBesideFirst = 1 << 22 // a variable for the tests

// beforeWindow is called before each window is answered. The first time,
// it sets the pause of the index build: the build waits while a request
// the user waits on is answered (between the requests rather than until
// the user pauses: a user zooming on and on would otherwise never get the
// index), except while the first window is: a big timeline's build starts
// beside it (indexBesideFirst).
func (t *timeline) beforeWindow(u *userRequests) {
	t.indexPause.Do(func() {
		t.tl.SetIndexPause(func() {
			if t.firstAnswered.Load() {
				u.waitAnswered()
			}
		})
		if t.tl.Len() >= indexBesideFirst {
			t.tl.StartIndexes()
		}
	})
}

// afterWindow is called once a window is answered: the index is built
// from then on, if it was not started beside the first window. After the
// first window it waits for the page to draw that window (or for
// drawnWait, or for the next window's answer): the draw's frame
// (Chromium's commit, raster and compositing, on its other threads) has
// the second core then. The build (12-20 ms on the 80 MB tile) is done
// long before the user's first zoom, which comes 60-80 ms after the paint
// in the viewer bench; a big timeline's starts beside the first window.
func (t *timeline) afterWindow() {
	if t.firstAnswered.Swap(true) || t.drawn == nil {
		t.tl.StartIndexes()
		return
	}
	go func() {
		wait := time.NewTimer(t.drawnWait)
		defer wait.Stop()
		select {
		case <-t.drawn:
		case <-wait.C:
		}
		t.tl.StartIndexes()
	}()
}

// A timeline's windows are answered as slides (windowSlides), where the
// reader takes them, once one of its answers had at least slidesMinPoints
// points and slidesPerPolygon a polygon: its elements slide under many
// frees, and the slides are a small part of the points. The 264 MB tile's
// widest windows have 146-288 points a polygon, 2.2-4.3 M in all (18-35
// MB as points, 0.9-1.3 MB as slides, which the page makes into points
// in 40-90 ms); the 80 MB tile's 9 a polygon (1.2 MB either way) and the
// 1 GB tile's 4-5: their points are sent, which the page reads as they
// come. Whatever the encoding, the page draws the same points.
var (
	slidesMinPoints  = 1 << 19 // a variable for the tests
	slidesPerPolygon = 32
)

// slidesAlways answers every window from the sweep as slides where the
// reader takes them (the tests).
var slidesAlways = false

// answerBufs holds the largest window answer given back once sent
// (putAnswer): a zoomed-out window of the 264 MB tile is 30-40 MB.
var answerBufs replay.Held[byte]

// putAnswer gives a window answer back once it is written.
func putAnswer(b []byte) { answerBufs.Put(b) }

// window answers q with replay's Query and encodes the frame as
// little-endian arrays, in data units so that the page can re-project
// them while the next window loads:
//
//	Float64[10]    x0, x1, y0, y1, nPolygons, nPoints, w, peakInWindow,
//	               summarized, flags (1: some intersecting allocations
//	               are summarised, 2: summarized is exact, else a bound;
//	               8: the next windows will come as slides, windowFlags)
//	Int32[nPoly]   element id (ids >= elements are private-pool envelopes)
//	Int32[nPoly]   kind (0 allocation or segment, 2 pool envelope)
//	Int32[nPoly]   point count of the polygon
//	Float32[nPts]  x - x0 (mode units)
//	Float32[nPts]  y (bytes)
//	Float32[w+1]   column edges, x - x0
//	Float32[w]     per-column highest total (bytes)
//	Float32[w]     per-column lowest total (bytes)
//
// Each polygon runs along its bottom edge left to right, then its top
// edge right to left. The summarised allocations lie in the grey band
// under the per-column highest total.
func (t *timeline) window(q windowQuery) []byte {
	q.W = min(max(q.W, 1), MaxWidth)
	q.H = min(max(q.H, 1), MaxWidth)
	lo, hi := t.xRange(q.Mode)
	if !(q.X1 > q.X0) || math.IsNaN(q.X0) || math.IsInf(q.X0, 0) || math.IsInf(q.X1, 0) {
		q.X0, q.X1 = lo, hi
	}
	t0, t1 := t.toStep(q.X0, q.Mode), t.toStep(q.X1, q.Mode)
	if !(t1 > t0) {
		t1 = t0 + 1e-6
	}
	if !(q.Y1 > q.Y0) || math.IsNaN(q.Y0) || math.IsInf(q.Y0, 0) || math.IsInf(q.Y1, 0) {
		q.Y0, q.Y1 = 0, float64(max(t.tl.PeakBytes(), 1))
	}
	detail := q.Detail
	if detail <= 0 {
		detail = -1 // replay's 0 is its default
	}
	slides := q.Slides && (t.slides.Load() || slidesAlways)
	f := t.tl.QueryWith(t0, t1, q.W, q.H, q.Y0, q.Y1, replay.QueryOptions{Detail: detail, Slides: slides})
	peak := 0.0
	for _, v := range f.ColMax {
		peak = max(peak, v)
	}
	if f.Slides != nil {
		return t.windowSlides(q, f, peak)
	}
	nPoly, nPts := len(f.IDs), len(f.Points)/2
	if nPts >= slidesMinPoints && nPts >= slidesPerPolygon*nPoly {
		t.slides.Store(true)
	}
	flags := windowFlags(f)
	if q.Slides && t.slides.Load() {
		flags += 8
	}
	// Written in place into an answer of its exact size: a zoomed-out
	// window of the 264 MB tile has 4.3 M points, and appending them
	// through closures, converting each x through the time axis's checks,
	// took 10-25 ms of its answer.
	out := answerBufs.Get(windowHeader + 12*nPoly + 8*nPts + 12*q.W + 4)
	at := 0
	put32 := func(v uint32) {
		binary.LittleEndian.PutUint32(out[at:], v)
		at += 4
	}
	for _, v := range []float64{q.X0, q.X1, q.Y0, q.Y1, float64(nPoly), float64(nPts), float64(q.W), peak, float64(f.Summarized), flags} {
		binary.LittleEndian.PutUint64(out[at:], math.Float64bits(v))
		at += 8
	}
	n := t.tl.Len()
	for _, id := range f.IDs {
		put32(uint32(id))
	}
	for _, id := range f.IDs {
		k := uint32(0)
		if int(id) >= n {
			k = 2
		}
		put32(k)
	}
	for i := range f.IDs {
		put32(uint32(f.Starts[i+1] - f.Starts[i]))
	}
	put := func(v float64) { put32(math.Float32bits(float32(v))) }
	ax := t.answerX(q, f)
	bpp := (f.Y1 - f.Y0) / float64(f.Height)
	pts := f.Points[:2*nPts]
	for i := 0; i < len(pts); i += 2 {
		put32(math.Float32bits(ax.of(pts[i])))
	}
	for i := 1; i < len(pts); i += 2 {
		// Converted once multiplied: never fused into one rounding, as
		// the page's copy (wincode.js) cannot be.
		put(f.Y1 - float64(float64(pts[i])*bpp))
	}
	at = putColumns(out, at, ax.edge, f)
	f.Release()
	if at != len(out) { // a reused buffer's every byte is written
		panic(fmt.Sprintf("window answer: %d bytes written of %d", at, len(out)))
	}
	return out
}

// windowFlags is a window answer's flags: 1 some intersecting
// allocations are summarised, 2 the summarised count is exact, 4 the
// answer carries the slides (windowSlides); window adds 8 when the
// answer has the points and the next windows will come as slides (the
// page then readies its reader while the user looks).
func windowFlags(f *replay.Frame) float64 {
	flags := 0.0
	if f.Truncated {
		flags++
	}
	if f.SummaryExact {
		flags += 2
	}
	if f.Slides != nil {
		flags += 4
	}
	return flags
}

// answerXs converts a frame's x (pixels) to the answer's (mode units
// from the window's x0).
type answerXs struct {
	edge []float64 // at each column edge
	xOf  func(px float64) float64
	w    int
}

// answerX returns f's x conversion. Most points lie on a column's edge:
// their x is that edge's, found once (on the time axis, a lookup in a
// table of every timestep).
func (t *timeline) answerX(q windowQuery, f *replay.Frame) answerXs {
	tpp := (f.T1 - f.T0) / float64(f.Width)
	timeAxis := q.Mode == "time" && t.hasTime() // else fromStep is the identity
	a := answerXs{edge: make([]float64, q.W+1), w: q.W}
	a.xOf = func(px float64) float64 {
		if timeAxis {
			return t.fromStep(f.T0+px*tpp, q.Mode) - q.X0
		}
		return f.T0 + px*tpp - q.X0
	}
	for c := range a.edge {
		a.edge[c] = a.xOf(float64(c))
	}
	return a
}

// of is the answer's x of a point at px.
func (a *answerXs) of(px float32) float32 {
	p := float64(px)
	if c := int(p); float64(c) == p && c >= 0 && c <= a.w {
		return float32(a.edge[c])
	}
	return float32(a.xOf(p))
}

// putColumns writes the column edges, highest and lowest totals, the
// end of every window answer, into out from at.
func putColumns(out []byte, at int, edge []float64, f *replay.Frame) int {
	put := func(v float64) {
		binary.LittleEndian.PutUint32(out[at:], math.Float32bits(float32(v)))
		at += 4
	}
	for _, x := range edge {
		put(x)
	}
	for _, v := range f.ColMax {
		put(v)
	}
	for _, v := range f.ColMin {
		put(v)
	}
	return at
}

// windowSlides encodes a frame that carries its slides (f.Slides): the
// page makes the polygons' points (wincode.js, decodeWindow), the same
// as window's, bit for bit. Little-endian, Float64 arrays first:
//
//	Float64[10]    as window's: x0, x1, y0, y1, nElements, 0, w,
//	               peakInWindow, summarized, flags (+4)
//	Float64[8]     t0, t1 (timesteps), h, nGroups, nSlides, nRamps, 0, 0
//	Float64[nEl]   per drawn element, up the stack: base, size, first and
//	Float64[nEl]   last sample (timesteps)
//	Float64[nEl]
//	Float64[nEl]
//	Float64[w+1]   the column edges the sweep samples at (timesteps)
//	Float64[nGr]   the groups' times
//	Float64[nSl]   the slides' bytes
//	Float64[nRa]   the ramping frees' bytes and ends
//	Float64[nRa]
//	Int32[nEl]     element id and place among the polygons (largest first)
//	Int32[nEl]
//	Float32[nEl]   the answer's x (as window's) of the first and last sample
//	Float32[nEl]
//	Float32[w+1]   the answer's x of the sweep's column edges
//	Int32[nGr]     slides in each group
//	Int32[nSl]     the slides' first drawn element above (k)
//	Int32[nRa]     the ramping frees' first drawn element above
//	Float32[w+1]   column edges, x - x0 (as window's)
//	Float32[w]     per-column highest total
//	Float32[w]     per-column lowest total
func (t *timeline) windowSlides(q windowQuery, f *replay.Frame, peak float64) []byte {
	sl := f.Slides
	nv, nG, nS, nR := len(sl.IDs), len(sl.GroupX), len(sl.SlideQ), len(sl.RampQ)
	n64 := 10 + 8 + 4*nv + (q.W + 1) + nG + nS + 2*nR
	n32 := 4*nv + (q.W + 1) + nG + nS + nR + 3*q.W + 1
	out := answerBufs.Get(8*n64 + 4*n32)
	at := 0
	put64 := func(v float64) {
		binary.LittleEndian.PutUint64(out[at:], math.Float64bits(v))
		at += 8
	}
	put32 := func(v uint32) {
		binary.LittleEndian.PutUint32(out[at:], v)
		at += 4
	}
	for _, v := range []float64{q.X0, q.X1, q.Y0, q.Y1, float64(nv), 0, float64(q.W), peak, float64(f.Summarized), windowFlags(f),
		f.T0, f.T1, float64(f.Height), float64(nG), float64(nS), float64(nR), 0, 0} {
		put64(v)
	}
	for _, a := range [][]float64{sl.Base, sl.Size, sl.StartX, sl.EndX, sl.ColX, sl.GroupX, sl.SlideBytes, sl.RampSize, sl.RampEnd} {
		for _, v := range a {
			put64(v)
		}
	}
	for _, a := range [][]int32{sl.IDs, sl.Rank} {
		for _, v := range a {
			put32(uint32(v))
		}
	}
	// The x of a sample at x timesteps, as the sweep's points have it
	// (query's px) and then window's answer.
	ax := t.answerX(q, f)
	tpp := (f.T1 - f.T0) / float64(f.Width)
	for _, a := range [][]float64{sl.StartX, sl.EndX, sl.ColX} {
		for _, x := range a {
			put32(math.Float32bits(ax.of(float32((x - f.T0) / tpp))))
		}
	}
	for _, a := range [][]int32{sl.GroupN, sl.SlideQ, sl.RampQ} {
		for _, v := range a {
			put32(uint32(v))
		}
	}
	at = putColumns(out, at, ax.edge, f)
	if at != len(out) { // a reused buffer's every byte is written
		panic(fmt.Sprintf("window answer: %d bytes written of %d", at, len(out)))
	}
	return out
}
