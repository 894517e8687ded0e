package export

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// Pprof sample types, in the order of each sample's values.
var pprofTypes = []*profile.ValueType{
	{Type: "inuse_objects", Unit: "count"},
	{Type: "inuse_space", Unit: "bytes"},
	{Type: "alloc_objects", Unit: "count"},
	{Type: "alloc_space", Unit: "bytes"},
	{Type: "peak_objects", Unit: "count"},
	{Type: "peak_space", Unit: "bytes"},
}

// MemoryProfiles are the three stack profiles of one device that a pprof
// export holds.
type MemoryProfiles struct {
	// InUse: the blocks allocated at the dump (state active_allocated),
	// by their rounded block size — the "allocated" bytes of gpumem info.
	InUse *analysis.Profile
	// Alloc: every alloc event of the trace, by requested size.
	Alloc *analysis.Profile
	// Peak: the allocations live at the Active Memory Timeline's peak, by
	// requested size (what memory_viz plots).
	Peak *analysis.Profile
}

// BuildMemoryProfiles aggregates device d's dump, trace and peak by stack
// and labels (category, stream, pool).
func BuildMemoryProfiles(d *analysis.Device) (*MemoryProfiles, error) {
	s := d.S
	ev := d.Events()
	mp := &MemoryProfiles{
		InUse: analysis.NewProfile(s, d.Index),
		Alloc: analysis.NewProfile(s, d.Index),
	}
	// The timeline item of each alloc event and of each address live at
	// the end, for their labels.
	itemOfAlloc := make(map[int32]int, len(ev)/2)
	liveAt := map[uint64]int{}
	end := int32(len(d.Active.Events))
	for i := range d.Active.Len() {
		it := d.Active.Item(i)
		var addr uint64
		switch {
		case it.Alloc >= 0:
			itemOfAlloc[it.Alloc] = i
			addr = ev[it.Alloc].Addr
		case it.Dump() >= 0:
			addr = s.Blocks[it.Dump()].Addr
		default:
			continue
		}
		if it.Died >= end {
			liveAt[addr] = i
		}
	}
	labels := func(i int) analysis.Labels {
		a := d.Allocation(i)
		return analysis.Labels{Category: a.Category, Stream: a.Stream, Pool: a.Pool}
	}
	for si := range s.Segments {
		seg := &s.Segments[si]
		if int(seg.Device) != d.Index {
			continue
		}
		for _, b := range s.SegmentBlocks(si) {
			if b.State != snapshot.BlockActiveAllocated {
				continue
			}
			l := analysis.Labels{Stream: seg.Stream, Pool: seg.PoolID}
			stack := b.Stack
			if i, ok := liveAt[b.Addr]; ok {
				l = labels(i)
				if a := d.Allocation(i); a.Stack != snapshot.NoStack {
					stack = a.Stack
				}
			} else if b.NumHistory > 0 && stack == snapshot.NoStack {
				if h := s.BlockHistory(&b); h[0].HasStack {
					stack = h[0].Stack
				}
			}
			mp.InUse.Add(stack, 1, b.Size, l)
		}
	}
	for k := range ev {
		e := &ev[k]
		if e.Action != snapshot.ActionAlloc {
			continue
		}
		l := analysis.Labels{Stream: e.Stream}
		if i, ok := itemOfAlloc[int32(k)]; ok {
			l = labels(i)
		}
		mp.Alloc.Add(e.Stack, 1, e.Size, l)
	}
	m, err := d.Resolve("peak")
	if err != nil {
		return nil, err
	}
	mp.Peak = d.LiveProfile(m)
	return mp, nil
}

// PprofOptions tune the pprof export.
type PprofOptions struct {
	// KeepInternalFrames keeps the C++ frames every allocation passes
	// through (analysis.InternalFrame: the caching allocator, stack
	// capture, tensor factories, the dispatcher), which are left out by
	// default: they were most of pprof's flat column and name no site.
	KeepInternalFrames bool
}

// FrameBeforeRecording is the one frame of the allocations live at the
// peak that were made before recording began, when the trace holds only
// the stack that freed them (PyTorch's context "all"): their
// "freed_at" label names that site. Charged to the free's stack, pprof
// showed them as allocated by DeviceCachingAllocator::free.
const FrameBeforeRecording = "<allocated before recording>"

// Pprof converts the profiles to one pprof profile with the sample types
// inuse_objects/inuse_space, alloc_objects/alloc_space and
// peak_objects/peak_space (default inuse_space). Each interned frame is a
// Location with one Line of a Function {name, filename} ("??", an
// unknown file, is left empty); frames memory_viz hides (interpreter and
// dispatcher plumbing) and, unless opt says to keep them, the allocator's
// internal frames are left out, and a stack with no frame left is the one
// frame "<non-python>". Samples carry the string labels device, stream,
// pool and category, and freed_at under FrameBeforeRecording.
func (mp *MemoryProfiles) Pprof(opt PprofOptions) *profile.Profile {
	s := mp.InUse.S
	dev := s.DeviceName(mp.InUse.Device)
	p := &profile.Profile{
		SampleType:        pprofTypes,
		DefaultSampleType: "inuse_space",
		PeriodType:        &profile.ValueType{Type: "space", Unit: "bytes"},
		Period:            1,
		Comments: []string{
			"gpumem export pprof of " + s.Source.Name + " device " + dev,
			"inuse: blocks allocated at the dump (block sizes); alloc: every alloc of the trace (requested sizes); peak: live at the Active Memory Timeline peak (requested sizes)",
		},
	}
	if !opt.KeepInternalFrames {
		p.Comments = append(p.Comments, "the allocator's internal C++ frames are left out (gpumem export pprof --keep-internal-frames keeps them)")
	}
	if ev := eventsOf(s, mp.InUse.Device); len(ev) > 0 && ev[0].Flags&snapshot.FlagHasTime != 0 {
		p.TimeNanos = ev[0].TimeUS * 1000
		p.DurationNanos = (ev[len(ev)-1].TimeUS - ev[0].TimeUS) * 1000
	}
	// A mapping whose functions are known: pprof then leaves names as
	// they are instead of demangling them (which turns "<module>" into
	// "<unknown>") and does not look for a binary.
	m := &profile.Mapping{ID: 1, File: "python", HasFunctions: true, HasFilenames: true, HasLineNumbers: true}
	p.Mapping = []*profile.Mapping{m}
	locs := map[snapshot.FrameID]*profile.Location{}
	funcs := map[[2]string]*profile.Function{}
	function := func(name, file string) *profile.Function {
		if file == "??" {
			file = "" // the unwinder's "unknown": pprof shows the function alone
		}
		k := [2]string{name, file}
		fn := funcs[k]
		if fn == nil {
			fn = &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, Filename: file}
			if strings.HasSuffix(file, ".cpp") || strings.HasSuffix(file, ".h") || file == "" && strings.Contains(name, "::") {
				// C++: pprof shortens names whose SystemName equals
				// Name (templates and arguments dropped). Python names
				// such as "<module>" must stay as they are.
				fn.SystemName = name
			}
			funcs[k] = fn
			p.Function = append(p.Function, fn)
		}
		return fn
	}
	const (
		nonPython = snapshot.FrameID(-1)
		before    = snapshot.FrameID(-2)
	)
	location := func(id snapshot.FrameID) *profile.Location {
		if l := locs[id]; l != nil {
			return l
		}
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: m}
		switch {
		case id >= 0 && int(id) < len(s.Frames):
			f := &s.Frames[id]
			l.Line = []profile.Line{{Function: function(f.Name, f.Filename), Line: f.Line}}
		case id == before:
			l.Line = []profile.Line{{Function: function(FrameBeforeRecording, "")}}
		default:
			l.Line = []profile.Line{{Function: function("<non-python>", "")}}
		}
		locs[id] = l
		p.Location = append(p.Location, l)
		return l
	}
	keep := func(id snapshot.FrameID) bool {
		if id < 0 || int(id) >= len(s.Frames) {
			return false
		}
		f := &s.Frames[id]
		return replay.KeepFrame(f) && (opt.KeepInternalFrames || !analysis.InternalFrame(f))
	}
	add := func(prof *analysis.Profile, slot int) {
		for i := range prof.Samples {
			smp := &prof.Samples[i]
			label := map[string][]string{
				"device":   {dev},
				"stream":   {strconv.Itoa(int(smp.Labels.Stream))},
				"pool":     {fmt.Sprintf("%d,%d", smp.Labels.Pool[0], smp.Labels.Pool[1])},
				"category": {smp.Labels.Category.String()},
			}
			var stack []*profile.Location
			if smp.Labels.FreedStack {
				// Who allocated is unknown; where it was freed is a label.
				stack = []*profile.Location{location(before)}
				label["freed_at"] = []string{freedAt(s, smp.Frames)}
			} else {
				for _, id := range smp.Frames {
					if keep(id) {
						stack = append(stack, location(id))
					}
				}
			}
			if len(stack) == 0 {
				stack = []*profile.Location{location(nonPython)}
			}
			v := make([]int64, len(pprofTypes))
			v[slot], v[slot+1] = int64(smp.Count), int64(smp.Bytes)
			p.Sample = append(p.Sample, &profile.Sample{Location: stack, Value: v, Label: label})
		}
	}
	add(mp.InUse, 0)
	add(mp.Alloc, 2)
	add(mp.Peak, 4)
	return p
}

func eventsOf(s *snapshot.Snapshot, d int) []snapshot.Event {
	if d < 0 || d >= len(s.Traces) {
		return nil
	}
	return s.Traces[d].Events
}

// freedAt is the site that freed an allocation made before recording, as
// sites are printed (analysis.SiteString of the top frames).
func freedAt(s *snapshot.Snapshot, frames []snapshot.FrameID) string {
	top := analysis.TopFrames(s, frames, 3)
	names := make([]string, 0, len(top))
	for _, id := range top {
		names = append(names, analysis.FrameString(s, id))
	}
	return analysis.SiteString(names)
}

// WritePprof writes device d's profiles as a gzipped pprof protobuf.
func WritePprof(w io.Writer, d *analysis.Device, opt PprofOptions) error {
	mp, err := BuildMemoryProfiles(d)
	if err != nil {
		return err
	}
	p := mp.Pprof(opt)
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("pprof: %v", err)
	}
	return p.Write(w)
}
