package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestEntryReader decodes every real snapshot with and without the
// trace-entry reader: the models must be identical.
func TestEntryReader(t *testing.T) {
	dir := corpusDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.pickle"))
	if err != nil || len(files) == 0 {
		t.Skipf("no pickles in %s", dir)
	}
	taken := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			decodeWith := func(off bool) *Snapshot {
				noEntryReader = off
				defer func() { noEntryReader = false }()
				s, err := Decode(bytes.NewReader(raw), f, nil)
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

// streamsPickle writes a protocol-4 snapshot with one trace of n entries on
// raw streams 1..n; keys and the action are memoized after their first use,
// so that all entries but the first go through the entry reader.
func streamsPickle(n int) []byte {
	b := []byte{0x80, 4, '}', 0x94, '('}
	str := func(s string) { b = append(b, 0x8c, byte(len(s))); b = append(b, s...); b = append(b, 0x94) }
	str("segments")
	b = append(b, ']', 0x94)
	str("device_traces")
	b = append(b, ']', 0x94, '(', ']', 0x94, '(')
	memo := 5 // 0 dict, 1 "segments", 2 [], 3 "device_traces", 4 []
	memo++    // 5 the trace list
	keys := map[string]int{}
	key := func(s string) {
		if i, ok := keys[s]; ok {
			b = append(b, 'h', byte(i))
			return
		}
		str(s)
		keys[s] = memo
		memo++
	}
	for i := 1; i <= n; i++ {
		b = append(b, '}', 0x94, '(')
		memo++
		key("action")
		key("alloc")
		key("addr")
		b = append(b, 'J', byte(i), byte(i>>8), byte(i>>16), byte(i>>24))
		key("size")
		b = append(b, 'K', 1)
		key("stream")
		b = append(b, 'J', byte(i), byte(i>>8), byte(i>>16), byte(i>>24))
		b = append(b, 'u')
		if i%1000 == 0 {
			b = append(b, 'e', '(')
		}
	}
	return append(b, 'e', 'e', 'u', '.')
}

// TestStreamLimit: StreamID is 16 bits, so a snapshot with more streams is
// an error, with or without the entry reader.
func TestStreamLimit(t *testing.T) {
	for _, off := range []bool{false, true} {
		for _, tc := range []struct {
			n   int
			bad bool
		}{{MaxStreams, false}, {MaxStreams + 1, true}} {
			noEntryReader = off
			s, err := Decode(bytes.NewReader(streamsPickle(tc.n)), "streams.pickle", nil)
			noEntryReader = false
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
	b := []byte{0x80, 4, '}', 0x94, '('}
	str := func(s string) { b = append(b, 0x8c, byte(len(s))); b = append(b, s...) }
	str("segments")
	b = append(b, 0x94, ']', 0x94)
	str("device_traces")
	b = append(b, 0x94, ']', 0x94, '(', ']', 0x94, '(')
	memo := 6
	keys := map[string]int{}
	key := func(s string) {
		if i, ok := keys[s]; ok {
			b = append(b, 'h', byte(i))
			return
		}
		str(s)
		b = append(b, 0x94)
		keys[s] = memo
		memo++
	}
	entry := func(i int) {
		b = append(b, '}', 0x94, '(')
		memo++
		key("action")
		key("alloc")
		key("addr")
		b = append(b, 'K', byte(i))
		key("size")
		b = append(b, 'K', 1)
		b = append(b, 'u')
	}
	for i := 1; i <= 5; i++ {
		entry(i)
	}
	// Rebind the memo entries of "addr" to "time_us" and of "alloc" to
	// "free_requested".
	str("time_us")
	b = append(b, 'q', byte(keys["addr"]), '0')
	str("free_requested")
	b = append(b, 'q', byte(keys["alloc"]), '0')
	for i := 6; i <= 10; i++ {
		entry(i)
	}
	b = append(b, 'e', 'e', 'u', '.')

	var got [2]*Snapshot
	for j, off := range []bool{false, true} {
		noEntryReader = off
		s, err := Decode(bytes.NewReader(b), "rewrite.pickle", nil)
		noEntryReader = false
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
