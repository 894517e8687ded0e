package snapshot

import "sync"

// EventFeed hands the trace entries of a pickle decode to a reader on
// another goroutine while the decoder goes on (Options.Feed): a viewer
// pairs allocations with their frees on the second core meanwhile, so
// that less is left to do once the decode ends.
//
// The entries come in decode order, every device's trace one after the
// other. Their Action, Addr and Size are final when published; Stream,
// Flags and Version are not (the decoder fills them in at its end).
type EventFeed struct {
	mu   sync.Mutex
	more sync.Cond
	evs  []Event // published so far
	done bool
	// expect is the number of entries the decoder reserved room for as
	// it started (from the input's size; see Expected).
	expect int
	// live is the dump's allocated blocks read before the trace (see
	// Live).
	live int
	// published, when a test sets it, sees each publication on the
	// decoder's goroutine: what a reader on another goroutine sees first
	// depends on when the scheduler runs it.
	published func(evs []Event)
}

// feedEvery is how many entries the decoder decodes between two
// publications: often enough that the reader keeps up, seldom enough that
// the lock costs nothing.
const feedEvery = 1 << 14

func newEventFeed() *EventFeed {
	f := &EventFeed{}
	f.more.L = &f.mu
	return f
}

// publish makes evs (all the entries so far) visible to the reader.
func (f *EventFeed) publish(evs []Event, done bool) {
	if f == nil {
		return
	}
	if f.published != nil {
		f.published(evs)
	}
	f.mu.Lock()
	if !f.done {
		f.evs, f.done = evs, done
	}
	f.mu.Unlock()
	f.more.Broadcast()
}

// Expected is the number of entries the decoder reserved room for as it
// started, from the input's size: a reader sizes its own arrays from it
// once. The capacity of what Next returns is no guide: while the splitter
// reads its part (split.go), the decoder's array ends at that part.
func (f *EventFeed) Expected() int {
	if f == nil {
		return 0
	}
	return f.expect
}

// setLive sets what Live returns, before the first entry is published.
func (f *EventFeed) setLive(n int) {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.live = n
	f.mu.Unlock()
}

// Live is the number of allocated blocks in the dump that the decoder read
// before the first trace entry (0 when the dump comes after the traces or
// has none): about how many allocations are live at the trace's end, a
// size for a reader's table of live addresses. It is known once Next has
// returned an entry.
func (f *EventFeed) Live() int {
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live
}

// Next blocks until more than have entries are published or the decode
// ends, and returns every entry published so far (have counts those the
// reader has seen). done reports that no more will come: the decode ended,
// successfully or not.
func (f *EventFeed) Next(have int) (evs []Event, done bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.evs) <= have && !f.done {
		f.more.Wait()
	}
	return f.evs, f.done
}

// Whole reports whether trace (a decoded Trace's Events) is exactly the
// entries the feed published, in the same memory: a reader's results over
// the feed are then results over that trace, raw indices included.
func (f *EventFeed) Whole(trace []Event) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done && len(trace) > 0 && len(trace) == len(f.evs) && &trace[0] == &f.evs[0]
}

// MergesFree reports whether memory_viz merges next into prev, the event
// before it in its trace view, when prev is not merged already: a
// free_completed right after the free_requested of the same address is
// shown as one free, at prev. Annotation applies it; readers of an
// EventFeed, which sees no Flags yet, apply it too.
func MergesFree(prev, next *Event) bool {
	return next.Action == ActionFreeCompleted && prev.Action == ActionFreeRequested && prev.Addr == next.Addr
}
