package replay

import "slices"

// journal records what undoing events changed in a work state (the old
// values, in order), so that a step forward, to a state the undos passed
// through, restores them instead of starting again from a checkpoint.
type journal struct {
	recs  []undoRec
	event int32 // the event being undone
	// top: every event in (the state's index, top] can be redone.
	top int
}

type undoRec struct {
	event int32
	kind  uint8 // recBlock, recStart, recEnd or recDups
	had   bool
	key   uint64
	ref   blockRef
	seg   segRec
	end   uint64
	dups  []segRec
}

const (
	recBlock = iota
	recStart
	recEnd
	recDups
)

// maxJournal bounds the records kept (the oldest, of the highest events,
// go first); a variable for the tests.
var maxJournal = 1 << 16

func (j *journal) block(w *work, addr uint64) {
	r, ok := w.blocks.get(addr)
	j.recs = append(j.recs, undoRec{event: j.event, kind: recBlock, had: ok, key: addr, ref: r})
}

func (j *journal) start(s *segSet, addr uint64) {
	if j == nil {
		return
	}
	v, ok := s.byStart.get(addr)
	j.recs = append(j.recs, undoRec{event: j.event, kind: recStart, had: ok, key: addr, seg: v})
}

func (j *journal) end(s *segSet, addr uint64) {
	if j == nil {
		return
	}
	v, ok := s.endAt.get(addr)
	j.recs = append(j.recs, undoRec{event: j.event, kind: recEnd, had: ok, key: addr, end: v})
}

func (j *journal) dups(s *segSet) {
	if j == nil {
		return
	}
	j.recs = append(j.recs, undoRec{event: j.event, kind: recDups, dups: slices.Clone(s.dups)})
}

// trim drops the oldest records past maxJournal, whole events at a time.
func (j *journal) trim() {
	if len(j.recs) <= 2*maxJournal {
		return
	}
	c := len(j.recs) - maxJournal
	for c < len(j.recs) && j.recs[c].event == j.recs[c-1].event {
		c++
	}
	if c == len(j.recs) {
		j.recs, j.top = j.recs[:0], -2
		return
	}
	j.top = int(j.recs[c].event)
	j.recs = append(j.recs[:0], j.recs[c:]...)
}

// redo restores w from the state after event from to the state after
// event to (from < to <= j.top), adding the blocks and segment starts it
// changes to blockAddrs and segAddrs.
func (j *journal) redo(w *work, to int, blockAddrs, segAddrs *[]uint64) {
	for len(j.recs) > 0 && int(j.recs[len(j.recs)-1].event) <= to {
		r := &j.recs[len(j.recs)-1]
		switch r.kind {
		case recBlock:
			*blockAddrs = append(*blockAddrs, r.key)
			if r.had {
				w.blocks.set(r.key, r.ref)
			} else {
				w.blocks.del(r.key)
			}
		case recStart:
			*segAddrs = append(*segAddrs, r.key)
			if r.had {
				w.segs.byStart.set(r.key, r.seg)
			} else {
				w.segs.byStart.del(r.key)
			}
		case recEnd:
			if r.had {
				w.segs.endAt.set(r.key, r.end)
			} else {
				w.segs.endAt.del(r.key)
			}
		case recDups:
			w.segs.dups = r.dups
		}
		j.recs = j.recs[:len(j.recs)-1]
	}
}
