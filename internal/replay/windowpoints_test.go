package replay

import (
	"fmt"
	"math"
	"os"
	"sync"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// BenchmarkTileWindowPoints says where a wide window's points come from on
// a large snapshot file: GPUMEM_TILE=../../bench/data/notHanmin-x200.pickle
// go test -run '^$' -bench TileWindowPoints ./internal/replay (figures
// printed once, whatever b.N). For the viewer bench's widest windows
// (the whole trace, its first zoom and its last zoom-out but one, at
// 1600x600 and Detail 15,000), per frame: the polygons and their bottom
// edges' points (the top edge repeats them), how many of those lie on a
// column edge and how many share a pixel column with the point before them
// (what a rasterizer could merge), the columns each polygon spans, and a
// histogram of the vertical steps between a bottom edge's consecutive
// points in pixels (a step under 1/510 px cannot change an 8-bit pixel).
func BenchmarkTileWindowPoints(b *testing.B) {
	path := os.Getenv("GPUMEM_TILE")
	if path == "" {
		b.Skip("set GPUMEM_TILE=FILE to count a large snapshot's window points")
	}
	// The testing package may call a benchmark more than once; the
	// figures do not depend on b.N.
	windowPointsOnce.Do(func() { windowPoints(b, path) })
}

var windowPointsOnce sync.Once

func windowPoints(b *testing.B, path string) {
	s, err := snapshot.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	tl := NewTimeline(s, s.DefaultDevice(), KindActive)
	T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())
	// The first zoom and the last zoom-out but one, as BenchmarkTileZoomPan
	// asks them: the span 1/1.5 of the trace's around its centre, in both
	// axes, and the same span around the point the pans moved it to.
	span, h := T/1.5, P/1.5
	windows := []struct {
		name           string
		x0, x1, y0, y1 float64
	}{
		{"whole trace", 0, T, 0, P},
		{"first zoom", T/2 - span/2, T/2 + span/2, P/2 - h/2, P/2 + h/2},
	}
	if x0 := min(T/2-span/2+8*0.2*span/math.Pow(1.5, 7), T-span); x0 >= 0 {
		windows = append(windows, struct {
			name           string
			x0, x1, y0, y1 float64
		}{"zoomed out, panned", x0, x0 + span, P/2 - h/2, P/2 + h/2})
	}
	for _, w := range windows {
		f := tl.QueryWith(w.x0, w.x1, 1600, 600, w.y0, w.y1, QueryOptions{Detail: 15000})
		var bottom, onEdge, sameCol, spanned, flat int
		var steps [7]int // <= 1/510 px, <= 0.01, <= 0.1, <= 1, <= 10, <= 100, more
		limits := []float64{1.0 / 510, 0.01, 0.1, 1, 10, 100}
		for i := range f.IDs {
			s, e := int(f.Starts[i]), int(f.Starts[i+1])
			n := (e - s) / 2
			bottom += n
			spanned += int(f.Points[2*(s+n-1)]) - int(f.Points[2*s])
			for j := s; j < s+n; j++ {
				x, y := f.Points[2*j], f.Points[2*j+1]
				if x == float32(math.Floor(float64(x))) {
					onEdge++
				}
				if j == s {
					continue
				}
				if int(f.Points[2*j-2]) == int(x) {
					sameCol++
				}
				d := math.Abs(float64(y - f.Points[2*j-1]))
				if d == 0 {
					flat++
					continue
				}
				k := 0
				for k < len(limits) && d > limits[k] {
					k++
				}
				steps[k]++
			}
		}
		b.Logf("%s [%.0f,%.0f]x[%.3g,%.3g]: %d polygons, %d points (%d bottom: %d on a column edge, %d in the column of the point before), %.0f columns spanned a polygon; vertical steps: %d flat, by px (<=1/510, 0.01, 0.1, 1, 10, 100, more) %v",
			w.name, w.x0, w.x1, w.y0, w.y1, len(f.IDs), len(f.Points)/2, bottom, onEdge, sameCol, float64(spanned)/float64(max(len(f.IDs), 1)), flat, fmt.Sprint(steps))
		f.Release()
	}
}
