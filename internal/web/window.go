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
//	               are summarised, 2: summarized is exact, else a bound)
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
	f := t.tl.QueryWith(t0, t1, q.W, q.H, q.Y0, q.Y1, replay.QueryOptions{Detail: detail})
	peak := 0.0
	for _, v := range f.ColMax {
		peak = max(peak, v)
	}
	nPoly, nPts := len(f.IDs), len(f.Points)/2
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
	flags := 0.0
	if f.Truncated {
		flags++
	}
	if f.SummaryExact {
		flags += 2
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
	tpp := (f.T1 - f.T0) / float64(f.Width)
	bpp := (f.Y1 - f.Y0) / float64(f.Height)
	timeAxis := q.Mode == "time" && t.hasTime() // else fromStep is the identity
	xOf := func(px float64) float64 {
		if timeAxis {
			return t.fromStep(f.T0+px*tpp, q.Mode) - q.X0
		}
		return f.T0 + px*tpp - q.X0
	}
	// Most points lie on a column's edge: their x is that edge's, found
	// once (on the time axis, a lookup in a table of every timestep).
	edge := make([]float64, q.W+1)
	for c := range edge {
		edge[c] = xOf(float64(c))
	}
	pts := f.Points[:2*nPts]
	for i := 0; i < len(pts); i += 2 {
		px := float64(pts[i])
		if c := int(px); float64(c) == px && c >= 0 && c <= q.W {
			put(edge[c])
		} else {
			put(xOf(px))
		}
	}
	for i := 1; i < len(pts); i += 2 {
		put(f.Y1 - float64(pts[i])*bpp)
	}
	for _, x := range edge {
		put(x)
	}
	for c := 0; c < q.W; c++ {
		put(f.ColMax[c])
	}
	for c := 0; c < q.W; c++ {
		put(f.ColMin[c])
	}
	f.Release()
	if at != len(out) { // a reused buffer's every byte is written
		panic(fmt.Sprintf("window answer: %d bytes written of %d", at, len(out)))
	}
	return out
}
