package snapshot

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// decodeSplit decodes b in memory with the splitter starting at frac of
// the input whatever its size, or without a splitter when frac < 0; it
// returns how many entries the splitter's part gave.
func decodeSplit(b []byte, name string, frac float64) (*Snapshot, int64, error) {
	savedMin, savedFrac, savedFirst := splitMin, splitFrac, splitSkimFirst
	defer func() { splitMin, splitFrac, splitSkimFirst = savedMin, savedFrac, savedFirst }()
	if frac < 0 {
		splitMin = math.MaxInt
	} else {
		splitMin, splitFrac, splitSkimFirst = 0, frac, true
	}
	before := splitMerged.Load()
	s, err := DecodeBytes(b, name, nil)
	return s, splitMerged.Load() - before, err
}

// sameDecode checks that the splitter changes nothing: the same model, or
// the same error.
// The part is offered and answered before the decoder starts (the
// splitter's acceptEarly), then again answered by the decoder (accept);
// it returns the entries the splitter gave in both.
func sameDecode(t *testing.T, b []byte, name string, frac float64) int64 {
	t.Helper()
	defer func(saved bool) { splitAcceptEarly = saved }(splitAcceptEarly)
	splitAcceptEarly = true
	early := sameDecodeOnce(t, b, name, frac)
	splitAcceptEarly = false
	late := sameDecodeOnce(t, b, name, frac)
	if (early > 0) != (late > 0) {
		t.Errorf("split at %.2f: the splitter gave %d entries when it answered its offer, %d when the decoder did", frac, early, late)
	}
	return early + late
}

func sameDecodeOnce(t *testing.T, b []byte, name string, frac float64) int64 {
	t.Helper()
	want, _, werr := decodeSplit(b, name, -1)
	got, merged, gerr := decodeSplit(b, name, frac)
	if (werr == nil) != (gerr == nil) || werr != nil && werr.Error() != gerr.Error() {
		t.Fatalf("split at %.2f (early answer %v): error %v, want %v", frac, splitAcceptEarly, gerr, werr)
	}
	if werr != nil {
		return merged
	}
	if !reflect.DeepEqual(got, want) {
		for i := range want.Traces {
			if i < len(got.Traces) && !reflect.DeepEqual(got.Traces[i], want.Traces[i]) {
				ge, we := got.Traces[i].Events, want.Traces[i].Events
				for k := range min(len(ge), len(we)) {
					if ge[k] != we[k] {
						t.Errorf("trace %d event %d: %+v, want %+v", i, k, ge[k], we[k])
						break
					}
				}
				t.Errorf("trace %d differs (%d vs %d events)", i, len(ge), len(we))
			}
		}
		t.Fatalf("split at %.2f (early answer %v) changes the model (metas %d vs %d, strings %d vs %d, streams %v vs %v)",
			frac, splitAcceptEarly, len(got.Metas), len(want.Metas), len(got.Strings), len(want.Strings), got.Streams, want.Streams)
	}
	return merged
}

// TestSplitMatchesSequential decodes every real snapshot with the splitter
// starting at several places and without it: the models must be
// identical. (Real files give the splitter little: PyTorch writes each
// entry's frames as a list of its own and its compile context as a str of
// its own, which the splitter leaves to the decoder; the tiled benchmark
// files share them through the memo. TestSplitSynthetic checks that the
// splitter's entries are merged.)
func TestSplitMatchesSequential(t *testing.T) {
	var merged atomic.Int64
	files := 0
	for _, f := range corpus.Files(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) < 2 || raw[0] != 0x80 || raw[1] < 4 {
			continue
		}
		files++
		t.Run(filepath.Base(f), func(t *testing.T) {
			for _, frac := range []float64{0, 0.1, 0.45, 0.8} {
				merged.Add(sameDecode(t, raw, f, frac))
			}
		})
	}
	if files == 0 {
		t.Error("no protocol 4+ snapshot: the comparison tested nothing")
	}
	t.Logf("%d protocol 4+ snapshots, %d entries from the splitter", files, merged.Load())
}

// splitPickle writes a snapshot with n entries in batches of batch
// (Python's pickler writes 1000), with FRAME opcodes between opcodes
// inside entries every frameEvery entries, compile contexts, user
// metadata, several streams and, when newStacks, a stack first written
// in the middle of the trace and used after.
func splitPickle(n, batch, frameEvery int, newStacks bool) []byte {
	return splitPickleOdd(n, batch, frameEvery, newStacks, 0)
}

// splitPickleOdd is splitPickle with entry odd (when > 0) written with its
// addr before its action: a trace entry all the same, which the
// splitter's skim does not count.
func splitPickleOdd(n, batch, frameEvery int, newStacks bool, odd int) []byte {
	p := newTracePickle()
	frame := func() { p.b = append(p.b, 0x95, 0, 0, 0, 0, 0, 0, 0, 0) }
	stack := -1
	for i := 1; i <= n; i++ {
		p.beginEntry()
		if frameEvery > 0 && i%frameEvery == 0 {
			frame()
		}
		if i == odd {
			p.key("addr")
			p.b = append(p.b, 'K', 1)
		}
		p.key("action")
		switch i % 3 {
		case 0:
			p.key("alloc")
		case 1:
			p.key("free_requested")
		default:
			p.key("free_completed")
		}
		if i != odd {
			p.key("addr")
			p.b = append(p.b, 'J', byte(i/3), byte(i>>11), 0, 0)
		}
		if frameEvery > 0 && i%frameEvery == 1 {
			frame()
		}
		p.key("size")
		p.b = append(p.b, 'M', byte(i), 2)
		p.key("stream")
		p.b = append(p.b, 'K', byte(i%3))
		p.key("time_us")
		p.b = append(p.b, 0x8a, 5, byte(i), byte(i>>8), byte(i>>16), 0, 1)
		switch {
		case i%7 == 0:
			p.key("compile_context")
			p.key("ctx-" + string(rune('a'+i%5)))
		case i%13 < 6:
			// Runs of entries with a str of their own, as PyTorch 2.6+
			// writes compile_context "N/A" in each (the splitter keeps
			// one regionMeta for a run of equal ones).
			p.key("compile_context")
			p.str("N/A")
		case i%13 < 9: // a literal that differs
			p.key("compile_context")
			p.text("n/a")
		}
		if i%11 == 0 {
			p.key("user_metadata")
			if i%2 == 0 {
				p.b = append(p.b, 'N')
			} else {
				p.key("meta")
			}
		}
		p.key("frames")
		switch {
		case newStacks && i == n/2:
			// A new stack of one new frame.
			stack = p.memo
			p.b = append(p.b, ']', 0x94, '(', '}', 0x94, '(')
			p.memo += 2
			p.str("filename")
			p.str("f.py")
			p.str("name")
			p.str("fn")
			p.str("line")
			p.b = append(p.b, 'K', 7, 'u', 'e')
		case stack >= 0 && i%2 == 0:
			p.b = append(p.b, 'j', byte(stack), byte(stack>>8), byte(stack>>16), 0)
		default:
			p.b = append(p.b, ']')
		}
		p.b = append(p.b, 'u')
		if i%batch == 0 && i < n {
			p.b = append(p.b, 'e', '(')
		}
	}
	return p.end()
}

// TestSplitSynthetic covers what real files seldom have: frames inside
// entries, metadata, streams, a stack first seen mid-trace (the
// splitter's part ends there and the decoder reads on).
func TestSplitSynthetic(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		n, batch, frameEvery int
		newStacks            bool
		wantMerged           bool
	}{
		{"plain", 5000, 1000, 0, false, true},
		{"frames", 5000, 1000, 97, false, true},
		{"new stack", 5000, 1000, 0, true, true},
		{"small batches", 3000, 7, 13, true, true},
		{"one batch", 500, 1000, 0, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := splitPickle(tc.n, tc.batch, tc.frameEvery, tc.newStacks)
			merged := int64(0)
			for _, frac := range []float64{0, 0.2, 0.5, 0.9} {
				merged += sameDecode(t, b, tc.name, frac)
				// Cut short, anywhere: the same error either way.
				for _, cut := range []int{len(b) / 3, len(b) / 2, len(b) - 5} {
					sameDecode(t, b[:cut], tc.name, frac)
				}
			}
			if (merged > 0) != tc.wantMerged {
				t.Errorf("splitter gave %d entries, want some: %v", merged, tc.wantMerged)
			}
		})
	}
}

// TestSplitMispredicted: an entry the skim does not count before the
// splitter's part makes the decoder reach the predicted count early; the
// part is then dropped and the decoder reads it, with the same result.
func TestSplitMispredicted(t *testing.T) {
	b := splitPickleOdd(60000, 1000, 0, false, 3)
	if merged := sameDecode(t, b, "odd", 0.6); merged != 0 {
		t.Errorf("splitter gave %d entries from a mispredicted part", merged)
	}
	if merged := sameDecode(t, splitPickle(60000, 1000, 0, false), "even", 0.6); merged == 0 {
		t.Error("splitter gave nothing on the same file without the odd entry")
	}
}

// TestSplitViewer: a viewer's decode (one with a Feed) splits its input
// from splitMin on, as a command's decode does, and what it publishes
// says so; under splitMin neither splits.
func TestSplitViewer(t *testing.T) {
	b := splitPickle(60000, 1000, 0, false)
	savedMin, savedFrac, savedFirst := splitMin, splitFrac, splitSkimFirst
	defer func() { splitMin, splitFrac, splitSkimFirst = savedMin, savedFrac, savedFirst }()
	splitFrac, splitSkimFirst = 0.3, true
	for _, tc := range []struct {
		name      string
		min       int
		feed      bool
		wantSplit bool
	}{
		{"command at splitMin", len(b), false, true},
		{"viewer at splitMin", len(b), true, true},
		{"command under splitMin", len(b) + 1, false, false},
		{"viewer under splitMin", len(b) + 1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			splitMin = tc.min
			opt := &Options{}
			var feed *EventFeed
			firstCap := -1
			if tc.feed {
				opt.Feed = func(f *EventFeed) {
					feed = f
					f.published = func(evs []Event) {
						if firstCap < 0 && len(evs) > 0 {
							firstCap = cap(evs)
						}
					}
				}
			}
			before := splitMerged.Load()
			s, err := DecodeBytes(b, "fed", opt)
			if err != nil {
				t.Fatal(err)
			}
			if merged := splitMerged.Load() - before; (merged > 0) != tc.wantSplit {
				t.Errorf("splitter gave %d entries, want some: %v", merged, tc.wantSplit)
			}
			if feed == nil {
				return
			}
			// A reader sizes its arrays from Expected, the room reserved
			// from the input's size (this dense synthetic trace outgrows
			// it): while the splitter reads, the published array's
			// capacity ends at its part, short of that room.
			c := firstCap
			if len(s.Traces[0].Events) == 0 || feed.Expected() < c {
				t.Errorf("Expected() = %d, less than the first capacity published %d", feed.Expected(), c)
			}
			if tc.wantSplit && c >= feed.Expected() {
				t.Errorf("first published capacity %d, Expected() %d: the split's shorter array not seen", c, feed.Expected())
			}
		})
	}
}

// FuzzSplit: on any input, the splitter's decode is the one-core decode
// (the same model or the same error).
func FuzzSplit(f *testing.F) {
	f.Add(splitPickle(300, 7, 13, true), uint8(50))
	f.Add(splitPickle(100, 10, 0, false), uint8(10))
	f.Add([]byte("\x80\x04}(\x8c\x08segments]u."), uint8(0))
	f.Fuzz(func(t *testing.T, b []byte, at uint8) {
		sameDecode(t, b, "fuzz", float64(at%101)/100)
	})
}

// TestDumpHint: with the splitter's count of the dump (dumpHint), the
// segments and blocks of every real snapshot are allocated for their
// number at once: never more room than doubling gives, and less on the
// files where doubling overshoots.
func TestDumpHint(t *testing.T) {
	tighter := 0
	for _, f := range corpus.Files(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) < 2 || raw[0] != 0x80 || raw[1] < 4 {
			continue
		}
		got, _, err := decodeSplit(raw, f, 0)
		if err != nil {
			continue // sameDecode checks the errors
		}
		want, _, err := decodeSplit(raw, f, -1)
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string, n, gotCap, wantCap int) {
			if gotCap > max(wantCap, n+n/32+256) {
				t.Errorf("%s: %d %s in room for %d (doubling: %d)", filepath.Base(f), n, what, gotCap, wantCap)
			}
			if gotCap < wantCap {
				tighter++
			}
		}
		check("blocks", len(got.Blocks), cap(got.Blocks), cap(want.Blocks))
		check("segments", len(got.Segments), cap(got.Segments), cap(want.Segments))
	}
	if tighter == 0 {
		t.Error("the count of the dump made no array smaller: it was not used")
	}
	t.Logf("%d arrays allocated once for their size", tighter)
}

// sharedStacksPickle writes a snapshot whose entries have frames lists of
// their own, memoized as PyTorch memoizes them, every third, and refer to
// those of entries before them (a tiled snapshot's shape) every third:
// inside the splitter's part, and after it, where the decoder reads on
// once a frame first written at entry cut ends the part (cut 0: none).
// Those references resolve through the memo entries the merge keeps as
// runs (pickle.Decoder.MemoizeRun).
func sharedStacksPickle(n, cut int) []byte {
	p := newTracePickle()
	frame := func(name string) int {
		i := p.memo
		p.b = append(p.b, '}', 0x94, '(')
		p.memo++
		p.key("filename")
		p.key("f.py")
		p.key("name")
		p.str(name)
		p.key("line")
		p.b = append(p.b, 'K', byte(len(name)), 'u', 0x94)
		p.memo++
		return i
	}
	var frames, lists []int
	for i := 1; i <= n; i++ {
		p.beginEntry()
		p.key("action")
		p.key([]string{"alloc", "free_requested", "free_completed"}[i%3])
		p.key("addr")
		p.b = append(p.b, 'J', byte(i), byte(i>>8), byte(i>>16), 0)
		p.key("size")
		p.b = append(p.b, 'M', byte(i), 1)
		p.key("frames")
		switch {
		case i == 1 || i == cut:
			lists = append(lists, p.memo)
			p.b = append(p.b, ']', 0x94, '(')
			p.memo++
			frames = append(frames, frame("fn"+string(rune('a'+i%26))))
			p.b = append(p.b, 'e')
		case i%3 == 0:
			lists = append(lists, p.memo)
			p.b = append(p.b, ']', 0x94, '(')
			p.memo++
			for k := range 1 + i%2 {
				f := frames[(i+k)%len(frames)]
				p.b = append(p.b, 'j', byte(f), byte(f>>8), byte(f>>16), 0)
			}
			p.b = append(p.b, 'e')
		case i%3 == 1:
			l := lists[(i*7)%len(lists)]
			p.b = append(p.b, 'j', byte(l), byte(l>>8), byte(l>>16), 0)
		default:
			p.b = append(p.b, ']', 0x94) // empty, memoized
			p.memo++
		}
		p.b = append(p.b, 'u')
		if i%1000 == 0 && i < n {
			p.b = append(p.b, 'e', '(')
		}
	}
	return p.end()
}

// TestSplitSharedStacks: entries that refer to the frames lists of
// entries the splitter read get the same stacks as on one core, whether
// the splitter or the decoder reads them.
func TestSplitSharedStacks(t *testing.T) {
	for _, cut := range []int{0, 6500} {
		b := sharedStacksPickle(9000, cut)
		merged := int64(0)
		for _, frac := range []float64{0, 0.3, 0.6} {
			merged += sameDecode(t, b, "shared", frac)
		}
		if merged == 0 {
			t.Errorf("cut %d: the splitter gave nothing", cut)
		}
	}
}
