package snapshot

// Annotate recomputes memory_viz's annotation (address versions, merged
// free pairs in Trace.Viz, block addresses) after a Snapshot was built or
// edited in code; decoding does it already. Streams are not renumbered.
func (s *Snapshot) Annotate() {
	for t := range s.Traces {
		s.Traces[t].Viz = nil
	}
	annotate(s, true, true, nil)
}

// annotate computes memory_viz's annotate_snapshot beside the raw values,
// in one pass over the trace when both parts are asked for: with traces,
// the merged free pairs (Trace.Viz, unless the decoder set it already)
// and block addresses accumulated from their segment's address; with
// versions, the address versions (per address, how many times it was
// freed, or unmapped for segments, before). The versions part writes only
// the traces' versions and the Version fields of segments and blocks, so
// that readers of the rest may run meanwhile (Options.Early). Streams are already renamed by the decoder. pause, when
// not nil, is called every 65,536 entries (Options.Pause).
func annotate(s *Snapshot, traces, versions bool, pause func()) {
	var blockVer, segVer *versionMap
	// The trace entries' versions counted during the decode: annotate
	// goes on from there with the dump's segments and blocks.
	pre := s.pending
	s.pending = nil
	evVersions := versions && pre == nil
	if versions && pre != nil {
		blockVer, segVer = pre.blockVer, pre.segVer
		versionsAhead.Add(1)
	} else if versions {
		// Real traces have one distinct block address per 4 to 200
		// entries (12 typically): sized for 16, the table grows seldom
		// (growing from small cost 10% of this pass on an 80 MB snapshot).
		entries := 0
		for t := range s.Traces {
			entries += len(s.Traces[t].Events)
		}
		blockVer = newVersionMap(max(1024, entries/16))
		segVer = newVersionMap(64)
	}
	for t := range s.Traces {
		tr := &s.Traces[t]
		evs := tr.Events
		// A Viz set already was decided by the decoder as it read the
		// events (builder.keptViz).
		viz := traces && tr.Viz == nil
		if !viz && !evVersions {
			continue
		}
		if viz {
			tr.Viz = make([]int32, 0, len(evs))
		}
		var vb []uint8 // the versions' column while they fit a byte
		if evVersions {
			tr.versions = makeVersionColumn(len(evs))
			vb = tr.versions.b
		}
		last := -1 // raw index of the last event kept in Viz
		for i := range evs {
			if pause != nil && i&(1<<16-1) == 0 {
				pause()
			}
			e := &evs[i]
			if evVersions {
				var v int32
				switch e.Action {
				case ActionFreeCompleted:
					v = blockVer.get(e.Addr, true)
				case ActionFreeRequested, ActionAlloc:
					v = blockVer.get(e.Addr, false)
				case ActionSegmentFree, ActionSegmentUnmap:
					v = segVer.get(e.Addr, true)
				case ActionSegmentAlloc, ActionSegmentMap:
					v = segVer.get(e.Addr, false)
				}
				// A byte while they fit, stored here: a call to set
				// for each of 15 million entries made the pass 100 ms
				// longer, which the state view waits for.
				if uint32(v) < 1<<8 && vb != nil {
					vb[i] = uint8(v)
				} else if v != 0 {
					tr.versions.set(i, v)
					vb = tr.versions.b
				}
			}
			if !viz {
				continue
			}
			e.Flags &^= FlagMergedFree
			if last >= 0 && evs[last].Flags&FlagMergedFree == 0 && MergesFree(&evs[last], e) {
				evs[last].Flags |= FlagMergedFree
				continue
			}
			tr.Viz = append(tr.Viz, int32(i))
			last = i
		}
	}
	for i := range s.Segments {
		seg := &s.Segments[i]
		if versions {
			seg.Version = segVer.get(seg.Address, false)
		}
		addr := seg.Address
		for j := seg.FirstBlock; j < seg.FirstBlock+seg.NumBlocks; j++ {
			b := &s.Blocks[j]
			if traces {
				b.Addr = addr
				addr += b.Size
			}
			if versions {
				b.Version = blockVer.get(b.Addr, false)
			}
		}
	}
}
