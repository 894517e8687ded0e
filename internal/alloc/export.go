package alloc

import (
	"github.com/gpumem/gpumem/snapshot"
)

// Snapshot builds a snapshot.Snapshot of the allocator's current state and
// recorded trace, as torch.cuda.memory._snapshot() would return for this
// device: segments with blocks, device_traces[Device] and
// allocator_settings. Stacks, times and annotations are left empty; the
// caller may fill them in (same event order as Trace()).
func (a *Allocator) Snapshot() *snapshot.Snapshot {
	s := &snapshot.Snapshot{
		Source:  snapshot.Source{Name: "gpumem sim", Encoding: "pickle", Protocol: 4, Generation: snapshot.GenD4},
		Strings: []string{""},
		Streams: []int64{0},
		Frames:  nil,
		Stacks:  snapshot.StackTable{Offsets: []int32{0, 0}},
		Extras:  []snapshot.KeyValues{nil},
	}
	streamIDs := map[int64]snapshot.StreamID{0: 0}
	sid := func(raw int64) snapshot.StreamID {
		if id, ok := streamIDs[raw]; ok {
			return id
		}
		id := snapshot.StreamID(len(s.Streams))
		s.Streams = append(s.Streams, raw)
		streamIDs[raw] = id
		return id
	}
	dev := a.opt.Device
	s.Traces = make([]snapshot.Trace, dev+1)
	tr := &s.Traces[dev]
	for _, e := range a.trace {
		tr.Events = append(tr.Events, snapshot.Event{Action: e.Action, Addr: e.Addr, Size: e.Size, Stream: sid(e.Stream)})
	}
	for _, seg := range a.Segments() {
		sg := snapshot.Segment{
			Device: int32(dev), Address: seg.Addr, TotalSize: seg.Size, Stream: sid(seg.Stream),
			Large: !seg.Small, HasPoolID: true, IsExpandable: seg.Expandable,
			FirstBlock: int32(len(s.Blocks)), NumBlocks: int32(len(seg.Blocks)),
		}
		for _, b := range seg.Blocks {
			if b.State == snapshot.BlockActiveAllocated {
				sg.AllocatedSize += b.Size
			}
			if b.State != snapshot.BlockInactive {
				sg.ActiveSize += b.Size
				sg.RequestedSize += b.Requested
			}
			s.Blocks = append(s.Blocks, snapshot.Block{
				Addr: b.Addr, RawAddress: b.Addr, HasAddress: true, Size: b.Size,
				RequestedSize: b.Requested, HasRequestedSize: true, State: b.State,
			})
		}
		s.Segments = append(s.Segments, sg)
	}
	c := a.cfg
	set := &snapshot.AllocatorSettings{
		Conf: c.Conf, MaxSplitSize: maxSplitStat(c.MaxSplitSize),
		GarbageCollectionThreshold: c.GCThreshold, ExpandableSegments: c.ExpandableSegments,
	}
	for k, v := range c.RoundupDivisions {
		set.RoundupPower2Divisions = append(set.RoundupPower2Divisions,
			snapshot.RoundupDivision{IntervalMiB: itoa(uint64(1) << k), Divisions: int64(v)})
	}
	s.AllocatorSettings = set
	return s
}

func itoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}
