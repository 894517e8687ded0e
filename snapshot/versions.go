package snapshot

import "sync/atomic"

// versionsAhead counts the decodes whose annotation went on from the
// versioner's counts (tests check that the concurrent path is taken).
var versionsAhead atomic.Int64

// versioner counts memory_viz's address versions of the trace entries on
// a second goroutine while the decoder reads on: the version pass is a
// hash-table lookup per entry, a fifth of a big decode's CPU time, which
// ran on one core after the decode while the other idled. It reads the
// entries as the decoder publishes them (an EventFeed of its own), in
// decode order, and appends their versions to a column of its own (the
// traces' Versions once the decode ends), so that the decoder may move
// the entries to a bigger array meanwhile. The counts are annotate's
// exactly when the traces are the decoded entries in that order (as
// PyTorch writes them: builder.tracesAreEvents); else annotate counts
// afresh.
type versioner struct {
	feed             *EventFeed
	blockVer, segVer *versionMap
	events           versionColumn // the versions of the entries read so far
	hint             int
	done             chan struct{}
}

// versionState is what a decode's versioner counted, for annotate to go
// on from (the dump's segments and blocks): the decoded entries' versions
// and the tables.
type versionState struct {
	events           versionColumn
	blockVer, segVer *versionMap
}

// wantVersions marks a decode that annotates in one pass (no
// Options.Early: a viewer's decode leaves the versions to the end on
// purpose, so that they do not take the second core from its first view)
// as one whose versioner starts once it has feedEvery entries
// (startVersions).
func (b *builder) wantVersions(opt *Options) {
	b.verWanted = opt == nil || opt.Early == nil && !opt.NoVersions
}

// startVersions starts the versioner when the decode wants one, as the
// decoder publishes its first feedEvery entries: a smaller trace is
// versioned after the decode as before (a goroutine is not worth it, and
// its scheduling made the fuzzer's coverage of small inputs vary from
// run to run). hint is the number of entries expected.
func (b *builder) startVersions(hint int) {
	if !b.verWanted || b.ver != nil {
		return
	}
	v := &versioner{
		feed:     newEventFeed(),
		blockVer: newVersionMap(max(1024, hint/16)),
		segVer:   newVersionMap(64),
		// Room for the entries expected: address space, not memory,
		// until written.
		hint: hint,
		done: make(chan struct{}),
	}
	b.ver = v
	go v.run()
}

func (v *versioner) run() {
	defer close(v.done)
	have := 0
	for {
		evs, done := v.feed.Next(have)
		for i := have; i < len(evs); i++ {
			x := v.version(&evs[i])
			// A byte while they fit, appended here (a call each cost the
			// pass a tenth of its time).
			if c := &v.events; c.b != nil && uint32(x) < 1<<8 && len(c.b) < cap(c.b) {
				c.b = append(c.b, uint8(x))
			} else {
				c.append(x, v.hint)
			}
		}
		have = max(have, len(evs))
		if done {
			return
		}
	}
}

// version is annotate's version of one entry.
func (v *versioner) version(e *Event) int32 {
	switch e.Action {
	case ActionFreeCompleted:
		return v.blockVer.get(e.Addr, true)
	case ActionFreeRequested, ActionAlloc:
		return v.blockVer.get(e.Addr, false)
	case ActionSegmentFree, ActionSegmentUnmap:
		return v.segVer.get(e.Addr, true)
	case ActionSegmentAlloc, ActionSegmentMap:
		return v.segVer.get(e.Addr, false)
	}
	return 0
}

// publish makes evs (all the entries so far) visible to the versioner.
func (v *versioner) publish(evs []Event) {
	if v != nil {
		v.feed.publish(evs, false)
	}
}

// finish waits for the versioner after the decode published its last
// entries (or failed: evs nil) and returns its counts.
func (v *versioner) finish(evs []Event) *versionState {
	if v == nil {
		return nil
	}
	v.feed.publish(evs, true)
	<-v.done
	if evs == nil || v.events.len() != len(evs) {
		return nil
	}
	return &versionState{events: v.events, blockVer: v.blockVer, segVer: v.segVer}
}

// tracesAreEvents reports whether the traces are the decoded entries
// themselves, one run after the other in decode order and nothing else.
func (b *builder) tracesAreEvents() bool {
	at := 0
	for dev := range b.s.Traces {
		evs := b.s.Traces[dev].Events
		if len(evs) > 0 && (at >= len(b.events) || &evs[0] != &b.events[at]) {
			return false
		}
		at += len(evs)
	}
	return at == len(b.events)
}
