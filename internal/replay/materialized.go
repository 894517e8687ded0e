package replay

import (
	"math"
	"sort"

	"github.com/gpumem/gpumem/snapshot"
)

// newMaterialized builds a Timeline from memory_viz's own polygons (the
// pool-envelope view).
func newMaterialized(s *snapshot.Snapshot, device int) *Timeline {
	r := runPoolReplay(s, device, 0, true)
	n := len(r.l.elems)
	items := len(r.ser)
	t := &Timeline{
		s: s, device: device, kind: KindActiveWithPools, segs: deviceSegments(s, device),
		src: r.l.elems, ser: r.ser, totalAfter: r.totalAfter,
		start: make([]int32, items), end: make([]int32, items),
		timesteps: r.timesteps, peak: r.peak,
	}
	for _, p := range r.pools {
		if p.env >= 0 {
			for len(t.poolKeys) < int(p.env)-n+1 {
				t.poolKeys = append(t.poolKeys, "")
			}
			t.poolKeys[int(p.env)-n] = p.key
		}
	}
	order := make([]int32, 0, items)
	for id := range t.ser {
		sr := &t.ser[id]
		if len(sr.ts) == 0 {
			continue
		}
		t.start[id], t.end[id] = sr.ts[0], sr.ts[len(sr.ts)-1]
		order = append(order, int32(id))
	}
	sort.SliceStable(order, func(a, b int) bool { return t.start[order[a]] < t.start[order[b]] })
	t.buildBuckets(order)
	t.runStart, t.runVal = r.runStart, r.runVal
	t.runIdx = newRangeMinMax(t.runVal)
	return t
}

// at returns the polygon's bottom edge and height at x, interpolating
// between points as the SVG polygon does.
func (s *series) at(x float64) (bottom, size float64) {
	n := len(s.ts)
	if n == 0 {
		return 0, 0
	}
	sz := func(i int) float64 {
		if s.size == nil {
			return math.NaN()
		}
		return float64(s.size[i])
	}
	i := sort.Search(n, func(i int) bool { return float64(s.ts[i]) >= x })
	switch {
	case i == 0:
		return float64(s.offs[0]), sz(0)
	case i == n:
		return float64(s.offs[n-1]), sz(n - 1)
	}
	t0, t1 := float64(s.ts[i-1]), float64(s.ts[i])
	if t1 == t0 || x == t1 {
		return float64(s.offs[i]), sz(i)
	}
	f := (x - t0) / (t1 - t0)
	b := float64(s.offs[i-1]) + f*float64(s.offs[i]-s.offs[i-1])
	if s.size == nil {
		return b, math.NaN()
	}
	return b, float64(s.size[i-1]) + f*float64(s.size[i]-s.size[i-1])
}

// heightAt is an item's height at x.
func (t *Timeline) heightAt(id int32, x float64) (bottom, height float64) {
	b, sz := t.ser[id].at(x)
	if int(id) < len(t.src) {
		sz = float64(t.src[id].size)
	}
	return b, sz
}

func (t *Timeline) hitTestMaterialized(x, y float64) (int, bool) {
	hit, env := -1, -1
	for bi := range t.buckets {
		b := &t.buckets[bi]
		limit := sort.Search(len(b.ids), func(i int) bool { return float64(t.start[b.ids[i]]) > x })
		b.ends.each(limit, int32(math.Ceil(x))-1, func(i int) {
			id := b.ids[i]
			if float64(t.start[id]) > x || float64(t.end[id]) < x {
				return
			}
			bot, h := t.heightAt(id, x)
			if y >= bot && y < bot+h {
				if int(id) < len(t.src) {
					if hit < 0 || int(id) < hit {
						hit = int(id)
					}
				} else {
					env = int(id)
				}
			}
		})
	}
	if hit >= 0 {
		return hit, true
	}
	return env, env >= 0
}

// polygonsMaterialized fills f with the polygons, sampled at the pixel
// columns, of the first detail items of vis (largest first) that are
// inside the window, and counts the rest as summarised: an upper bound,
// as the items past Detail are not checked against y.
func (t *Timeline) polygonsMaterialized(f *Frame, vis []int32, t0, t1, tpp, bpp float64, detail int) {
	f.SummaryExact = true
	px := func(x float64) float32 { return float32((x - t0) / tpp) }
	py := func(bytes float64) float32 { return float32((f.Y1 - bytes) / bpp) }
	for n, id := range vis {
		if len(f.IDs) >= max(detail, 0) {
			f.Summarized = len(vis) - n
			f.SummaryExact = false
			f.Truncated = true
			return
		}
		a, b := max(t0, float64(t.start[id])), min(t1, float64(t.end[id]))
		var xs []float64
		xs = append(xs, a)
		for c := math.Floor((a-t0)/tpp) + 1; ; c++ {
			x := t0 + c*tpp
			if x >= b {
				break
			}
			xs = append(xs, x)
		}
		xs = append(xs, b)
		bottom := make([]float32, 0, 2*len(xs))
		top := make([]float32, 0, 2*len(xs))
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range xs {
			bo, h := t.heightAt(id, x)
			bottom = append(bottom, px(x), py(bo))
			top = append(top, px(x), py(bo+h))
			lo, hi = math.Min(lo, bo), math.Max(hi, bo+h)
		}
		if hi < f.Y0 || lo > f.Y1 {
			continue
		}
		f.IDs = append(f.IDs, id)
		f.Points = append(f.Points, bottom...)
		for i := len(top) - 2; i >= 0; i -= 2 {
			f.Points = append(f.Points, top[i], top[i+1])
		}
		f.Starts = append(f.Starts, int32(len(f.Points)/2))
	}
}
