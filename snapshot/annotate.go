package snapshot

// Annotate recomputes memory_viz's annotation (address versions, merged
// free pairs in Trace.Viz, block addresses) after a Snapshot was built or
// edited in code; decoding does it already. Streams are not renumbered.
func (s *Snapshot) Annotate() { annotate(s) }

// annotate computes memory_viz's annotate_snapshot once, beside the raw
// values: address versions, merged free pairs (Trace.Viz) and block
// addresses accumulated from their segment's address. Streams are already
// renamed by the decoder.
func annotate(s *Snapshot) {
	// Real traces have one distinct block address per 4 to 200 entries (12
	// typically): sized for 16, the table grows seldom (growing from small
	// cost 10% of this pass on an 80 MB snapshot).
	entries := 0
	for t := range s.Traces {
		entries += len(s.Traces[t].Events)
	}
	blockVer := newVersionMap(max(1024, entries/16))
	segVer := newVersionMap(64)
	version := func(m *versionMap, addr uint64, inc bool) int32 { return m.get(addr, inc) }
	for t := range s.Traces {
		tr := &s.Traces[t]
		evs := tr.Events
		tr.Viz = make([]int32, 0, len(evs))
		last := -1 // raw index of the last event kept in Viz
		for i := range evs {
			e := &evs[i]
			e.Flags &^= FlagMergedFree
			switch e.Action {
			case ActionFreeCompleted:
				e.Version = version(blockVer, e.Addr, true)
				if last >= 0 {
					p := &evs[last]
					if p.Action == ActionFreeRequested && p.Flags&FlagMergedFree == 0 && p.Addr == e.Addr {
						p.Flags |= FlagMergedFree
						continue
					}
				}
			case ActionFreeRequested, ActionAlloc:
				e.Version = version(blockVer, e.Addr, false)
			case ActionSegmentFree, ActionSegmentUnmap:
				e.Version = version(segVer, e.Addr, true)
			case ActionSegmentAlloc, ActionSegmentMap:
				e.Version = version(segVer, e.Addr, false)
			default:
				e.Version = 0
			}
			tr.Viz = append(tr.Viz, int32(i))
			last = i
		}
	}
	for i := range s.Segments {
		seg := &s.Segments[i]
		seg.Version = version(segVer, seg.Address, false)
		addr := seg.Address
		for j := seg.FirstBlock; j < seg.FirstBlock+seg.NumBlocks; j++ {
			b := &s.Blocks[j]
			b.Addr = addr
			b.Version = version(blockVer, addr, false)
			addr += b.Size
		}
	}
}
