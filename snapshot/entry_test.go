package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// TestEntryReader decodes every real snapshot with and without the
// trace-entry reader: the models must be identical.
func TestEntryReader(t *testing.T) {
	taken := 0
	for _, f := range corpus.Files(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			decodeWith := func(off bool) *Snapshot {
				s, err := decodeEntryReaderOff(raw, f, off)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			fast, slow := decodeWith(false), decodeWith(true)
			if !reflect.DeepEqual(fast, slow) {
				for i := range slow.Traces {
					if i < len(fast.Traces) && !reflect.DeepEqual(fast.Traces[i], slow.Traces[i]) {
						t.Errorf("trace %d differs", i)
					}
				}
				t.Fatalf("entry reader changes the model (strings %d vs %d, streams %v vs %v)",
					len(fast.Strings), len(slow.Strings), fast.Streams, slow.Streams)
			}
			for _, tr := range fast.Traces {
				if len(tr.Events) > 0 {
					taken++
				}
			}
		})
	}
	if taken == 0 {
		t.Error("no snapshot had trace entries: the comparison tested nothing")
	}
}

// decodeEntryReaderOff decodes b with the entry reader, or without it
// when off.
func decodeEntryReaderOff(b []byte, name string, off bool) (*Snapshot, error) {
	noEntryReader = off
	defer func() { noEntryReader = false }()
	return Decode(bytes.NewReader(b), name, nil)
}

// tracePickle writes by hand a protocol-4 snapshot {"segments": [],
// "device_traces": [[entry, ...]]}, memoizing strs and keys as Python does.
type tracePickle struct {
	b    []byte
	memo int            // the next memo index
	keys map[string]int // memo index of each key written
}

func newTracePickle() *tracePickle {
	p := &tracePickle{b: []byte{0x80, 4, '}', 0x94, '('}, memo: 1, keys: map[string]int{}}
	p.str("segments")
	p.b = append(p.b, ']', 0x94)
	p.str("device_traces")
	p.b = append(p.b, ']', 0x94, '(', ']', 0x94, '(')
	p.memo += 3 // the three lists
	return p
}

// text writes a SHORT_BINUNICODE, not memoized.
func (p *tracePickle) text(s string) {
	p.b = append(p.b, 0x8c, byte(len(s)))
	p.b = append(p.b, s...)
}

// str writes a memoized str.
func (p *tracePickle) str(s string) {
	p.text(s)
	p.b = append(p.b, 0x94)
	p.memo++
}

// key writes s the first time and a BINGET of it after.
func (p *tracePickle) key(s string) {
	if i, ok := p.keys[s]; ok {
		p.b = append(p.b, 'h', byte(i))
		return
	}
	p.keys[s] = p.memo
	p.str(s)
}

// beginEntry opens a trace entry's dict; 'u' closes it.
func (p *tracePickle) beginEntry() {
	p.b = append(p.b, '}', 0x94, '(')
	p.memo++
}

// end closes the trace, the trace list and the snapshot dict.
func (p *tracePickle) end() []byte {
	return append(p.b, 'e', 'e', 'u', '.')
}

// streamsPickle writes a snapshot with one trace of n entries on raw
// streams 1..n; keys and the action are memoized after their first use,
// so that all entries but the first go through the entry reader.
func streamsPickle(n int) []byte {
	p := newTracePickle()
	for i := 1; i <= n; i++ {
		p.beginEntry()
		p.key("action")
		p.key("alloc")
		p.key("addr")
		p.b = append(p.b, 'J', byte(i), byte(i>>8), byte(i>>16), byte(i>>24))
		p.key("size")
		p.b = append(p.b, 'K', 1)
		p.key("stream")
		p.b = append(p.b, 'J', byte(i), byte(i>>8), byte(i>>16), byte(i>>24))
		p.b = append(p.b, 'u')
		if i%1000 == 0 {
			p.b = append(p.b, 'e', '(')
		}
	}
	return p.end()
}

// TestStreamLimit: StreamID is 16 bits, so a snapshot with more streams is
// an error, with or without the entry reader.
func TestStreamLimit(t *testing.T) {
	for _, off := range []bool{false, true} {
		for _, tc := range []struct {
			n   int
			bad bool
		}{{MaxStreams, false}, {MaxStreams + 1, true}} {
			s, err := decodeEntryReaderOff(streamsPickle(tc.n), "streams.pickle", off)
			if tc.bad {
				if err == nil || !strings.Contains(err.Error(), "streams") {
					t.Errorf("entry reader off=%v, %d streams: err %v, want too many streams", off, tc.n, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("entry reader off=%v, %d streams: %v", off, tc.n, err)
			}
			if got := len(s.Streams) - 1; got != tc.n {
				t.Errorf("entry reader off=%v: %d streams, want %d", off, got, tc.n)
			}
			if ev := s.Traces[0].Events; len(ev) != tc.n || ev[tc.n-1].Stream != StreamID(tc.n) || ev[tc.n-1].Addr != uint64(tc.n) {
				t.Errorf("entry reader off=%v: last event %+v of %d", off, ev[len(ev)-1], len(ev))
			}
		}
	}
}

// TestEntryReaderMemoRewrite: a memo entry that held a key is rebound to
// another str (legal pickle; Python never writes it): entries read after
// that must see the new key, as the ordinary path does.
func TestEntryReaderMemoRewrite(t *testing.T) {
	p := newTracePickle()
	entry := func(i int) {
		p.beginEntry()
		p.key("action")
		p.key("alloc")
		p.key("addr")
		p.b = append(p.b, 'K', byte(i))
		p.key("size")
		p.b = append(p.b, 'K', 1)
		p.b = append(p.b, 'u')
	}
	for i := 1; i <= 5; i++ {
		entry(i)
	}
	// Rebind the memo entries of "addr" to "time_us" and of "alloc" to
	// "free_requested".
	p.text("time_us")
	p.b = append(p.b, 'q', byte(p.keys["addr"]), '0')
	p.text("free_requested")
	p.b = append(p.b, 'q', byte(p.keys["alloc"]), '0')
	for i := 6; i <= 10; i++ {
		entry(i)
	}
	b := p.end()

	var got [2]*Snapshot
	for j, off := range []bool{false, true} {
		s, err := decodeEntryReaderOff(b, "rewrite.pickle", off)
		if err != nil {
			t.Fatalf("entry reader off=%v: %v", off, err)
		}
		got[j] = s
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Fatalf("entry reader differs from the ordinary path:\n%+v\n%+v", got[0].Traces, got[1].Traces)
	}
	ev := got[0].Traces[0].Events
	if len(ev) != 10 || ev[4].Addr != 5 || ev[4].Flags&FlagHasTime != 0 || ev[9].Addr != 0 || ev[9].TimeUS != 10 ||
		ev[4].Action != ActionAlloc || ev[9].Action != ActionFreeRequested {
		t.Errorf("events %+v", ev)
	}
}

func TestCopyInPieces(t *testing.T) {
	const step = (256 << 10) / 8 // elements of a piece for uint64
	for _, n := range []int{0, 1, step - 1, step, step + 1, 3*step + 7} {
		src := make([]uint64, n)
		for i := range src {
			src[i] = uint64(i)*2654435761 + 1
		}
		dst := make([]uint64, n+1)
		copyInPieces(dst, src)
		for i := range src {
			if dst[i] != src[i] {
				t.Fatalf("n=%d: dst[%d] = %d, want %d", n, i, dst[i], src[i])
			}
		}
		if dst[n] != 0 {
			t.Fatalf("n=%d: wrote past the source", n)
		}
	}
}
