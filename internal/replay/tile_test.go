package replay

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gpumem/gpumem/snapshot"
)

// BenchmarkTile measures Timeline, Curves and History on a large snapshot
// file: GPUMEM_TILE=../../bench/data/baseline-80mb.pickle go test -run '^$'
// -bench Tile ./internal/replay. It prints build times and the heap each
// structure adds, and times the viewer bench's zooms (GPUMEM_TILE_WINDOWS=1:
// only those); GPUMEM_TILE_HISTORY=1 adds the state history: jumps and
// steps. It checks that each structure holds the trace and each zoom draws.
func BenchmarkTile(b *testing.B) {
	path := os.Getenv("GPUMEM_TILE")
	if path == "" {
		b.Skip("set GPUMEM_TILE=FILE to measure replay on a large snapshot")
	}
	for range b.N {
		tile(b, path)
	}
}

func tile(t testing.TB, path string) {
	s, err := snapshot.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	dev := 0
	for d := range s.Traces {
		if len(s.Traces[d].Events) > len(s.Traces[dev].Events) {
			dev = d
		}
	}
	n := len(s.Traces[dev].Events)
	h0 := heap()
	t.Logf("%s: device %d, %d events, model heap %.0f MiB", path, dev, n, float64(h0)/(1<<20))
	mib := func(a, b uint64) float64 { return (float64(b) - float64(a)) / (1 << 20) }

	start := time.Now()
	tl := NewTimeline(s, dev, KindActive)
	el := time.Since(start)
	h1 := heap()
	t.Logf("timeline: %v, %d elements, +%.0f MiB (%.1f B/event)", el, tl.Len(), mib(h0, h1), float64(h1-h0)/float64(n))
	if n == 0 || tl.Len() == 0 || tl.PeakBytes() == 0 {
		t.Fatalf("%s: %d events, %d elements, peak %d: not a tile to measure", path, n, tl.Len(), tl.PeakBytes())
	}
	t.Logf("timeline parts (MiB): %v", func() string {
		var b []string
		for k, v := range timelineBytes(tl) {
			b = append(b, fmt.Sprintf("%s %.1f", k, float64(v)/(1<<20)))
		}
		slices.Sort(b)
		return strings.Join(b, ", ")
	}())

	// The viewer bench's zooms: 8 steps in (both axes, around the
	// centre), Detail 15,000, 1600x600 pixels.
	T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())*1.04
	x0, x1, y0, y1 := 0.0, T, 0.0, P
	for k := 0; k <= 8; k++ {
		start = time.Now()
		f := tl.Query(x0, x1, 1600, 600, y0, y1)
		t.Logf("window %d [%.0f,%.0f]x[%.3g,%.3g]: %v, %d polygons, %d points, %d summarised (exact %v)",
			k, x0, x1, y0, y1, time.Since(start), len(f.IDs), len(f.Points)/2, f.Summarized, f.SummaryExact)
		if k == 0 && len(f.IDs) == 0 {
			t.Fatal("the whole trace drew nothing")
		}
		cx, cy := (x0+x1)/2, (y0+y1)/2
		x0, x1, y0, y1 = cx-(x1-x0)/3, cx+(x1-x0)/3, cy-(y1-y0)/3, cy+(y1-y0)/3
	}
	if os.Getenv("GPUMEM_TILE_WINDOWS") != "" {
		return
	}

	start = time.Now()
	c := NewCurves(s, dev)
	el = time.Since(start)
	h2 := heap()
	t.Logf("curves: %v, +%.0f MiB (%.1f B/event)", el, mib(h1, h2), (float64(h2)-float64(h1))/float64(n))
	if c.Len() == 0 {
		t.Fatal("no curve points")
	}

	start = time.Now()
	res := tl.Search("b'7f", "")
	el = time.Since(start)
	start = time.Now()
	res2 := tl.Search("", "py")
	t.Logf("search frames: %v (%d hits)", time.Since(start), len(res2))
	start = time.Now()
	res2 = tl.Search("b'7f0", "")
	t.Logf("search: first %v (%d hits, builds the index), another address %v (%d hits)", el, len(res), time.Since(start), len(res2))

	if os.Getenv("GPUMEM_TILE_HISTORY") != "" {
		start = time.Now()
		h := NewHistory(s, dev)
		el = time.Since(start)
		h3 := heap()
		t.Logf("history: %v, %d checkpoints every %d (dump: %d blocks, %d segments), +%.0f MiB", el, len(h.ckpt), h.every, len(h.baseSorted().blocks), len(h.baseSorted().segs), mib(h2, h3))
		var times []time.Duration
		for k := 0; k <= 20; k++ {
			start = time.Now()
			h.StateAt(h.Len()*k/20 - 1)
			times = append(times, time.Since(start))
		}
		slices.Sort(times)
		t.Logf("StateAt at 21 points: min %v, median %v, max %v", times[0], times[10], times[20])
		// The state view's steps: back one event at a time from the end,
		// as StateAt and as the viewer asks (StateTop, 20,000 segments).
		for _, top := range []int{0, 20000} {
			h.StateAt(h.Len() - 1)
			times = times[:0]
			for k := 2; k <= 11; k++ {
				start = time.Now()
				if top == 0 {
					h.StateAt(h.Len() - k)
				} else {
					h.StateTop(h.Len()-k, top)
				}
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			t.Logf("10 steps back from the end (top %d): min %v, median %v, max %v", top, times[0], times[5], times[9])
		}
		// A step forward is not an undo from the last state: it starts
		// from the nearest checkpoint after it.
		start = time.Now()
		h.StateTop(h.Len()-10, 20000)
		t.Logf("a step forward (top 20000): %v", time.Since(start))
		runtime.KeepAlive(h)
	}
	runtime.KeepAlive(tl)
	runtime.KeepAlive(c)
}

// timelineBytes lists the bytes each part of a Timeline holds (by
// capacity), for BenchmarkTile's report.
func timelineBytes(t *Timeline) map[string]int {
	t.waitBuckets()
	m := map[string]int{
		"src":       cap(t.src) * int(unsafe.Sizeof(elemSrc{})),
		"start+end": 4 * (cap(t.start) + cap(t.end)),
		"off0":      8 * cap(t.off0),
		"pos+byPos": 4 * (cap(t.pos) + cap(t.byPos)),
		"slid":      cap(t.slid),
		"aliveTree": 4 * cap(t.aliveTree.v),
		"frees":     4*(cap(t.freeEnd)+cap(t.freePos)) + 8*cap(t.freeSize),
		"runs":      4*cap(t.runStart) + 8*cap(t.runVal),
	}
	if r := t.cruns; r != nil {
		m["runs"] += 4*cap(r.code) + 8*(cap(r.cp)+cap(r.min)+cap(r.max))
	}
	if t.runIdx != nil {
		m["runIdx"] = 8 * (cap(t.runIdx.min) + cap(t.runIdx.max))
	}
	<-t.blocksBuilt
	m["blocks"] = 4*cap(t.blkEnd) + 8*cap(t.blkBelow) + cap(t.blkOff) + 8*cap(t.blockSize)
	for _, b := range t.buckets {
		m["buckets"] += 4*(cap(b.ids)+cap(b.ends.v)+cap(b.ends.mx)+cap(b.ends.mn)) + 64
	}
	return m
}

// BenchmarkTileZoomPan times the server's side of the viewer bench's zoom and
// pan on a large snapshot file: GPUMEM_TILE=../../bench/data/baseline-1000mb.pickle
// go test -run '^$' -bench TileZoomPan -v ./internal/replay
// (a benchmark that prints its figures once, whatever b.N, as BenchmarkTile). The page's keys, as
// browsertests/bench presses them: 8× "+" (each 1/1.5 of the span in
// both axes, around the centre), 8× "→" (a fifth of the span) and 8×
// "-", each one window query at 1600×600 pixels and Detail 15,000 (the
// page's default). The window index is started as the server starts it:
// beside the first whole-trace window for a timeline of 4 million
// elements or more (web's indexBesideFirst), else after it. The first pass
// starts right after that first answer, sooner than a page's first zoom
// comes (100-150 ms later), so that its first queries may come before the
// index is built: each says how far it was ("none", "blocks"). The second
// pass is the same keys again with the index built.
func BenchmarkTileZoomPan(b *testing.B) {
	path := os.Getenv("GPUMEM_TILE")
	if path == "" {
		b.Skip("set GPUMEM_TILE=FILE to time zoom and pan on a large snapshot")
	}
	s, err := snapshot.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	dev := s.DefaultDevice()
	// Each query runs on this goroutine: on its own thread, the thread's
	// CPU time is the query's, which other processes on a busy machine
	// do not inflate as they do the wall time.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu := threadCPU
	start := time.Now()
	tl := newTimeline(s, dev, KindActive, nil)
	b.Logf("%s: device %d, timeline of %d elements in %v", path, dev, tl.Len(), time.Since(start))
	T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())
	start, c0 := time.Now(), cpu()
	indexStart := time.Now()
	beside := tl.Len() >= 1<<22
	if beside {
		tl.StartIndexes()
	}
	f := tl.QueryWith(0, T, 1600, 600, 0, P, QueryOptions{Detail: 15000})
	b.Logf("first window (whole trace, no index; the index built beside it: %v): %v (CPU %v), %d polygons", beside, time.Since(start), cpu()-c0, len(f.IDs))
	tl.StartIndexes()
	for pass, name := range []string{"while the index is built", "with the index built"} {
		x0, x1, y0, y1 := 0.0, T, 0.0, P
		var times, cpus []time.Duration
		before := 0 // windows started before the index was built
		for k := range 24 {
			span, h := x1-x0, y1-y0
			switch {
			case k < 8: // "+"
				cx, cy := x0+span/2, y0+h/2
				span, h = span/1.5, h/1.5
				x0, y0 = cx-span/2, cy-h/2
			case k < 16: // "→"
				x0 += span * 0.2
			default: // "-"
				cx, cy := x0+span/2, y0+h/2
				span, h = min(span*1.5, T), min(h*1.5, P)
				x0, y0 = cx-span/2, cy-h/2
			}
			x0 = min(max(x0, 0), T-span)
			y0 = min(max(y0, 0), P-h)
			x1, y1 = x0+span, y0+h
			index := tl.IndexBuilt()
			if index != "built" {
				before++
			}
			q, c := time.Now(), cpu()
			f := tl.QueryWith(x0, x1, 1600, 600, y0, y1, QueryOptions{Detail: 15000})
			times = append(times, time.Since(q))
			cpus = append(cpus, cpu()-c)
			if k == 0 && pass == 0 {
				b.Logf("first zoom answered %v after the index build began", time.Since(indexStart))
			}
			if testing.Verbose() {
				b.Logf("pass %d key %d [%.0f,%.0f]x[%.3g,%.3g]: %v (CPU %v), %d polygons, %d points, %d summarised, index %s", pass, k, x0, x1, y0, y1, times[k], cpus[k], len(f.IDs), len(f.Points)/2, f.Summarized, index)
			}
		}
		slices.Sort(times)
		slices.Sort(cpus)
		b.Logf("%s: 24 windows (%d started before the index was built), wall median %v, max %v; the query thread's CPU median %v, max %v", name, before, times[12], times[23], cpus[12], cpus[23])
	}
	runtime.KeepAlive(tl)
}

// BenchmarkTileStateSteps times the server's side of the state view's
// open and first steps back on a large snapshot file, as the web server
// asks them: GPUMEM_TILE=../../bench/data/baseline-1000mb.pickle go test
// -run '^$' -bench TileStateSteps ./internal/replay (figures printed once,
// whatever b.N). The open is the Dump's state (StateTop, 20,000
// segments); the history is then started and five steps back are asked
// at once, as browsertests/bench does. "dump" starts the History from
// the Dump's sorted state (Dump.StartHistory); "snapshot" takes in the
// dump again (StartHistoryPaused, as the server did before #32 part
// 32l). Wall and process CPU (user+sys, all threads: the checkpoint
// build runs beside the steps).
func BenchmarkTileStateSteps(b *testing.B) {
	path := os.Getenv("GPUMEM_TILE")
	if path == "" {
		b.Skip("set GPUMEM_TILE=FILE to time the state view's steps on a large snapshot")
	}
	s, err := snapshot.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	dev := s.DefaultDevice()
	procCPU := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	live := func() float64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / (1 << 20)
	}
	for _, from := range []string{"dump", "snapshot", "dump"} {
		h0 := live()
		d := NewDump(s, dev)
		t0, c0 := time.Now(), procCPU()
		st := d.StateTop(20000)
		b.Logf("%s: open (Dump.StateTop) %v, CPU %v: %d of %d segments, %d blocks", from, time.Since(t0), procCPU()-c0, len(st.Segments), len(st.Segments)+st.Omitted, len(st.Blocks))
		hOpen := live()
		var h *History
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		t1, c1 := time.Now(), procCPU()
		if from == "dump" {
			h = d.StartHistory(nil, nil, nil)
		} else {
			h = StartHistoryPaused(s, dev, nil, nil, nil)
		}
		b.Logf("%s: start %v, CPU %v", from, time.Since(t1), procCPU()-c1)
		n := h.Len()
		for k := 2; k <= 6; k++ {
			t2, c2 := time.Now(), procCPU()
			h.StateTop(n-k, 20000)
			b.Logf("%s: step to %d: %v, CPU %v", from, n-k, time.Since(t2), procCPU()-c2)
		}
		runtime.ReadMemStats(&m1)
		b.Logf("%s: allocated from the start to the fifth step %.0f MiB", from, float64(m1.TotalAlloc-m0.TotalAlloc)/(1<<20))
		hSteps := live()
		t3 := time.Now()
		h.StateTop(n/2, 20000)
		b.Logf("%s: jump to the middle (%d) right after: %v", from, n/2, time.Since(t3))
		h.wait()
		b.Logf("%s: checkpoints built %v after the start; %d every %d", from, time.Since(t1), len(h.ckpt), h.every)
		cb := 0
		for i := range h.ckpt {
			cb += h.ckpt[i].bytes()
		}
		b.Logf("%s: live heap above the model: after the open %+.0f MiB, after five steps %+.0f MiB, with the checkpoints (%.0f MiB of them) and the jump's state %+.0f MiB",
			from, hOpen-h0, hSteps-h0, float64(cb)/(1<<20), live()-h0)
		runtime.KeepAlive(h)
	}
}
