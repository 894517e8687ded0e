package replay

import (
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// ev is a compact trace entry for hand-made snapshots.
type ev struct {
	a    snapshot.Action
	addr uint64
	size uint64
}

// mkSnapshot builds a one-device snapshot from events and dump segments.
// Merged frees are written as free_requested + free_completed.
func mkSnapshot(events []ev, segs []snapshot.Segment, blocks []snapshot.Block) *snapshot.Snapshot {
	s := &snapshot.Snapshot{
		Source:   snapshot.Source{Generation: snapshot.GenD6},
		Segments: segs,
		Blocks:   blocks,
		Strings:  []string{""},
		Streams:  []int64{0},
		Stacks:   snapshot.StackTable{Offsets: []int32{0, 0}},
	}
	tr := snapshot.Trace{}
	for _, e := range events {
		tr.Events = append(tr.Events, snapshot.Event{Action: e.a, Addr: e.addr, Size: e.size})
	}
	s.Traces = []snapshot.Trace{tr}
	return s
}

const (
	aAlloc = snapshot.ActionAlloc
	aFreeR = snapshot.ActionFreeRequested
	aFreeC = snapshot.ActionFreeCompleted
)

func free(addr, size uint64) []ev {
	return []ev{{aFreeR, addr, size}, {aFreeC, addr, size}}
}

// naiveSeries is memory_viz's phase 3 with every element drawn: the
// polygon series of each element, built the O(n²) way.
type naiveSeries struct {
	ts   [][]float64
	offs [][]float64
	max  []uint64
}

func naiveTimeline(s *snapshot.Snapshot, device int, segments bool) *naiveSeries {
	l := buildElements(s, device, segments, nil, nil)
	n := len(l.elems)
	r := &naiveSeries{ts: make([][]float64, n), offs: make([][]float64, n)}
	var cur []int32
	var total uint64
	ts := 0.0
	advance := func(k int) {
		for i := 0; i < k; i++ {
			r.max = append(r.max, total)
		}
		ts += float64(k)
	}
	add := func(id int32) {
		cur = append(cur, id)
		r.ts[id] = []float64{ts}
		r.offs[id] = []float64{float64(total)}
		total += l.elems[id].size
	}
	for _, id := range l.initial {
		add(id)
	}
	for _, id := range l.actions {
		idx := -1
		for j := len(cur) - 1; j >= 0; j-- {
			if cur[j] == id {
				idx = j
				break
			}
		}
		if idx < 0 {
			add(id)
			advance(1)
			continue
		}
		advance(1)
		r.ts[id] = append(r.ts[id], ts)
		r.offs[id] = append(r.offs[id], r.offs[id][len(r.offs[id])-1])
		cur = append(cur[:idx], cur[idx+1:]...)
		if idx < len(cur) {
			size := float64(l.elems[id].size)
			for _, e := range cur[idx:] {
				last := r.offs[e][len(r.offs[e])-1]
				r.ts[e] = append(r.ts[e], ts, ts+3)
				r.offs[e] = append(r.offs[e], last, last-size)
			}
			advance(3)
		}
		total -= l.elems[id].size
	}
	for _, e := range cur {
		r.ts[e] = append(r.ts[e], ts)
		r.offs[e] = append(r.offs[e], r.offs[e][len(r.offs[e])-1])
	}
	return r
}

// at interpolates element i's bottom edge at x as the SVG polygon does.
func (r *naiveSeries) at(i int, x float64) float64 {
	ts, offs := r.ts[i], r.offs[i]
	if x <= ts[0] {
		return offs[0]
	}
	for j := 1; j < len(ts); j++ {
		if x <= ts[j] {
			if ts[j] == ts[j-1] {
				return offs[j]
			}
			f := (x - ts[j-1]) / (ts[j] - ts[j-1])
			return offs[j-1] + f*(offs[j]-offs[j-1])
		}
	}
	return offs[len(offs)-1]
}

func TestStackingFreeInMiddle(t *testing.T) {
	var evs []ev
	evs = append(evs, ev{aAlloc, 0x1000, 100}, ev{aAlloc, 0x2000, 200}, ev{aAlloc, 0x3000, 50})
	evs = append(evs, free(0x1000, 100)...)
	s := mkSnapshot(evs, nil, nil)
	tl := NewTimeline(s, 0, KindActive)
	if tl.Len() != 3 || tl.Timesteps() != 7 || tl.PeakBytes() != 350 {
		t.Fatalf("len %d timesteps %d peak %d, want 3 7 350", tl.Len(), tl.Timesteps(), tl.PeakBytes())
	}
	cases := []struct {
		elem int
		x    float64
		want float64
	}{
		{1, 1, 100}, {1, 4, 100}, {1, 5.5, 50}, {1, 7, 0},
		{2, 2, 300}, {2, 4, 300}, {2, 6, 233.33333333333334}, {2, 7, 200},
		{0, 0, 0}, {0, 4, 0},
	}
	for _, c := range cases {
		if got := tl.Offset(c.elem, c.x); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Offset(%d, %v) = %v, want %v", c.elem, c.x, got, c.want)
		}
	}
	if e := tl.Element(0); e.End != 4 || e.Start != 0 || e.Addr != "b'1000_0" {
		t.Errorf("element 0 = %+v", e)
	}
	wantCtx := "Addr: b'2000_0, Size: 200.0B (200 bytes) allocation, Total memory used after allocation: 300.0B (300 bytes), " +
		"Compile context: None, stream 0, pool_id unknown, timestamp not recorded\n" + noFramesText
	if got := tl.Context(1); got != wantCtx {
		t.Errorf("Context(1) =\n%s\nwant\n%s", got, wantCtx)
	}
	st := ComputeStats(s, 0, KindActive, DefaultMaxEntries)
	if st.PeakBytes != 350 || st.Timesteps != 7 || st.Elements != 3 {
		t.Errorf("stats %+v", st)
	}
}

func TestPreTraceFreeAndGhost(t *testing.T) {
	// Block 0x5000 was allocated before recording and freed in the trace;
	// 0x9000 is live in the dump with no alloc (ghost).
	evs := []ev{{aAlloc, 0x1000, 10}}
	evs = append(evs, free(0x5000, 40)...)
	evs = append(evs, ev{aAlloc, 0x2000, 20})
	segs := []snapshot.Segment{{Device: 0, Address: 0x9000, TotalSize: 1024, FirstBlock: 0, NumBlocks: 2, HasPoolID: true}}
	blocks := []snapshot.Block{
		{Addr: 0x9000, Size: 512, RequestedSize: 500, State: snapshot.BlockActiveAllocated},
		{Addr: 0x9200, Size: 512, State: snapshot.BlockInactive},
	}
	s := mkSnapshot(evs, segs, blocks)
	tl := NewTimeline(s, 0, KindActive)
	// Elements: 0 alloc 0x1000, 1 free 0x5000 (pre-trace), 2 alloc 0x2000,
	// 3 ghost 0x9000. Initial stack bottom→top: ghost, pre-trace free.
	if tl.Len() != 4 {
		t.Fatalf("len %d", tl.Len())
	}
	if got := tl.Offset(3, 0); got != 0 {
		t.Errorf("ghost offset %v, want 0", got)
	}
	if got := tl.Offset(1, 0); got != 500 {
		t.Errorf("pre-trace free offset %v, want 500", got)
	}
	e1 := tl.Element(1)
	if !e1.PreTraceFree || e1.Ghost || e1.PoolKnown {
		t.Errorf("element 1 %+v", e1)
	}
	e3 := tl.Element(3)
	if !e3.Ghost || e3.Size != 500 || !e3.PoolKnown {
		t.Errorf("element 3 %+v", e3)
	}
	// Peak: ghost 500 + free 40 + alloc 10 = 550 right after the first alloc.
	if tl.PeakBytes() != 550 {
		t.Errorf("peak %d", tl.PeakBytes())
	}
	ctx := tl.Context(1)
	if want := "alloc not recorded, stack trace for free:"; !contains(ctx, want) {
		t.Errorf("context lacks %q:\n%s", want, ctx)
	}
	if got := tl.Search("b'5000", ""); len(got) != 1 || got[0] != 1 {
		t.Errorf("Search = %v", got)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}

// randomSnapshot makes a trace with random allocs and frees (in and out of
// order), pre-trace frees and ghost blocks.
func randomSnapshot(r *rand.Rand, n int) *snapshot.Snapshot {
	var evs []ev
	live := []uint64{}
	next := uint64(0x100000)
	var segs []snapshot.Segment
	var blocks []snapshot.Block
	for i := 0; i < 5; i++ { // pre-trace live blocks, some freed later
		addr := next
		next += 0x10000
		if r.Intn(2) == 0 {
			live = append(live, addr)
		} else {
			segs = append(segs, snapshot.Segment{Address: addr, TotalSize: 0x10000, FirstBlock: int32(len(blocks)), NumBlocks: 1})
			blocks = append(blocks, snapshot.Block{Addr: addr, Size: 0x10000, RequestedSize: uint64(1 + r.Intn(0x10000)), State: snapshot.BlockActiveAllocated})
		}
	}
	sizes := map[uint64]uint64{}
	for i := 0; i < n; i++ {
		if len(live) == 0 || r.Intn(5) < 3 {
			addr := next
			next += 0x10000
			sz := uint64(1 + r.Intn(1<<uint(4+r.Intn(16))))
			sizes[addr] = sz
			evs = append(evs, ev{aAlloc, addr, sz})
			live = append(live, addr)
			continue
		}
		k := len(live) - 1
		if r.Intn(3) > 0 {
			k = r.Intn(len(live))
		}
		addr := live[k]
		live = append(live[:k], live[k+1:]...)
		sz, ok := sizes[addr]
		if !ok {
			sz = 777
		}
		if r.Intn(10) == 0 {
			evs = append(evs, ev{aFreeR, addr, sz})
			evs = append(evs, ev{aAlloc, next, 3}) // unrelated event between
			sizes[next] = 3
			live = append(live, next)
			next += 0x10000
			evs = append(evs, ev{aFreeC, addr, sz})
		} else {
			evs = append(evs, free(addr, sz)...)
		}
	}
	return mkSnapshot(evs, segs, blocks)
}

func TestTimelineMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for iter := 0; iter < 30; iter++ {
		s := randomSnapshot(r, 50+r.Intn(300))
		tl := NewTimeline(s, 0, KindActive)
		nv := naiveTimeline(s, 0, false)
		if tl.Timesteps() != len(nv.max) {
			t.Fatalf("iter %d: timesteps %d, naive %d", iter, tl.Timesteps(), len(nv.max))
		}
		var peak uint64
		for _, v := range nv.max {
			peak = max(peak, v)
		}
		if tl.PeakBytes() != peak {
			t.Fatalf("iter %d: peak %d, naive %d", iter, tl.PeakBytes(), peak)
		}
		for i := 0; i < tl.Len(); i++ {
			e := tl.Element(i)
			ts := nv.ts[i]
			if float64(e.Start) != ts[0] || float64(e.End) != ts[len(ts)-1] {
				t.Fatalf("iter %d elem %d: [%d,%d], naive [%v,%v]", iter, i, e.Start, e.End, ts[0], ts[len(ts)-1])
			}
			for k := 0; k < 8; k++ {
				x := float64(e.Start) + r.Float64()*float64(e.End-e.Start)
				if k == 0 {
					x = math.Floor(x)
				}
				got, want := tl.Offset(i, x), nv.at(i, x)
				if math.Abs(got-want) > 1e-6*math.Max(1, want) {
					t.Fatalf("iter %d elem %d x %v: offset %v, naive %v", iter, i, x, got, want)
				}
			}
		}
		// Hit tests against the naive polygons.
		for k := 0; k < 200; k++ {
			x := r.Float64() * float64(tl.Timesteps())
			y := r.Float64() * float64(peak)
			want := -1
			for i := 0; i < tl.Len(); i++ {
				ts := nv.ts[i]
				if x < ts[0] || x > ts[len(ts)-1] {
					continue
				}
				o := nv.at(i, x)
				if y >= o && y < o+float64(s0(tl, i)) {
					want = i
					break
				}
			}
			got, ok := tl.HitTest(x, y)
			if want >= 0 && (!ok || got != want) {
				// At exact end timesteps two elements may share a line.
				gx := tl.Element(got)
				if !ok || !(float64(gx.End) == x || float64(gx.Start) == x) {
					t.Fatalf("iter %d: HitTest(%v,%v) = %d,%v want %d", iter, x, y, got, ok, want)
				}
			}
			if want < 0 && ok {
				t.Fatalf("iter %d: HitTest(%v,%v) = %d, want none", iter, x, y, got)
			}
		}
	}
}

func s0(tl *Timeline, i int) uint64 { return tl.src[i].size }

func TestQueryMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for iter := 0; iter < 20; iter++ {
		s := randomSnapshot(r, 100+r.Intn(400))
		tl := NewTimeline(s, 0, KindActive)
		nv := naiveTimeline(s, 0, false)
		for q := 0; q < 10; q++ {
			checkRandomQuery(t, tl, nv, r)
		}
	}
}

// checkRandomQuery compares one random window's Frame with the naive
// polygons: bottom edges, the drawn set (exactly the largest Detail of the
// elements that intersect the window), the summary count and the column
// maxima.
func checkRandomQuery(t *testing.T, tl *Timeline, nv *naiveSeries, r *rand.Rand) {
	t.Helper()
	T := float64(tl.Timesteps())
	P := float64(tl.PeakBytes())
	t0 := r.Float64() * T * 0.8
	t1 := t0 + (T-t0)*(0.05+0.95*r.Float64())
	y0 := r.Float64() * P * 0.5
	y1 := y0 + (P-y0)*(0.1+0.9*r.Float64())
	if r.Intn(4) == 0 { // the whole height
		y0, y1 = 0, P*1.04
	}
	checkQuery(t, tl, nv, t0, t1, y0, y1, 50+r.Intn(400), 50+r.Intn(300), 1+r.Intn(80))
}

// checkQuery compares the Frame of one window with the naive polygons,
// as checkRandomQuery says; it reports whether the window was checked in
// full (no element within a hair of an edge).
func checkQuery(t *testing.T, tl *Timeline, nv *naiveSeries, t0, t1, y0, y1 float64, w, h, detail int) bool {
	t.Helper()
	P := float64(tl.PeakBytes())
	f := tl.QueryWith(t0, t1, w, h, y0, y1, QueryOptions{Detail: detail})
	where := fmt.Sprintf("window [%v,%v]x[%v,%v] detail %d", t0, t1, y0, y1, detail)
	tpp, bpp := (t1-t0)/float64(w), (y1-y0)/float64(h)
	got := map[int32]bool{}
	for k, id := range f.IDs {
		got[id] = true
		pts := f.Points[2*f.Starts[k] : 2*f.Starts[k+1]]
		npts := len(pts) / 2
		for j := 0; j < npts/2; j++ { // bottom edge
			x := t0 + float64(pts[2*j])*tpp
			yb := y1 - float64(pts[2*j+1])*bpp
			want := nv.at(int(id), x)
			if math.Abs(yb-want) > 0.01*bpp+1e-3*math.Abs(want) {
				t.Fatalf("%s: elem %d bottom at x=%v is %v, naive %v (bpp %v)", where, id, x, yb, want, bpp)
			}
		}
	}
	// Brute force: the elements overlapping the window in time whose
	// bottom at their last sample is below y1 and top at their first
	// above y0 (offsets never grow). Those within a hair of an edge are
	// ambiguous and left out of the exact checks.
	var inside []int32
	ambiguous := 0
	eps := 1e-6 * P
	for i := 0; i < tl.Len(); i++ {
		sz := float64(tl.src[i].size)
		st, en := float64(tl.start[i]), float64(tl.end[i])
		if !(st < t1 && en > t0) {
			if got[int32(i)] {
				t.Fatalf("%s: elem %d drawn but outside in time", where, i)
			}
			continue
		}
		lo := nv.at(i, math.Min(t1, en))
		hi := nv.at(i, math.Max(t0, st)) + sz
		if sz == 0 || math.Abs(lo-y1) < eps || math.Abs(hi-y0) < eps {
			ambiguous++
			continue
		}
		if lo < y1 && hi > y0 {
			inside = append(inside, int32(i))
		} else if got[int32(i)] {
			t.Fatalf("%s: elem %d drawn but outside in bytes (%v..%v)", where, i, lo, hi)
		}
	}
	if ambiguous > 0 {
		return false
	}
	sort.Slice(inside, func(a, b int) bool {
		sa, sb := tl.src[inside[a]].size, tl.src[inside[b]].size
		if sa != sb {
			return sa > sb
		}
		return inside[a] < inside[b]
	})
	want := inside[:min(detail, len(inside))]
	if len(f.IDs) != len(want) {
		t.Fatalf("%s: %d drawn, want the largest %d of %d intersecting", where, len(f.IDs), len(want), len(inside))
	}
	for k, id := range want {
		if f.IDs[k] != id {
			t.Fatalf("%s: drawn[%d] = %d, want %d (largest first)", where, k, f.IDs[k], id)
		}
	}
	rest := len(inside) - len(want)
	if f.SummaryExact && f.Summarized != rest || f.Summarized < rest {
		t.Fatalf("%s: summarized %d (exact %v), want %d", where, f.Summarized, f.SummaryExact, rest)
	}
	for c := 0; c < w; c++ {
		a := int(math.Floor(t0 + float64(c)*tpp))
		b := int(math.Ceil(t0 + float64(c+1)*tpp))
		if b <= a {
			b = a + 1
		}
		var mx uint64
		for i := max(a, 0); i < min(b, len(nv.max)); i++ {
			mx = max(mx, nv.max[i])
		}
		if f.ColMax[c] != float64(mx) {
			t.Fatalf("col %d: max %v, naive %v", c, f.ColMax[c], mx)
		}
	}
	return true
}

// TestZoomedQueryMatchesBruteForce checks windows zoomed in bytes (a
// band of 0.1-10 % of the peak, anywhere in time) on traces with many
// stack blocks against the naive polygons, with the blocks and buckets
// built and before either is: such a window classifies only the stack
// positions between its edges (windowSel.bounds), and an element left
// out there that intersects would be missing from the drawn set or the
// summary.
func TestZoomedQueryMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewSource(12))
	checked := 0
	for iter := 0; iter < 12; iter++ {
		s := randomSnapshot(r, 3000+r.Intn(3000))
		if iter%2 == 1 {
			s = layeredSnapshot(r)
		}
		tl := NewTimeline(s, 0, KindActive)
		tl.waitBuckets()
		<-tl.blocksBuilt
		blocks, buckets := tl.blocksBuilt, tl.bucketsBuilt
		nv := naiveTimeline(s, 0, false)
		T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())
		for q := 0; q < 24; q++ {
			t0 := r.Float64() * T * 0.9
			t1 := t0 + (T-t0)*math.Pow(r.Float64(), 2)
			y0 := r.Float64() * P * 0.95
			y1 := y0 + P*math.Pow(10, -3+2*r.Float64())
			tl.blocksBuilt, tl.bucketsBuilt = blocks, buckets
			if q%3 == 1 { // before the index
				tl.blocksBuilt, tl.bucketsBuilt = make(chan struct{}), make(chan struct{})
			}
			if checkQuery(t, tl, nv, t0, t1, y0, y1, 50+r.Intn(400), 50+r.Intn(300), []int{1, 5, 40, 300}[r.Intn(4)]) {
				checked++
			}
		}
		tl.blocksBuilt, tl.bucketsBuilt = blocks, buckets
	}
	if checked < 200 {
		t.Fatalf("only %d windows checked in full", checked)
	}
	t.Logf("%d zoomed windows checked against the naive polygons", checked)
}

// TestSearchMatchesContext checks the parallel, cached search against a
// plain scan of Context texts.
func TestSearchMatchesContext(t *testing.T) {
	s := trainingTrace(40_000, 3)
	tl := NewTimeline(s, 0, KindActive)
	for _, q := range [][2]string{{"b'7f00000", ""}, {"", "no frames"}, {"size: 2.0kib", "stream 0"}, {"B'7F046", "NOT recorded"}} {
		var want []int
		a, f := strings.ToLower(q[0]), strings.ToLower(q[1])
		for i := 0; i < tl.Len(); i++ {
			c := strings.ToLower(tl.Context(i))
			if strings.Contains(c, a) && strings.Contains(c, f) {
				want = append(want, i)
			}
		}
		got := tl.Search(q[0], q[1])
		if len(want) == 0 || len(want) == tl.Len() && q[0] != "" {
			t.Errorf("query %q matches %d of %d: not a useful check", q, len(want), tl.Len())
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Search(%q, %q): %d results, scan %d", q[0], q[1], len(got), len(want))
		}
	}
}

// TestSearchHeader checks the search's header builder against Context on
// every element of synthetic and real timelines.
func TestSearchHeader(t *testing.T) {
	check := func(name string, tl *Timeline) {
		hb := &headerBuilder{t: tl}
		for i := 0; i < tl.Len()+tl.Envelopes(); i++ {
			want := strings.ToLower(tl.contextWith(i, func(snapshot.StackID) string { return "" }))
			if got := hb.header(i); got != want {
				t.Fatalf("%s element %d: header %q, context %q", name, i, got, want)
			}
		}
	}
	check("synthetic", NewTimeline(trainingTrace(20_000, 4), 0, KindActive))
	for name, s := range corpusSnapshots(t, 100) {
		for _, d := range s.Devices() {
			for _, k := range []Kind{KindActive, KindActiveWithPools, KindSegments} {
				check(name, NewTimeline(s, d, k))
			}
		}
	}
}

// TestQueryInsideOneElement: a window strictly inside one element's
// rectangle answers that element, even when Detail is 1 and larger
// elements overlap the window in time.
func TestQueryInsideOneElement(t *testing.T) {
	var evs []ev
	evs = append(evs, ev{aAlloc, 0x1000, 1000}, ev{aAlloc, 0x2000, 10}, ev{aAlloc, 0x3000, 5000})
	s := mkSnapshot(evs, nil, nil)
	tl := NewTimeline(s, 0, KindActive)
	// Element 1 (10 bytes) lies on [1000, 1010) from timestep 1 on.
	f := tl.QueryWith(1.5, 2.5, 100, 100, 1002, 1008, QueryOptions{Detail: 1})
	if len(f.IDs) != 1 || f.IDs[0] != 1 || f.Summarized != 0 || !f.SummaryExact {
		t.Fatalf("ids %v summarized %d exact %v, want [1] 0 true", f.IDs, f.Summarized, f.SummaryExact)
	}
	// The whole view with Detail 2: the two largest, the third summarised.
	f = tl.QueryWith(0, float64(tl.Timesteps()), 100, 100, 0, float64(tl.PeakBytes()), QueryOptions{Detail: 2})
	if !reflect.DeepEqual(f.IDs, []int32{2, 0}) || f.Summarized != 1 || !f.Truncated {
		t.Fatalf("ids %v summarized %d, want [2 0] 1", f.IDs, f.Summarized)
	}
}

// TestWholeTraceWithoutBuckets checks that a whole-trace window asked for
// while the buckets are still being built (the first view) answers
// exactly what the bucket index answers, at several Details.
func TestWholeTraceWithoutBuckets(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	check := func(name string, tl *Timeline) {
		t.Helper()
		tl.waitBuckets()
		T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())
		for _, detail := range []int{-1, 1, 7, 100, 15000} {
			for _, win := range [][2]float64{{0, T}, {-5, T + 5}} {
				want := tl.QueryWith(win[0], win[1], 300, 120, 0, P, QueryOptions{Detail: detail})
				built := tl.bucketsBuilt
				tl.bucketsBuilt = make(chan struct{}) // not built yet
				got := tl.QueryWith(win[0], win[1], 300, 120, 0, P, QueryOptions{Detail: detail})
				tl.bucketsBuilt = built
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s, Detail %d, window %v: without the buckets %d polygons, %d summarised; with them %d, %d",
						name, detail, win, len(got.IDs), got.Summarized, len(want.IDs), want.Summarized)
				}
			}
		}
	}
	for iter := 0; iter < 20; iter++ {
		check(fmt.Sprintf("random trace %d", iter), NewTimeline(randomSnapshot(r, 50+r.Intn(500)), 0, KindActive))
	}
	for name, s := range corpusSnapshots(t, 4) {
		for _, d := range s.Devices() {
			if tl := NewTimeline(s, d, KindActive); tl.Timesteps() > 0 {
				check(fmt.Sprintf("%s device %d", name, d), tl)
			}
		}
	}
}

// TestWindowBeforeIndex checks that any window asked for while the
// buckets are being built (answered from scans of the elements, a size
// class at a time) is the window the buckets and the stack's blocks
// answer: the same polygons, bottom edges and summary, bit for bit, with
// the blocks built (they are built first) and without them (before they
// are: the stack is then walked an element at a time).
func TestWindowBeforeIndex(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	scanned := 0
	check := func(name string, tl *Timeline, queries int) {
		t.Helper()
		tl.waitBuckets()
		<-tl.blocksBuilt
		blocks := tl.blocksBuilt
		T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())
		for q := 0; q < queries; q++ {
			t0 := r.Float64() * T * 0.9
			t1 := t0 + (T-t0)*math.Pow(r.Float64(), 2)
			y0 := r.Float64() * P * 0.7
			y1 := y0 + (P-y0)*r.Float64()
			switch q % 5 {
			case 0: // the whole height
				y0, y1 = 0, P*1.04
			case 1: // the whole trace, zoomed in bytes
				t0, t1 = 0, T
			}
			detail := []int{-1, 0, 1, 5, 40, 300, 15000}[r.Intn(7)]
			w, h := 50+r.Intn(400), 50+r.Intn(300)
			tl.blocksBuilt = blocks
			want := tl.QueryWith(t0, t1, w, h, y0, y1, QueryOptions{Detail: detail})
			if q%2 == 1 {
				tl.blocksBuilt = make(chan struct{}) // not built yet
			}
			built := tl.bucketsBuilt
			tl.bucketsBuilt = make(chan struct{}) // not built yet
			got := tl.QueryWith(t0, t1, w, h, y0, y1, QueryOptions{Detail: detail})
			tl.bucketsBuilt = built
			scanned++
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, Detail %d, window [%v,%v]x[%v,%v]: before the buckets %d polygons, %d summarised (exact %v); with them %d, %d (exact %v)",
					name, detail, t0, t1, y0, y1, len(got.IDs), got.Summarized, got.SummaryExact, len(want.IDs), want.Summarized, want.SummaryExact)
			}
		}
	}
	for iter := 0; iter < 30; iter++ {
		s := randomSnapshot(r, 100+r.Intn(2000))
		if iter%3 == 1 {
			s = layeredSnapshot(r)
		}
		check(fmt.Sprintf("random trace %d", iter), NewTimeline(s, 0, KindActive), 30)
	}
	check("training trace", NewTimeline(trainingTrace(30_000, 5), 0, KindActive), 40)
	for name, s := range corpusSnapshots(t, 6) {
		for _, d := range s.Devices() {
			if tl := NewTimeline(s, d, KindActive); tl.Timesteps() > 0 {
				check(fmt.Sprintf("%s device %d", name, d), tl, 15)
			}
		}
	}
	t.Logf("%d windows answered before and after the buckets", scanned)
}

// TestSlidFrees checks the slid frees' index (recorded as the stack
// takes the actions, positions of the initial stack resolved at its end)
// against the elements: each entry's position holds an element that
// slid, ending then, of that size; and there is one entry per such
// element.
func TestSlidFrees(t *testing.T) {
	check := func(name string, tl *Timeline) {
		t.Helper()
		slid := 0
		for id := range tl.src {
			if tl.slid[id] {
				slid++
			}
		}
		if len(tl.freePos) != slid || len(tl.freeEnd) != slid || len(tl.freeSize) != slid {
			t.Fatalf("%s: %d slid elements, index of %d/%d/%d", name, slid, len(tl.freeEnd), len(tl.freeSize), len(tl.freePos))
		}
		for i, p := range tl.freePos {
			if p < 0 || int(p) >= len(tl.byPos) {
				t.Fatalf("%s: slid free %d at position %d of %d", name, i, p, len(tl.byPos))
			}
			id := tl.byPos[p]
			if !tl.slid[id] || tl.end[id] != tl.freeEnd[i] || tl.src[id].size != tl.freeSize[i] {
				t.Fatalf("%s: slid free %d (end %d, size %d) at position %d: element %d slid %v, end %d, size %d",
					name, i, tl.freeEnd[i], tl.freeSize[i], p, id, tl.slid[id], tl.end[id], tl.src[id].size)
			}
		}
	}
	r := rand.New(rand.NewSource(4))
	for iter := 0; iter < 100; iter++ {
		check(fmt.Sprintf("random trace %d", iter), NewTimeline(randomSnapshot(r, 50+r.Intn(500)), 0, KindActive))
	}
	for name, s := range corpusSnapshots(t, 100) {
		for _, d := range s.Devices() {
			check(fmt.Sprintf("%s device %d", name, d), NewTimeline(s, d, KindActive))
		}
	}
}

// walkedExtremes is each run block's least and greatest value, walked
// run by run (what finishRuns falls back to).
func walkedExtremes(tl *Timeline) (lo, hi []uint64) {
	r := tl.cruns
	for b := range r.cp {
		mn, mx := uint64(math.MaxUint64), uint64(0)
		tl.walkRuns(b*runBlock, min((b+1)*runBlock, len(r.code)), func(v uint64) { mn, mx = min(mn, v), max(mx, v) })
		lo, hi = append(lo, mn), append(hi, mx)
	}
	return lo, hi
}

// TestRunExtremesMatchWalk checks the run blocks' extremes kept as the
// runs come (shifted by the initial stack at the end) against a walk over
// the runs: on random traces with pre-trace frees (values below zero
// before the shift), and on sizes near 2^64, where finishRuns must walk.
func TestRunExtremesMatchWalk(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	var below, walked int
	check := func(name string, s *snapshot.Snapshot, wantKept bool) {
		t.Helper()
		for _, kind := range []Kind{KindActive, KindSegments} {
			tl := NewTimeline(s, 0, kind)
			if tl.cruns == nil || len(tl.cruns.cp) == 0 {
				continue
			}
			if kept := tl.cruns.shiftKeepsOrder(); kept != wantKept {
				t.Fatalf("%s: shiftKeepsOrder = %v, want %v", name, kept, wantKept)
			}
			if !wantKept {
				walked++
			}
			for _, v := range tl.cruns.lo {
				if v < 0 {
					below++
					break
				}
			}
			lo, hi := walkedExtremes(tl)
			size := tl.cruns.size
			if !reflect.DeepEqual(tl.cruns.min[size:size+len(lo)], lo) || !reflect.DeepEqual(tl.cruns.max[size:size+len(hi)], hi) {
				t.Fatalf("%s, kind %d: block extremes differ from the walk", name, kind)
			}
		}
	}
	for iter := 0; iter < 40; iter++ {
		check(fmt.Sprint("random ", iter), randomSnapshot(r, 50+r.Intn(2000)), true)
	}
	check("training", trainingTrace(50_000, 2), true)
	huge := mkSnapshot(append(append([]ev{{aAlloc, 0x1000, 1 << 63}, {aAlloc, 0x2000, 1 << 62}}, free(0x1000, 1<<63)...),
		ev{aAlloc, 0x3000, 1<<63 + 5}), nil, nil)
	check("sizes near 2^64", huge, false)
	if below == 0 || walked == 0 {
		t.Fatalf("%d timelines with values below zero before the shift, %d walked: the cases are not covered", below, walked)
	}
}

// layeredSnapshot is a trace whose first allocations live long (as a
// model's weights do) under churn that frees at random, some of them
// slid: whole blocks of the stack count at most times, and some blocks
// lose an element now and then.
func layeredSnapshot(r *rand.Rand) *snapshot.Snapshot {
	var evs []ev
	var live []uint64
	next := uint64(0x100000)
	alloc := func() {
		sz := uint64(1 + r.Intn(1<<uint(4+r.Intn(16))))
		evs = append(evs, ev{aAlloc, next, sz})
		live = append(live, next)
		next += 0x10000
	}
	for range 200 + r.Intn(400) {
		alloc()
	}
	for range 1000 + r.Intn(2000) {
		if len(live) == 0 || r.Intn(2) == 0 {
			alloc()
			continue
		}
		k := len(live) - 1 - r.Intn(min(len(live), 40))
		if r.Intn(50) == 0 {
			k = r.Intn(len(live)) // an old one
		}
		evs = append(evs, free(live[k], 1)...)
		live = append(live[:k], live[k+1:]...)
	}
	return mkSnapshot(evs, nil, nil)
}

// TestPrefixBlocksMatchWalk: a stack prefix that adds blocks of
// positions at once (prefixAt) gives every position the bytes below it
// that the walk over every element gives, at random times and limits,
// on random traces big enough to hold whole blocks, live and freed; and
// it does take blocks at once (else the test would not test them).
func TestPrefixBlocksMatchWalk(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	wholeBlocks := 0
	for iter := 0; iter < 30; iter++ {
		s := randomSnapshot(r, 500+r.Intn(3000))
		if iter%2 == 1 {
			s = layeredSnapshot(r)
		}
		tl := NewTimeline(s, 0, KindActive)
		tl.waitBuckets()
		<-tl.blocksBuilt
		for q := 0; q < 20; q++ {
			x := r.Float64() * float64(tl.Timesteps())
			if q%4 == 0 {
				x = math.Floor(x)
			}
			limit := int32(1 + r.Intn(len(tl.byPos)))
			sp := tl.prefixAt(x, limit, math.Inf(1))
			for _, b := range sp.blk {
				if b {
					wholeBlocks++
				}
			}
			want := make([]float64, limit+1)
			var sum float64
			at := 0
			tl.stack(x, int(limit), func(id int32, w float64) {
				for ; at <= int(tl.pos[id]); at++ {
					want[at] = sum
				}
				sum += w
			})
			for ; at <= int(limit); at++ {
				want[at] = sum
			}
			for p := int32(0); p <= limit; p++ {
				if got := sp.at(p); math.Abs(got-want[p]) > 1e-9*math.Max(1, want[p]) {
					t.Fatalf("iter %d, x %v, limit %d: %v bytes below position %d, the walk says %v", iter, x, limit, got, p, want[p])
				}
			}
			if math.Abs(sp.total-sum) > 1e-9*math.Max(1, sum) {
				t.Fatalf("iter %d, x %v, limit %d: total %v, the walk says %v", iter, x, limit, sp.total, sum)
			}
			sp.release()
		}
	}
	if wholeBlocks == 0 {
		t.Fatal("no prefix took a block at once")
	}
	t.Logf("%d blocks taken at once", wholeBlocks)
}
