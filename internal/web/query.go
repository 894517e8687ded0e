package web

import (
	"encoding/binary"
	"math"
	"sort"
)

// xAxis maps timeline steps to x coordinates: event index or time_us.
type xAxis []float64

// stepAt returns the last step whose x is <= x (0 if none).
func (a xAxis) stepAt(x float64) int {
	i := sort.Search(len(a), func(i int) bool { return a[i] > x })
	if i == 0 {
		return 0
	}
	return i - 1
}

func (tl *timeline) axis(mode string) xAxis {
	if mode == "time" && tl.HasTime {
		return tl.stepTime()
	}
	return tl.StepEvent
}

// windowQuery is a request for the visible part of a timeline.
type windowQuery struct {
	X0, X1 float64 // visible x range
	W, H   int     // canvas size in pixels
	YMax   float64 // 0: fit the window's peak
	Mode   string  // "event" or "time"
}

// window encodes what is visible in q as little-endian arrays:
//
//	Float64[8] header: x0, x1, yMax, nSeries, nPts, w, peakInWindow, 0
//	Int32[nSeries] element id (-1 pool envelope, -2 pool summary stripe)
//	Int32[nSeries] colour index
//	Int32[nSeries] kind (0 band, 1 pool stripe, 2 pool envelope, 3 pool summary)
//	Int32[nSeries] point count
//	Float32[nPts]  x - x0
//	Float32[nPts]  bottom (bytes)
//	Float32[nPts]  top (bytes)
//	Float32[w]     per-column total (max), NaN where no step falls
//	Float32[w]     per-column bottom of the summarised band (min)
//
// Bands under half a pixel tall are left out; the per-column total drawn
// behind the bands shows their memory.
func (tl *timeline) window(q windowQuery) []byte {
	ax := tl.axis(q.Mode)
	if q.W < 1 {
		q.W = 1
	}
	if q.W > 16384 {
		q.W = 16384
	}
	if q.H < 1 {
		q.H = 1
	}
	if !(q.X1 > q.X0) {
		q.X1 = q.X0 + 1
	}
	nSteps := len(tl.MaxAtTime)
	s0, s1 := 0, 0
	if nSteps > 0 {
		s0 = ax.stepAt(q.X0)
		s1 = ax.stepAt(q.X1)
		if s1 < nSteps-1 {
			s1++
		}
		s0 = min(s0, nSteps-1)
		s1 = min(s1, nSteps-1)
	}
	// Per-column totals.
	colMax := make([]float32, q.W)
	colSum := make([]float32, q.W)
	nan := float32(math.NaN())
	for i := range colMax {
		colMax[i], colSum[i] = nan, nan
	}
	span := q.X1 - q.X0
	col := func(x float64) int {
		c := int(math.Floor((x - q.X0) / span * float64(q.W)))
		return min(max(c, 0), q.W-1)
	}
	peak := 0.0
	for s := s0; s <= s1 && s < nSteps; s++ {
		v := tl.MaxAtTime[s]
		peak = max(peak, v)
		// A step covers [x(s), x(s+1)): fill every column it spans.
		c0, c1 := col(ax[s]), col(ax[s+1])
		if ax[s+1] > ax[s] && c1 > c0 {
			// the step ends exactly at a column start: that column belongs to the next step
			if float64(c1)*span/float64(q.W)+q.X0 >= ax[s+1] {
				c1--
			}
		}
		so := float32(tl.SumOff[s])
		for c := c0; c <= c1; c++ {
			if math.IsNaN(float64(colMax[c])) || float32(v) > colMax[c] {
				colMax[c] = float32(v)
			}
			if math.IsNaN(float64(colSum[c])) || so < colSum[c] {
				colSum[c] = so
			}
		}
	}
	yMax := q.YMax
	if yMax <= 0 {
		yMax = peak
	}
	if yMax <= 0 {
		yMax = 1
	}
	minSize := yMax / float64(q.H) * 0.5

	var ids, colors, kinds, counts []int32
	var xs, bots, tops []float32
	const maxPts = 3_000_000
	for si := range tl.Series {
		sr := &tl.Series[si]
		pts := sr.Pts
		if len(pts) == 0 {
			continue
		}
		if int(pts[0].T) > s1+1 || int(pts[len(pts)-1].T) < s0 {
			continue
		}
		if sr.SizeAt == nil && sr.Size < minSize {
			continue
		}
		if sr.SizeAt != nil {
			big := false
			for _, z := range sr.SizeAt {
				if z >= minSize {
					big = true
					break
				}
			}
			if !big {
				continue
			}
		}
		if len(xs) > maxPts {
			break
		}
		// First point at or after s0, minus one; last at or before s1, plus one.
		stepOf := func(p cpoint) int {
			if p.T < 0 {
				return int(-p.T)
			}
			return int(p.T)
		}
		i0 := sort.Search(len(pts), func(i int) bool { return stepOf(pts[i]) >= s0 })
		if i0 > 0 {
			i0--
		}
		i1 := sort.Search(len(pts), func(i int) bool { return stepOf(pts[i]) > s1+1 })
		if i1 < len(pts) {
			i1++
		}
		// Expand ramps into their two points, then keep the first and the
		// last point of each pixel column: offsets only move in ramps, so
		// this keeps the shape.
		n := 0
		lastCol := -1
		var pend struct {
			ok  bool
			x   float64
			off float64
			i   int
		}
		emit := func(x, off float64, i int) {
			top := off + sr.Size
			if sr.SizeAt != nil {
				top = off + sr.SizeAt[i]
			}
			xs = append(xs, float32(x-q.X0))
			bots = append(bots, float32(off))
			tops = append(tops, float32(top))
			n++
		}
		add := func(x, off float64, i int) {
			c := col(x)
			if c == lastCol {
				// hold the latest point of this column; it is emitted when the
				// column ends
				pend.ok, pend.x, pend.off, pend.i = true, x, off, i
				return
			}
			if pend.ok {
				emit(pend.x, pend.off, pend.i)
				pend.ok = false
			}
			lastCol = c
			emit(x, off, i)
		}
		for i := i0; i < i1; i++ {
			p := pts[i]
			if p.T < 0 {
				prev := float64(p.Off)
				if i > 0 {
					prev = float64(pts[i-1].Off)
				}
				t := int(-p.T)
				add(ax[t-3], prev, i)
				add(ax[t], float64(p.Off), i)
				continue
			}
			add(ax[p.T], float64(p.Off), i)
		}
		if pend.ok {
			emit(pend.x, pend.off, pend.i)
		}
		if n == 0 {
			continue
		}
		ids = append(ids, sr.Elem)
		colors = append(colors, sr.Color)
		kinds = append(kinds, int32(sr.Opaque))
		counts = append(counts, int32(n))
	}

	size := 64 + 16*len(ids) + 12*len(xs) + 8*q.W
	out := make([]byte, 0, size)
	for _, v := range []float64{q.X0, q.X1, yMax, float64(len(ids)), float64(len(xs)), float64(q.W), peak, 0} {
		out = binary.LittleEndian.AppendUint64(out, math.Float64bits(v))
	}
	for _, arr := range [][]int32{ids, colors, kinds, counts} {
		for _, v := range arr {
			out = binary.LittleEndian.AppendUint32(out, uint32(v))
		}
	}
	for _, arr := range [][]float32{xs, bots, tops, colMax, colSum} {
		for _, v := range arr {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	return out
}

// xRange returns the full x extent of the timeline in a mode.
func (tl *timeline) xRange(mode string) (float64, float64) {
	ax := tl.axis(mode)
	if len(ax) == 0 {
		return 0, 1
	}
	lo, hi := ax[0], ax[len(ax)-1]
	if hi <= lo {
		hi = lo + 1
	}
	return lo, hi
}
