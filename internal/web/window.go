package web

import (
	"encoding/binary"
	"math"

	"github.com/gpumem/gpumem/internal/replay"
)

// windowQuery is a request for the visible part of a timeline.
type windowQuery struct {
	X0, X1 float64 // visible x range, in mode units
	W, H   int     // canvas size in pixels
	YMax   float64 // 0: fit the window's peak
	Mode   string  // "event" (timesteps) or "time" (time_us)
	// MaxPolygons caps the polygons (the page's Detail control).
	MaxPolygons int
}

// window answers q with replay's Query and encodes the frame as
// little-endian arrays, in data units so that the page can re-project
// them while the next window loads:
//
//	Float64[8]     x0, x1, yMax, nPolygons, nPoints, w, peakInWindow, truncated
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
// edge right to left. Allocations too small to get a polygon lie in the
// grey band under the per-column highest total.
func (t *timeline) window(q windowQuery) []byte {
	q.W = min(max(q.W, 1), 16384)
	q.H = min(max(q.H, 1), 16384)
	lo, hi := t.xRange(q.Mode)
	if !(q.X1 > q.X0) || math.IsNaN(q.X0) || math.IsInf(q.X0, 0) || math.IsInf(q.X1, 0) {
		q.X0, q.X1 = lo, hi
	}
	t0, t1 := t.toStep(q.X0, q.Mode), t.toStep(q.X1, q.Mode)
	if !(t1 > t0) {
		t1 = t0 + 1e-6
	}
	opt := replay.QueryOptions{MaxPolygons: q.MaxPolygons}
	full := float64(max(t.tl.PeakBytes(), 1))
	yMax := q.YMax
	if yMax <= 0 {
		yMax = full
	}
	f := t.tl.QueryWith(t0, t1, q.W, q.H, 0, yMax, opt)
	peak := 0.0
	for _, v := range f.ColMax {
		peak = max(peak, v)
	}
	if q.YMax <= 0 && peak > 0 && peak < 0.7*yMax {
		// Zoomed into a low region: ask again at the window's own scale so
		// that allocations that are now a pixel tall get polygons.
		yMax = peak
		f = t.tl.QueryWith(t0, t1, q.W, q.H, 0, yMax, opt)
	}
	if q.YMax <= 0 && peak > 0 {
		yMax = peak
	}
	nPoly, nPts := len(f.IDs), len(f.Points)/2
	out := make([]byte, 0, 64+12*nPoly+8*nPts+12*q.W+4)
	trunc := 0.0
	if f.Truncated {
		trunc = 1
	}
	for _, v := range []float64{q.X0, q.X1, yMax, float64(nPoly), float64(nPts), float64(q.W), peak, trunc} {
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
	}
	n := t.tl.Len()
	for _, id := range f.IDs {
		out = binary.LittleEndian.AppendUint32(out, uint32(id))
	}
	for _, id := range f.IDs {
		k := uint32(0)
		if int(id) >= n {
			k = 2
		}
		out = binary.LittleEndian.AppendUint32(out, k)
	}
	for i := range f.IDs {
		out = binary.LittleEndian.AppendUint32(out, uint32(f.Starts[i+1]-f.Starts[i]))
	}
	put := func(v float64) { out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v))) }
	tpp := (f.T1 - f.T0) / float64(f.Width)
	bpp := (f.Y1 - f.Y0) / float64(f.Height)
	xOf := func(px float64) float64 { return t.fromStep(f.T0+px*tpp, q.Mode) - q.X0 }
	for i := 0; i < nPts; i++ {
		put(xOf(float64(f.Points[2*i])))
	}
	for i := 0; i < nPts; i++ {
		put(f.Y1 - float64(f.Points[2*i+1])*bpp)
	}
	for c := 0; c <= q.W; c++ {
		put(xOf(float64(c)))
	}
	for c := 0; c < q.W; c++ {
		put(f.ColMax[c])
	}
	for c := 0; c < q.W; c++ {
		put(f.ColMin[c])
	}
	return out
}
