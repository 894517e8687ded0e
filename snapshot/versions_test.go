package snapshot

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// versionsOf lists every Version a snapshot holds: trace entries, then
// segments, then blocks.
func versionsOf(s *Snapshot) []int32 {
	var v []int32
	for _, tr := range s.Traces {
		for i := range tr.Events {
			v = append(v, tr.Version(i))
		}
	}
	for i := range s.Segments {
		v = append(v, s.Segments[i].Version)
	}
	for i := range s.Blocks {
		v = append(v, s.Blocks[i].Version)
	}
	return v
}

// checkVersionsAhead decodes data every way (mapped file, stream, bytes)
// and checks that the versions counted beside the decode are annotate's
// own, counted afresh; ahead says whether the versioner's counts must
// have been used.
func checkVersionsAhead(t *testing.T, name string, data []byte, ahead bool) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.pickle")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, way := range []string{"Open", "Decode", "DecodeBytes"} {
		before := versionsAhead.Load()
		var s *Snapshot
		var err error
		switch way {
		case "Open":
			s, err = Open(path, nil)
		case "Decode":
			// No size hint: the entries move to bigger arrays while the
			// versioner runs.
			s, err = Decode(bytes.NewReader(data), name, nil)
		default:
			s, err = DecodeBytes(data, name, nil)
		}
		if err != nil {
			t.Fatalf("%s %s: %v", way, name, err)
		}
		used := versionsAhead.Load() > before
		if ahead && !used {
			t.Errorf("%s %s: the versions were counted after the decode, not beside it", way, name)
		}
		got := versionsOf(s)
		s.Annotate()
		want := versionsOf(s)
		if len(got) != len(want) {
			t.Fatalf("%s %s: %d versions, annotate has %d", way, name, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s %s: version %d is %d, annotate says %d", way, name, i, got[i], want[i])
			}
		}
	}
}

// TestVersionsBesideDecode: the address versions counted on a second
// goroutine while the decoder reads (versioner) against annotate's pass
// after it, on every real snapshot, on one big enough for the entries to
// move while counted, on random traces over a few addresses, and on a
// file whose trace lists its entries out of decode order (where the
// counts are not annotate's and are thrown away).
func TestVersionsBesideDecode(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	actions := []Action{ActionAlloc, ActionFreeRequested, ActionFreeCompleted, ActionSegmentAlloc, ActionSegmentFree, ActionSegmentMap, ActionSegmentUnmap, ActionSnapshot}
	for iter := range 30 {
		s := &Snapshot{Segments: []Segment{{Address: 0, TotalSize: 1 << 20, NumBlocks: 2}}, Blocks: []Block{{Size: 1 << 19}, {Size: 1 << 19}}}
		total := 0
		for range 1 + r.Intn(3) {
			n := r.Intn(3000)
			if iter%3 == 0 {
				n += feedEvery // past the versioner's start
			}
			evs := make([]Event, n)
			for i := range evs {
				evs[i] = Event{Action: actions[r.Intn(len(actions))], Addr: uint64(r.Intn(4)) << 19, Size: 512}
			}
			s.Traces = append(s.Traces, Trace{Events: evs})
			total += n
		}
		var buf bytes.Buffer
		if err := WritePickle(&buf, s); err != nil {
			t.Fatal(err)
		}
		// The versioner starts with the decode's feedEvery+1st entry.
		checkVersionsAhead(t, fmt.Sprint("random ", iter), buf.Bytes(), total > feedEvery)
	}
	checkVersionsAhead(t, "out of order", outOfOrderTrace(), false)
	files := corpusWithBig(t)
	for _, f := range files {
		data, s := decodeFile(t, f)
		events := 0
		for _, tr := range s.Traces {
			events += len(tr.Events)
		}
		checkVersionsAhead(t, filepath.Base(f), data, events > feedEvery)
	}
}

// outOfOrderTrace is a protocol-4 pickle whose top-level key "x" holds a
// free_completed entry that its trace lists after an alloc of the same
// address: decoded first, versioned first by the versioner (version 0,
// then the alloc 1), while memory_viz versions the trace in its own order
// (the alloc 0, the free_completed 0). More entries follow, enough for
// the versioner to start.
func outOfOrderTrace() []byte {
	str := func(s string) []byte { return append([]byte{0x8c, byte(len(s))}, s...) }
	entry := func(action string) []byte {
		b := []byte{'}', '('}
		b = append(b, str("action")...)
		b = append(b, str(action)...)
		b = append(b, str("addr")...)
		b = append(b, 'K', 5)
		b = append(b, str("size")...)
		b = append(b, 'K', 16)
		return append(b, 'u')
	}
	var b []byte
	b = append(b, 0x80, 4, '}', '(')
	b = append(b, str("segments")...)
	b = append(b, ']')
	b = append(b, str("x")...)
	b = append(b, ']', '(')
	b = append(b, entry("free_completed")...)
	b = append(b, 'q', 1, 'e')
	b = append(b, str("device_traces")...)
	b = append(b, ']', '(', ']', '(')
	b = append(b, entry("alloc")...)
	b = append(b, 'h', 1, 'e')
	for range feedEvery + 100 {
		b = append(b, entry("alloc")...)
		b = append(b, 'a') // APPEND
	}
	b = append(b, 'e')
	return append(b, 'u', '.')
}

// TestNoVersions: a decode without the address versions
// (Options.NoVersions) is the ordinary decode with every Version 0, with
// and without Early, on every real snapshot and on one big enough for the
// versioner; Annotate then gives the ordinary decode's versions.
func TestNoVersions(t *testing.T) {
	files := corpusWithBig(t)
	left := 0 // versions other than 0 left out, over all files
	defer func() {
		if left == 0 {
			t.Error("no snapshot had a version other than 0: the comparison tested nothing")
		}
	}()
	for _, f := range files {
		data, want := decodeFile(t, f)
		wantVers := versionsOf(want)
		nonzero := 0
		for _, v := range wantVers {
			if v != 0 {
				nonzero++
			}
		}
		zeroVersions(want)
		for _, early := range []bool{false, true} {
			opt := &Options{NoVersions: true}
			if early {
				opt.Early = func(*Snapshot) {}
			}
			got, err := DecodeBytes(data, f, opt)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range versionsOf(got) {
				if v != 0 {
					t.Fatalf("%s (early %v): version %d is %d, want none", filepath.Base(f), early, i, v)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s (early %v): the model differs from the ordinary decode's but for the versions", filepath.Base(f), early)
			}
			got.Annotate()
			if gv := versionsOf(got); !reflect.DeepEqual(gv, wantVers) {
				t.Fatalf("%s (early %v): Annotate's versions differ from the ordinary decode's", filepath.Base(f), early)
			}
		}
		left += nonzero
	}
}

// zeroVersions takes every address version out of s.
func zeroVersions(s *Snapshot) {
	for t := range s.Traces {
		s.Traces[t].SetVersions(nil)
	}
	for i := range s.Segments {
		s.Segments[i].Version = 0
	}
	for i := range s.Blocks {
		s.Blocks[i].Version = 0
	}
}
