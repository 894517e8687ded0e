package export

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// Marker frames of _memory_viz.py's flamegraphs.
const (
	frameNonPython = "<non-python>" // a block recorded without frames
	frameGaps      = "<gaps>"       // block bytes beyond the requested size
	frameNoContext = "<no-context>" // a legacy history item without frames
)

// groups aggregates blocks into one analysis.Profile per flamegraph
// prefix (stream_S;seg_A;state ...), as _memory_viz.py writes one folded
// line per block under such a prefix.
type groups struct {
	s     *snapshot.Snapshot
	opt   StackOptions
	order []string
	path  map[string][]string
	prof  map[string]*analysis.Profile
}

func newGroups(s *snapshot.Snapshot, opt StackOptions) *groups {
	return &groups{s: s, opt: opt, path: map[string][]string{}, prof: map[string]*analysis.Profile{}}
}

// StackOptions say which frames the exported stacks show.
type StackOptions struct {
	// KeepInternalFrames keeps the C++ frames every allocation passes
	// through (analysis.InternalFrame: the caching allocator, stack
	// capture, tensor factories, the dispatcher). Left out by default:
	// about 25 levels of them sat above the Python frames.
	KeepInternalFrames bool
}

func (g *groups) add(prefix []string, stack snapshot.StackID, bytes uint64) {
	if bytes == 0 {
		return
	}
	k := strings.Join(prefix, ";")
	p := g.prof[k]
	if p == nil {
		p = analysis.NewProfile(g.s, -1)
		g.prof[k] = p
		g.path[k] = slices.Clone(prefix)
		g.order = append(g.order, k)
	}
	p.Add(stack, 1, bytes, analysis.Labels{})
}

// addBlocks adds segment si's blocks as _memory_viz.py's _write_blocks:
// per block its requested size under its frames (outermost first) and the
// rest of the block as <gaps>; a legacy block one entry per history item.
func (g *groups) addBlocks(prefix []string, si int) {
	s := g.s
	for _, b := range s.SegmentBlocks(si) {
		pre := append(slices.Clone(prefix), b.State.String())
		accounted := uint64(0)
		if b.NumHistory > 0 {
			for _, h := range s.BlockHistory(&b) {
				accounted += h.RealSize
				if h.HasStack {
					g.add(pre, h.Stack, h.RealSize)
				} else {
					g.add(append(slices.Clone(pre), frameNoContext), snapshot.NoStack, h.RealSize)
				}
			}
		} else {
			// An inactive block keeps the stale requested size of its
			// last allocation, which may exceed it: _memory_viz.py then
			// writes negative <gaps>; the block's bytes are capped instead.
			accounted = min(s.Requested(&b), b.Size)
			g.add(pre, b.Stack, accounted)
		}
		if b.Size > accounted {
			g.add(append(pre, frameGaps), snapshot.NoStack, b.Size-accounted)
		}
	}
}

// flame turns the groups into a flamegraph.
func (g *groups) flame(root string) *Flame {
	f := NewFlame(root)
	for _, k := range g.order {
		prefix := g.path[k]
		marker := prefix[len(prefix)-1] == frameGaps || prefix[len(prefix)-1] == frameNoContext
		for i := range g.prof[k].Samples {
			smp := &g.prof[k].Samples[i]
			path := prefix
			if !marker {
				path = append(slices.Clone(prefix), flameFrames(g.s, smp.Frames, g.opt)...)
			}
			f.Add(path, int64(smp.Bytes))
		}
	}
	return f
}

// flameFrames formats frames (innermost first) outermost first as
// _memory_viz.py does, "file.py:LINE:func", with memory_viz's filter and,
// unless opt keeps them, without the allocator's internal frames; a frame
// of an unknown file ("??", "") is its function alone. <non-python> when
// no frame is left.
func flameFrames(s *snapshot.Snapshot, frames []snapshot.FrameID, opt StackOptions) []string {
	out := make([]string, 0, len(frames))
	for k := len(frames) - 1; k >= 0; k-- {
		id := frames[k]
		if id < 0 || int(id) >= len(s.Frames) {
			continue
		}
		f := &s.Frames[id]
		if !replay.KeepFrame(f) || !opt.KeepInternalFrames && analysis.InternalFrame(f) {
			continue
		}
		if f.Filename == "??" || f.Filename == "" {
			out = append(out, f.Name)
		} else {
			out = append(out, baseName(f.Filename)+":"+strconv.FormatInt(f.Line, 10)+":"+f.Name)
		}
	}
	if len(out) == 0 {
		return []string{frameNonPython}
	}
	return out
}

func streamName(id snapshot.StreamID) string { return "stream_" + strconv.Itoa(int(id)) }

// onDevice reports whether segment si is on device d (every device when d
// is negative).
func onDevice(s *snapshot.Snapshot, si, d int) bool {
	return d < 0 || int(s.Segments[si].Device) == d
}

// MemoryFlame is _memory_viz.py memory: every block of the dump by
// stream, state and stack (requested bytes, the rest as <gaps>), so the
// root is the reserved bytes. device < 0 means every device.
func MemoryFlame(s *snapshot.Snapshot, device int, opt StackOptions) *Flame {
	g := newGroups(s, opt)
	for si := range s.Segments {
		if onDevice(s, si, device) {
			g.addBlocks([]string{streamName(s.Segments[si].Stream)}, si)
		}
	}
	return g.flame("all")
}

// SegmentsFlame is _memory_viz.py segments: as MemoryFlame with each
// segment (seg_ADDRESS, decimal as PyTorch prints it) under its stream.
func SegmentsFlame(s *snapshot.Snapshot, device int, opt StackOptions) *Flame {
	g := newGroups(s, opt)
	for si := range s.Segments {
		seg := &s.Segments[si]
		if onDevice(s, si, device) {
			g.addBlocks([]string{streamName(seg.Stream), "seg_" + strconv.FormatUint(seg.Address, 10)}, si)
		}
	}
	return g.flame("all")
}

// SegmentCompare is _memory_viz.py compare, working on every snapshot
// generation: the segments, keyed by (address, total_size), only in A or
// only in B, and the flamegraph of their blocks under only_before /
// only_after.
type SegmentCompare struct {
	OnlyBefore, OnlyAfter []uint64 // addresses, sorted
	Flame                 *Flame
}

// CompareSegments compares the dump segments of a (device da) and b
// (device db); a negative device means all.
func CompareSegments(a *snapshot.Snapshot, da int, b *snapshot.Snapshot, db int) *SegmentCompare {
	type key struct{ addr, size uint64 }
	keys := func(s *snapshot.Snapshot, d int) map[key]bool {
		m := map[key]bool{}
		for si := range s.Segments {
			if onDevice(s, si, d) {
				m[key{s.Segments[si].Address, s.Segments[si].TotalSize}] = true
			}
		}
		return m
	}
	ka, kb := keys(a, da), keys(b, db)
	out := &SegmentCompare{Flame: NewFlame("all"), OnlyBefore: []uint64{}, OnlyAfter: []uint64{}}
	side := func(s *snapshot.Snapshot, d int, other map[key]bool, label string, addrs *[]uint64) {
		g := newGroups(s, StackOptions{})
		for si := range s.Segments {
			seg := &s.Segments[si]
			if !onDevice(s, si, d) || other[key{seg.Address, seg.TotalSize}] {
				continue
			}
			*addrs = append(*addrs, seg.Address)
			g.addBlocks([]string{label, streamName(seg.Stream), "seg_" + strconv.FormatUint(seg.Address, 10)}, si)
		}
		slices.Sort(*addrs)
		sub := g.flame("all")
		out.Flame.Root.merge(&sub.Root)
	}
	side(a, da, kb, "only_before", &out.OnlyBefore)
	side(b, db, ka, "only_after", &out.OnlyAfter)
	return out
}

// merge adds the subtree o (same root) into n.
func (n *FlameNode) merge(o *FlameNode) {
	n.Value += o.Value
	n.ValueA += o.ValueA
	n.self += o.self
	n.selfA += o.selfA
	for _, oc := range o.order {
		c := n.children[oc.Name]
		if c == nil {
			if n.children == nil {
				n.children = map[string]*FlameNode{}
			}
			c = &FlameNode{Name: oc.Name}
			n.children[oc.Name] = c
			n.order = append(n.order, c)
		}
		c.merge(oc)
	}
}

// ProfileFlame draws a profile (such as what is live at a moment) by
// category, then stack, outermost frame first.
func ProfileFlame(p *analysis.Profile, opt StackOptions) *Flame {
	f := NewFlame("all")
	for i := range p.Samples {
		smp := &p.Samples[i]
		f.Add(profilePath(p, smp, opt), int64(smp.Bytes))
	}
	return f
}

func profilePath(p *analysis.Profile, smp *analysis.Sample, opt StackOptions) []string {
	return append([]string{smp.Labels.Category.String()}, flameFrames(p.S, smp.Frames, opt)...)
}

// DiffFlame draws b against a: paths by category and stack, widths b's
// bytes, colours the change (red grew, blue shrank).
func DiffFlame(a, b *analysis.Profile, opt StackOptions) *Flame {
	type ab struct {
		path []string
		a, b int64
	}
	byKey := map[string]*ab{}
	var order []string
	add := func(p *analysis.Profile, isB bool) {
		for i := range p.Samples {
			smp := &p.Samples[i]
			path := profilePath(p, smp, opt)
			k := strings.Join(path, "\x00")
			e := byKey[k]
			if e == nil {
				e = &ab{path: path}
				byKey[k] = e
				order = append(order, k)
			}
			if isB {
				e.b += int64(smp.Bytes)
			} else {
				e.a += int64(smp.Bytes)
			}
		}
	}
	add(a, false)
	add(b, true)
	f := NewFlame("all")
	f.Diff = true
	for _, k := range order {
		e := byKey[k]
		f.AddDiff(e.path, e.a, e.b)
	}
	return f
}
