package analysis

import (
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// Allocation is one allocation of the Active Memory Timeline with what is
// known about it.
type Allocation struct {
	// Item indexes Device.Active (Lifetimes.Item).
	Item int32
	// Bytes is the requested size (what the timeline plots).
	Bytes  uint64
	Stack  snapshot.StackID
	Stream snapshot.StreamID
	// Pool is the segment_pool_id of the dump segment holding the address
	// (PoolKnown false when no dump segment does).
	Pool      [2]int64
	PoolKnown bool
	Category  Category
	Rule      Rule // the rule that set Category
	// FreedStack: Stack is where the block was freed, not allocated: it
	// was allocated before recording began, and the trace records each
	// free's own stack (context "all"; with "alloc" a free carries its
	// allocation's stack, and FreedStack is false).
	FreedStack bool
}

// Allocation describes item i of d.Active.
func (d *Device) Allocation(i int) Allocation {
	it := d.Active.Item(i)
	a := Allocation{Item: int32(i), Bytes: it.Size}
	var addr uint64
	a.Stack, a.Stream, addr = d.itemSource(i)
	if si := d.segmentAt(addr); si >= 0 {
		seg := &d.S.Segments[si]
		a.Pool, a.PoolKnown = seg.PoolID, seg.HasPoolID
		if a.Stream < 0 {
			a.Stream = seg.Stream
		}
	}
	if a.Stream < 0 {
		a.Stream = 0
	}
	a.Category, a.Rule = d.Category(i), d.EffectiveRule(i)
	if it := d.Active.Item(i); it.Alloc < 0 && it.Dump() < 0 && it.Free >= 0 && a.Stack != snapshot.NoStack {
		a.FreedStack = d.freesHaveOwnStacks()
	}
	return a
}

// freesHaveOwnStacks reports whether the trace's free entries carry the
// free's own stack (_record_memory_history(context="all")) rather than
// the allocation's (context "alloc"): some block allocated and freed
// within the trace has a free stack that differs from its alloc's. With
// no such pair to judge by, a free's stack is taken as its own.
func (d *Device) freesHaveOwnStacks() bool {
	d.freeOwnOnce.Do(func() {
		ev := d.Events()
		paired := false
		for i := range d.Active.Len() {
			it := d.Active.Item(i)
			if it.Alloc < 0 || it.Free < 0 {
				continue
			}
			a, f := ev[it.Alloc].Stack, ev[it.Free].Stack
			if a == snapshot.NoStack || f == snapshot.NoStack {
				continue
			}
			if a != f {
				d.freeOwn = true
				return
			}
			paired = true
		}
		d.freeOwn = !paired
	})
	return d.freeOwn
}

// itemSource is the stack, stream and address of item i of d.Active;
// stream -1 when only the dump segment knows it.
func (d *Device) itemSource(i int) (snapshot.StackID, snapshot.StreamID, uint64) {
	it := d.Active.Item(i)
	ev := d.Events()
	switch {
	case it.Alloc >= 0:
		e := &ev[it.Alloc]
		return e.Stack, e.Stream, e.Addr
	case it.Dump() >= 0:
		b := &d.S.Blocks[it.Dump()]
		return blockStack(d.S, b), -1, b.Addr
	case it.Free >= 0:
		// Allocated before the trace: with context "alloc" the free
		// entry carries the allocation's stack (with "all", the free's).
		e := &ev[it.Free]
		return e.Stack, e.Stream, e.Addr
	}
	return snapshot.NoStack, -1, 0
}

// itemStack is the stack of item i of d.Active.
func (d *Device) itemStack(i int) snapshot.StackID {
	st, _, _ := d.itemSource(i)
	return st
}

// blockStack is the stack memory_viz shows for a dump block (legacy blocks
// keep it in their first history item).
func blockStack(s *snapshot.Snapshot, b *snapshot.Block) snapshot.StackID {
	if b.NumHistory > 0 && b.Stack == snapshot.NoStack {
		if h := &s.History[b.FirstHistory]; h.HasStack {
			return h.Stack
		}
	}
	return b.Stack
}

// segmentAt is the dump segment of the device containing addr, or -1.
func (d *Device) segmentAt(addr uint64) int32 { return replay.FindSegment(d.S, d.segs, addr) }

// LiveAt returns the allocations live at moment m, in timeline order
// (the order they were pushed on the Active Memory Timeline's stack is not
// kept; items are in element order).
func (d *Device) LiveAt(m Moment) []Allocation {
	var out []Allocation
	d.Active.Live(m.Action, func(i int) { out = append(out, d.Allocation(i)) })
	return out
}

// LiveProfile is LiveAt folded into a Profile with one sample per distinct
// (stack, category, stream, pool).
func (d *Device) LiveProfile(m Moment) *Profile {
	p := NewProfile(d.S, d.Index)
	d.Active.Live(m.Action, func(i int) {
		a := d.Allocation(i)
		p.Add(a.Stack, 1, a.Bytes, Labels{Category: a.Category, Rule: a.Rule, Stream: a.Stream, Pool: a.Pool, FreedStack: a.FreedStack})
	})
	return p
}
