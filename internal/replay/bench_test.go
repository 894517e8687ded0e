package replay

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"
	"time"

	"github.com/gpumem/gpumem/snapshot"
)

// trainingTrace makes a synthetic training-loop trace of about n events:
// persistent weights, activations freed mostly in reverse order with some
// out of order (which slides the stack), and short-lived temporaries.
func trainingTrace(n int, seed int64) *snapshot.Snapshot {
	r := rand.New(rand.NewSource(seed))
	events := make([]snapshot.Event, 0, n+1024)
	next := uint64(0x7f0000000000)
	alloc := func(size uint64) uint64 {
		a := next
		next += (size + 511) &^ 511
		events = append(events, snapshot.Event{Action: snapshot.ActionAlloc, Addr: a, Size: size})
		return a
	}
	free := func(a, size uint64) {
		events = append(events,
			snapshot.Event{Action: snapshot.ActionFreeRequested, Addr: a, Size: size},
			snapshot.Event{Action: snapshot.ActionFreeCompleted, Addr: a, Size: size})
	}
	for i := 0; i < 500; i++ {
		alloc(uint64(1 << uint(10+r.Intn(16))))
	}
	type blk struct{ a, s uint64 }
	for len(events) < n {
		var acts []blk
		for l := 0; l < 200 && len(events) < n; l++ {
			s := uint64(1+r.Intn(1<<uint(8+r.Intn(18)))) * 4
			acts = append(acts, blk{alloc(s), s})
			for k := r.Intn(3); k > 0; k-- { // temporaries
				ts := uint64(1 + r.Intn(1<<20))
				free(alloc(ts), ts)
			}
		}
		for len(acts) > 0 && len(events) < n {
			k := len(acts) - 1
			if r.Intn(4) == 0 {
				k = r.Intn(len(acts))
			}
			free(acts[k].a, acts[k].s)
			acts = append(acts[:k], acts[k+1:]...)
		}
	}
	s := &snapshot.Snapshot{Strings: []string{""}, Streams: []int64{0}, Stacks: snapshot.StackTable{Offsets: []int32{0, 0}}}
	s.Traces = []snapshot.Trace{{Events: events}}
	s.Traces[0].Viz = vizEvents(s, 0)
	return s
}

func BenchmarkTimelineBuild(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		s := trainingTrace(n, 1)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				NewTimeline(s, 0, KindActive)
			}
		})
	}
}

func BenchmarkSearch(b *testing.B) {
	s := trainingTrace(1_000_000, 1)
	tl := NewTimeline(s, 0, KindActive)
	b.ResetTimer()
	tl.Search("warm", "") // builds the index
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Alternate queries: a repeated query is answered from a cache.
		tl.Search([]string{"b'7f00000", "b'7f00001"}[i%2], "")
	}
}

func BenchmarkTimelineQuery(b *testing.B) {
	s := trainingTrace(1_000_000, 1)
	tl := NewTimeline(s, 0, KindActive)
	T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())
	for _, w := range []struct {
		name   string
		t0, t1 float64
	}{{"full", 0, T}, {"tenth", T * 0.45, T * 0.55}, {"narrow", T * 0.5, T*0.5 + 2000}} {
		b.Run(w.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				tl.Query(w.t0, w.t1, 1600, 600, 0, P)
			}
		})
	}
}

// BenchmarkScale10M builds the timeline, history and curves of a
// 10-million-event trace and queries them, printing each figure:
// go test -run '^$' -bench Scale10M ./internal/replay (about 2 GB of
// memory; one iteration takes tens of seconds, so -benchtime 1x is what
// runs anyway). It checks what it measures: every allocation is an
// element, every query draws, the history and curves cover the trace.
func BenchmarkScale10M(b *testing.B) {
	for range b.N {
		scale(b, 10_000_000)
	}
}

// TestScaleSmall runs BenchmarkScale10M's checks on 100,000 events.
func TestScaleSmall(t *testing.T) { scale(t, 100_000) }

func scale(t testing.TB, n int) {
	s := trainingTrace(n, 7)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := time.Now()
	tl := NewTimeline(s, 0, KindActive)
	build := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	t.Logf("%d events: %d elements, %d timesteps, build %v, timeline heap %.0f MiB",
		len(s.Traces[0].Events), tl.Len(), tl.Timesteps(), build, float64(m1.HeapAlloc-m0.HeapAlloc)/(1<<20))
	allocs := 0
	for _, e := range s.Traces[0].Events {
		if e.Action == snapshot.ActionAlloc {
			allocs++
		}
	}
	if tl.Len() < allocs || tl.PeakBytes() <= 0 {
		t.Fatalf("timeline: %d elements for %d allocations, peak %d", tl.Len(), allocs, tl.PeakBytes())
	}
	T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())
	for _, w := range []struct {
		name           string
		t0, t1, y0, y1 float64
	}{
		{"full", 0, T, 0, P},
		{"tenth", T * 0.45, T * 0.55, 0, P},
		{"narrow", T * 0.5, T*0.5 + 5000, 0, P},
		{"zoom-y", T * 0.5, T*0.5 + 50000, P * 0.3, P * 0.31},
	} {
		start := time.Now()
		f := tl.Query(w.t0, w.t1, 1600, 600, w.y0, w.y1)
		t.Logf("query %-7s %8v: %d polygons, %d points", w.name, time.Since(start), len(f.IDs), len(f.Points)/2)
		if len(f.IDs) == 0 {
			t.Fatalf("query %s drew nothing", w.name)
		}
	}
	start = time.Now()
	for k := 0; k < 100; k++ {
		tl.HitTest(T*float64(k)/100, P*0.3)
	}
	t.Logf("hit test: %v each", time.Since(start)/100)
	start = time.Now()
	h := NewHistory(s, 0)
	t.Logf("history: build %v, %d checkpoints every %d events", time.Since(start), len(h.ckpt), h.every)
	if h.Len() < allocs {
		t.Fatalf("history has %d events for %d allocations", h.Len(), allocs)
	}
	start = time.Now()
	for k := 0; k < 20; k++ {
		h.StateAt(h.Len() * k / 20)
	}
	t.Logf("StateAt: %v each", time.Since(start)/20)
	runtime.GC()
	runtime.ReadMemStats(&m0)
	start = time.Now()
	c := NewCurves(s, 0)
	el := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	t.Logf("curves: build %v, heap %.0f MiB", el, (float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/(1<<20))
	if c.Len() == 0 {
		t.Fatal("no curve points")
	}
	start = time.Now()
	tl.Search("b'7f00000", "")
	el = time.Since(start)
	start = time.Now()
	tl.Search("b'7f00001", "")
	t.Logf("search: first %v (builds the index), another address %v", el, time.Since(start))
	start = time.Now()
	c.Downsample(0, c.Len(), 1600)
	t.Logf("downsample 1600 buckets: %v", time.Since(start))
}
