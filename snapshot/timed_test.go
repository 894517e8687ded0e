package snapshot

import (
	"bytes"
	"testing"
)

// traceTimedByPass is TraceTimed written out: a pass over the trace.
func traceTimedByPass(s *Snapshot, d int) bool {
	if d < 0 || d >= len(s.Traces) {
		return true
	}
	for _, e := range s.Traces[d].Events {
		if e.Flags&FlagHasTime == 0 {
			return false
		}
	}
	return true
}

// TestTraceTimed checks the decoder's knowledge of the entries' times
// against a pass over them: on every real snapshot and on the big one
// (decoded on two cores), as decoded and with one entry's time_us taken
// out of the file (then the decoder must not claim every entry timed),
// and on models built in code.
func TestTraceTimed(t *testing.T) {
	files := corpusWithBig(t)
	known, untimed := 0, 0
	check := func(name string, s *Snapshot) {
		t.Helper()
		for d := -1; d <= len(s.Traces); d++ {
			if got, want := s.TraceTimed(d), traceTimedByPass(s, d); got != want {
				t.Errorf("%s: TraceTimed(%d) = %v, a pass over the trace says %v", name, d, got, want)
			}
		}
	}
	for _, f := range files {
		_, s := decodeFile(t, f)
		check(f, s)
		if s.timed {
			known++
		}
		// The same file with the time of its last timed entry left out.
		var last *Event
		for d := range s.Traces {
			for i := range s.Traces[d].Events {
				if e := &s.Traces[d].Events[i]; e.Flags&FlagHasTime != 0 {
					last = e
				}
			}
		}
		if last == nil {
			continue
		}
		last.Flags &^= FlagHasTime
		var buf bytes.Buffer
		if err := WritePickle(&buf, s); err != nil {
			t.Fatal(err)
		}
		again, err := DecodeBytes(buf.Bytes(), f+" (one entry untimed)", nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.timed {
			t.Errorf("%s with one entry untimed: the decoder says every entry is timed", f)
		}
		check(f+" (one entry untimed)", again)
		untimed++
	}
	if known == 0 || untimed == 0 {
		t.Errorf("%d snapshots decoded with every entry timed, %d rewritten with one untimed: the comparison tested nothing", known, untimed)
	}
	// Built in code: no decoder to know, a pass says.
	built := &Snapshot{Traces: []Trace{{Events: []Event{{Flags: FlagHasTime}, {}}}, {Events: []Event{{Flags: FlagHasTime}}}}}
	check("built in code", built)
	if built.TraceTimed(0) || !built.TraceTimed(1) {
		t.Errorf("built in code: TraceTimed = %v, %v, want false, true", built.TraceTimed(0), built.TraceTimed(1))
	}
}
