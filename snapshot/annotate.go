package snapshot

// Annotate recomputes memory_viz's annotation (address versions, merged
// free pairs in Trace.Viz, block addresses) after a Snapshot was built or
// edited in code; decoding does it already. Streams are not renumbered.
func (s *Snapshot) Annotate() {
	annotateTraces(s)
	annotateVersions(s)
}

// annotateTraces computes the part of memory_viz's annotate_snapshot that
// is not address versions: merged free pairs (Trace.Viz) and block
// addresses accumulated from their segment's address. Streams are already
// renamed by the decoder.
func annotateTraces(s *Snapshot) {
	for t := range s.Traces {
		tr := &s.Traces[t]
		evs := tr.Events
		tr.Viz = make([]int32, 0, len(evs))
		last := -1 // raw index of the last event kept in Viz
		for i := range evs {
			e := &evs[i]
			e.Flags &^= FlagMergedFree
			if e.Action == ActionFreeCompleted && last >= 0 {
				p := &evs[last]
				if p.Action == ActionFreeRequested && p.Flags&FlagMergedFree == 0 && p.Addr == e.Addr {
					p.Flags |= FlagMergedFree
					continue
				}
			}
			tr.Viz = append(tr.Viz, int32(i))
			last = i
		}
	}
	for i := range s.Segments {
		seg := &s.Segments[i]
		addr := seg.Address
		for j := seg.FirstBlock; j < seg.FirstBlock+seg.NumBlocks; j++ {
			b := &s.Blocks[j]
			b.Addr = addr
			addr += b.Size
		}
	}
}

// annotateVersions computes memory_viz's address versions: per address,
// how many times it was freed (block addresses) or unmapped (segments)
// before. It writes only the Version fields, so that other readers of
// the snapshot may run meanwhile (Options.Early).
func annotateVersions(s *Snapshot) {
	// Real traces have one distinct block address per 4 to 200 entries (12
	// typically): sized for 16, the table grows seldom (growing from small
	// cost 10% of this pass on an 80 MB snapshot).
	entries := 0
	for t := range s.Traces {
		entries += len(s.Traces[t].Events)
	}
	blockVer := newVersionMap(max(1024, entries/16))
	segVer := newVersionMap(64)
	for t := range s.Traces {
		evs := s.Traces[t].Events
		for i := range evs {
			e := &evs[i]
			switch e.Action {
			case ActionFreeCompleted:
				e.Version = blockVer.get(e.Addr, true)
			case ActionFreeRequested, ActionAlloc:
				e.Version = blockVer.get(e.Addr, false)
			case ActionSegmentFree, ActionSegmentUnmap:
				e.Version = segVer.get(e.Addr, true)
			case ActionSegmentAlloc, ActionSegmentMap:
				e.Version = segVer.get(e.Addr, false)
			default:
				e.Version = 0
			}
		}
	}
	for i := range s.Segments {
		seg := &s.Segments[i]
		seg.Version = segVer.get(seg.Address, false)
		for j := seg.FirstBlock; j < seg.FirstBlock+seg.NumBlocks; j++ {
			s.Blocks[j].Version = blockVer.get(s.Blocks[j].Addr, false)
		}
	}
}
