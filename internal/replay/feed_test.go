package replay

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// fedLayouts decodes data with an EventFeed and returns the default
// device's timeline laid out from the work done while decoding, and the
// one laid out after; got is nil when the fed work does not cover that
// device's trace (no entries, several traces) or the input is no snapshot.
//
// With sorted, the addresses live at the end are sorted before the
// layout and the address table let go, as NewTimelineFed does for a big
// trace.
func fedLayouts(data []byte, sorted bool) (got, want *Timeline, twice bool) {
	var fp *FedLayout
	s, err := snapshot.DecodeBytes(data, "fed", &snapshot.Options{Feed: func(f *snapshot.EventFeed) {
		fp = LayoutFeed(f, func(layout func()) { go layout() })
	}})
	if err != nil || fp == nil {
		return nil, nil, false
	}
	d := s.DefaultDevice()
	if d < 0 || d >= len(s.Traces) {
		return nil, nil, false
	}
	pre := fp.take(s.Traces[d].Events)
	if pre == nil {
		return nil, nil, false
	}
	if sorted {
		pre.sortedLive()
	}
	got = newTimeline(s, d, KindActive, pre)
	want = newTimeline(s, d, KindActive, nil)
	return got, want, fp.take(s.Traces[d].Events) != nil
}

// layoutDiff names the first part in which two timelines differ, "" when
// none does.
func layoutDiff(got, want *Timeline) string {
	// The device's segments, found by the walk over the dump.
	if ds := deviceSegments(want.s, want.device); !slices.Equal(got.segs, ds) || !slices.Equal(want.segs, ds) {
		return "device segments"
	}
	// The largest elements the layout listed, against a sort of them all.
	all := make([]int32, len(got.src))
	for i := range all {
		all[i] = int32(i)
	}
	<-got.wholeBuilt
	if !slices.Equal(got.wholeTop, got.largest(all, wholeDetail)) {
		return "largest elements"
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"elements", got.src, want.src}, {"starts", got.start, want.start}, {"ends", got.end, want.end},
		{"bottom edges", got.off0, want.off0}, {"positions", got.pos, want.pos}, {"slides", got.slid, want.slid},
		{"stack order", got.byPos, want.byPos},
		{"slid frees", [][]int32{got.freeEnd, got.freePos}, [][]int32{want.freeEnd, want.freePos}},
		{"slid frees' sizes", got.freeSize, want.freeSize},
		{"runs", got.cruns.code, want.cruns.code}, {"run checkpoints", got.cruns.cp, want.cruns.cp},
		{"timesteps and peak", []uint64{uint64(got.timesteps), got.peak}, []uint64{uint64(want.timesteps), want.peak}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			return c.what
		}
	}
	return ""
}

// TestFedLayoutMatches decodes every real snapshot with an EventFeed and
// checks that the layout done while decoding (pairing and stack) gives the
// same timeline as the one done after.
//
// The files take turns through the four ways the dump's blocks are looked
// up (one goroutine or two, in the address table or in the live addresses
// sorted, as NewTimelineFed leaves them for a big trace).
func TestFedLayoutMatches(t *testing.T) {
	saved := twoCoreMin
	defer func() { twoCoreMin = saved }()
	used := 0
	files := corpus.Files(t)
	for i, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		twoCoreMin = 2
		if i/2%2 == 1 {
			twoCoreMin = 1 << 30
		}
		got, want, twice := fedLayouts(data, i%2 == 1)
		if got == nil {
			continue // no entries, or several traces in the feed
		}
		used++
		if what := layoutDiff(got, want); what != "" {
			t.Errorf("%s: the fed layout's %s differ", filepath.Base(path), what)
		}
		if twice {
			t.Errorf("%s: the fed work was taken twice", filepath.Base(path))
		}
	}
	t.Logf("%d of %d snapshots laid out from the fed work", used, len(files))
	if used < len(files)/2 {
		t.Errorf("only %d of %d snapshots used the fed work", used, len(files))
	}
}

// twoCores makes the first view's layout take its two-goroutine path
// on inputs of any size (twoCoreMin), and returns what restores it.
func twoCores(t *testing.T) func() {
	t.Helper()
	saved := twoCoreMin
	twoCoreMin = 2
	return func() { twoCoreMin = saved }
}

// randomPickle is randomSnapshot written as a pickle.
func randomPickle(t testing.TB, r *rand.Rand, n int) []byte {
	var buf bytes.Buffer
	if err := snapshot.WritePickle(&buf, randomSnapshot(r, n)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestFedLayoutRandom is TestFedLayoutMatches on random traces (frees of
// blocks allocated before the trace, merged and split frees, blocks still
// allocated in the dump), which runs without the corpus too.
func TestFedLayoutRandom(t *testing.T) {
	defer twoCores(t)()
	r := rand.New(rand.NewSource(7))
	for iter := 0; iter < 40; iter++ {
		data := randomPickle(t, r, r.Intn(400))
		if iter%2 == 1 {
			// Segments out of address order (the walk over the dump
			// finds the device's segments and whether they are sorted).
			s := randomSnapshot(r, r.Intn(400))
			r.Shuffle(len(s.Segments), func(i, j int) { s.Segments[i], s.Segments[j] = s.Segments[j], s.Segments[i] })
			var buf bytes.Buffer
			if err := snapshot.WritePickle(&buf, s); err != nil {
				t.Fatal(err)
			}
			data = buf.Bytes()
		}
		got, want, _ := fedLayouts(data, iter%4 >= 2)
		if got == nil {
			t.Fatalf("iter %d: the fed work does not cover the only trace", iter)
		}
		if what := layoutDiff(got, want); what != "" {
			t.Fatalf("iter %d: the fed layout's %s differ", iter, what)
		}
	}
}

// FuzzFedLayout: whatever decodes lays out the same from the fed work as
// after the decode.
func FuzzFedLayout(f *testing.F) {
	r := rand.New(rand.NewSource(3))
	for _, n := range []int{0, 1, 5, 40} {
		f.Add(randomPickle(f, r, n))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, want, twice := fedLayouts(data, len(data)%2 == 0)
		if got == nil {
			return
		}
		if what := layoutDiff(got, want); what != "" {
			t.Fatalf("the fed layout's %s differ", what)
		}
		if twice {
			t.Fatal("the fed work was taken twice")
		}
	})
}

// TestFedTimelineDefersIndexes checks that NewTimelineFed leaves the
// indexes of narrower windows unbuilt through whole-trace windows (the
// first paint's), and that a narrower window, or StartIndexes, builds
// them, with the same answers as NewTimeline's.
func TestFedTimelineDefersIndexes(t *testing.T) {
	s := trainingTrace(20_000, 3)
	want := NewTimeline(s, 0, KindActive)
	T, P := float64(want.Timesteps()), float64(want.PeakBytes())
	for _, narrow := range []bool{true, false} {
		got := NewTimelineFed(s, 0, KindActive, nil)
		whole := got.QueryWith(0, T, 800, 300, 0, P, QueryOptions{Detail: 500})
		if !reflect.DeepEqual(whole, want.QueryWith(0, T, 800, 300, 0, P, QueryOptions{Detail: 500})) {
			t.Fatal("whole-trace window differs from NewTimeline's")
		}
		// Time enough for an eager build of this trace to finish.
		time.Sleep(50 * time.Millisecond)
		if got.bucketsReady() {
			t.Fatal("indexes built before a narrower window or StartIndexes asked for them")
		}
		if narrow {
			part := got.QueryWith(T/4, T/2, 800, 300, 0, P/2, QueryOptions{Detail: 500})
			if !reflect.DeepEqual(part, want.QueryWith(T/4, T/2, 800, 300, 0, P/2, QueryOptions{Detail: 500})) {
				t.Fatal("narrower window differs from NewTimeline's")
			}
		} else {
			got.StartIndexes()
			got.waitBuckets()
		}
		// A narrower window is answered without waiting for the
		// indexes, but starts their build.
		select {
		case <-got.bucketsBuilt:
		case <-time.After(time.Minute):
			t.Fatalf("indexes not built (narrow window: %v)", narrow)
		}
	}
}

// TestIndexBuildPauses checks that the index build calls the pause set
// with SetIndexPause and does not go on while it blocks: held from the
// start, neither the stack blocks nor the buckets get built, and windows
// are answered meanwhile, as the index answers them once let go.
func TestIndexBuildPauses(t *testing.T) {
	s := trainingTrace(300_000, 5) // several pauses' worth of elements
	tl := NewTimelineFed(s, 0, KindActive, nil)
	want := NewTimeline(s, 0, KindActive)
	T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())
	var calls atomic.Int32
	hold := make(chan struct{})
	tl.SetIndexPause(func() {
		calls.Add(1)
		<-hold
	})
	tl.StartIndexes()
	time.Sleep(50 * time.Millisecond)
	if tl.blocksReady() || tl.bucketsReady() || calls.Load() != 1 {
		t.Fatalf("held: blocks built %v, buckets built %v, %d pauses; want neither built, one pause", tl.blocksReady(), tl.bucketsReady(), calls.Load())
	}
	for _, w := range [][4]float64{{T / 4, T / 2, 0, P}, {T / 3, T / 2, P / 3, P / 2}} {
		got := tl.QueryWith(w[0], w[1], 600, 300, w[2], w[3], QueryOptions{Detail: 300})
		if !reflect.DeepEqual(got, want.QueryWith(w[0], w[1], 600, 300, w[2], w[3], QueryOptions{Detail: 300})) {
			t.Fatalf("window %v answered during the pause differs from the index's", w)
		}
	}
	close(hold)
	tl.waitBuckets()
	if n := calls.Load(); n < 4 {
		t.Fatalf("%d pauses in the whole build of %d elements, want one every %d", n, tl.Len(), pauseEvery+1)
	}
}

// TestFedPairerGrows feeds a trace with thousands of addresses live at
// once (the address table grows several times, moving each entry's
// stack position with it), allocations of an address still live (the
// later one replaces it, as memory_viz's Map does) and frees of addresses
// never allocated, in small parts whose arrays have no room to spare (the
// stacker's columns grow past what was reserved), and checks the layout
// against the one done after, with the address table's slots prefetched
// and not.
func TestFedPairerGrows(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	var events []snapshot.Event
	alloc := func(a, size uint64) {
		events = append(events, snapshot.Event{Action: snapshot.ActionAlloc, Addr: a, Size: size})
	}
	free := func(a, size uint64) {
		events = append(events,
			snapshot.Event{Action: snapshot.ActionFreeRequested, Addr: a, Size: size},
			snapshot.Event{Action: snapshot.ActionFreeCompleted, Addr: a, Size: size})
	}
	type blk struct{ a, s uint64 }
	var live []blk
	next := uint64(1 << 40)
	for len(events) < 60_000 {
		switch k := r.Intn(100); {
		case k < 55 || len(live) == 0:
			s := uint64(512 * (1 + r.Intn(64)))
			live = append(live, blk{next, s})
			alloc(next, s)
			next += s
		case k < 57: // an address still live, allocated again
			b := live[r.Intn(len(live))]
			alloc(b.a, b.s)
		case k < 59: // an address the trace never allocated
			free(uint64(r.Intn(1<<20))*512, 512)
		default:
			i := r.Intn(len(live))
			if r.Intn(3) == 0 {
				i = len(live) - 1
			}
			free(live[i].a, live[i].s)
			live = append(live[:i], live[i+1:]...)
		}
	}
	if len(live) < 4096 {
		t.Fatalf("%d addresses live at the end: the table does not grow", len(live))
	}
	s := &snapshot.Snapshot{Strings: []string{""}, Streams: []int64{0}, Stacks: snapshot.StackTable{Offsets: []int32{0, 0}}}
	s.Traces = []snapshot.Trace{{Events: events}}
	s.Traces[0].Viz = vizEvents(s, 0)
	want := newTimeline(s, 0, KindActive, nil)
	saved := prefetchSlots
	defer func() { prefetchSlots = saved }()
	for _, prefetchSlots = range []int{saved, 0} { // 0: prefetched
		// The table grown by doubling, or past 4,096 slots to the size
		// a dump's count of allocated blocks gives at once.
		savedJump := jumpFrom
		defer func() { jumpFrom = savedJump }()
		jumpFrom = 4096
		for _, live := range []int{0, 1 << 15} {
			var f fedPairer
			for n := 0; n < len(events); {
				n = min(n+1+r.Intn(3000), len(events))
				f.next(events[:n:n], 0, live)
				if size := len(f.p.live.slots); size > 4096 && size < 1<<16 && live > 0 {
					t.Fatalf("live %d: the table grew to %d slots, not at once to %d", live, size, 1<<16)
				}
			}
			if size := len(f.p.live.slots); (size == 1<<16) != (live > 0) {
				t.Fatalf("live %d: the table has %d slots at the end", live, size)
			}
			got := newTimeline(s, 0, KindActive, f.p)
			if what := layoutDiff(got, want); what != "" {
				t.Fatalf("prefetching from %d slots, live %d: the fed layout's %s differ", prefetchSlots, live, what)
			}
		}
	}
}
