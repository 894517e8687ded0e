package analysis

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// Profile is a stack profile of memory, the shape pprof gives its samples:
// every Sample is a set of allocations that share a call stack and labels,
// with their count and bytes. It is the one aggregation behind `peak`'s and
// `oom`'s sites, the exports (pprof, folded stacks, flamegraphs) and diffs.
//
// Stacks are not copied: a sample names frames by their ids in the
// snapshot's interned Frames table and, unfolded, its stack by its
// StackID. Build one with NewProfile and Add (or Device.LiveProfile), cut
// the stacks down to the top user frames with Fold, order it with Sort.
// Samples of two snapshots are compared by Key, which spells the frames
// out (frame ids differ between files).
type Profile struct {
	S      *snapshot.Snapshot
	Device int
	// Depth is 0 for full stacks, K after Fold(K).
	Depth   int
	Samples []Sample
	// Count and Bytes are the totals over Samples.
	Count int
	Bytes uint64

	index map[sampleKey]int
}

// Sample is Count allocations totalling Bytes with the same Frames and
// Labels.
type Sample struct {
	// Frames are the sample's frames, innermost first, as ids into
	// Snapshot.Frames. Unfolded they are all of Stack's frames; after
	// Fold(K), the K innermost user frames (see UserFrame), or the K
	// innermost frames memory_viz shows when the stack has no user frame.
	// Empty when the allocations were recorded without a stack.
	Frames []snapshot.FrameID
	// Stack is the full stack (id into Snapshot.Stacks) of the first
	// allocation added: exact for an unfolded profile, one example after
	// Fold.
	Stack  snapshot.StackID
	Count  int
	Bytes  uint64
	Labels Labels
}

// Labels are the non-stack attributes a sample is grouped by.
type Labels struct {
	Category Category
	// Rule is the rule that set Category (kept and merged with it).
	Rule   Rule
	Stream snapshot.StreamID
	// Pool is the segment_pool_id of the allocations' segment ({0, 0} for
	// the default pool or when unknown).
	Pool [2]int64
	// FreedStack: the samples' stack is where they were freed (see
	// Allocation.FreedStack). Fold drops it (merging such samples with
	// the others of their stack); the pprof export shows them apart.
	FreedStack bool
}

type sampleKey struct {
	stack  snapshot.StackID // unfolded
	frames string           // folded: the frame ids as a string
	labels Labels
}

// NewProfile returns an empty profile of device d of s.
func NewProfile(s *snapshot.Snapshot, d int) *Profile {
	return &Profile{S: s, Device: d, index: map[sampleKey]int{}}
}

// Add adds count allocations of bytes in total with this stack and labels.
func (p *Profile) Add(stack snapshot.StackID, count int, bytes uint64, l Labels) {
	k := sampleKey{stack: stack, labels: l}
	i, ok := p.index[k]
	if !ok {
		i = len(p.Samples)
		p.index[k] = i
		p.Samples = append(p.Samples, Sample{Frames: p.S.StackFrames(stack), Stack: stack, Labels: l})
	}
	p.Samples[i].Count += count
	p.Samples[i].Bytes += bytes
	p.Count += count
	p.Bytes += bytes
}

// LabelMask says which labels Fold keeps; the others are zeroed and their
// samples merged.
type LabelMask uint8

// The labels Fold can keep.
const (
	KeepCategory LabelMask = 1 << iota
	KeepStream
	KeepPool
)

// Fold returns a profile whose samples are this one's merged by their
// depth innermost user frames (depth <= 0: whole stacks) and the labels in
// keep. Samples keep the order of their first appearance; call Sort.
func (p *Profile) Fold(depth int, keep LabelMask) *Profile {
	q := &Profile{S: p.S, Device: p.Device, Depth: depth, index: map[sampleKey]int{}}
	var key []byte
	for _, smp := range p.Samples {
		l := smp.Labels
		if keep&KeepCategory == 0 {
			l.Category, l.Rule = 0, 0
		}
		if keep&KeepStream == 0 {
			l.Stream = 0
		}
		if keep&KeepPool == 0 {
			l.Pool = [2]int64{}
		}
		l.FreedStack = false
		frames := smp.Frames
		if depth > 0 {
			frames = TopFrames(p.S, frames, depth)
		}
		key = key[:0]
		for _, f := range frames {
			key = strconv.AppendInt(key, int64(f), 36)
			key = append(key, ',')
		}
		k := sampleKey{frames: string(key), labels: l}
		i, ok := q.index[k]
		if !ok {
			i = len(q.Samples)
			q.index[k] = i
			q.Samples = append(q.Samples, Sample{Frames: frames, Stack: smp.Stack, Labels: l})
		}
		q.Samples[i].Count += smp.Count
		q.Samples[i].Bytes += smp.Bytes
		q.Count += smp.Count
		q.Bytes += smp.Bytes
	}
	return q
}

// Sort orders the samples by bytes (largest first), then count, then
// their frames' text, so that output is deterministic.
func (p *Profile) Sort() {
	slices.SortStableFunc(p.Samples, func(a, b Sample) int {
		if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := cmp.Compare(p.Key(&a), p.Key(&b)); c != 0 {
			return c
		}
		return cmp.Compare(a.Labels.Category, b.Labels.Category)
	})
	p.index = nil // positions changed; a sorted profile takes no more Adds
}

// FrameStrings returns a sample's frames as "file:line:name", innermost
// first.
func (p *Profile) FrameStrings(smp *Sample) []string {
	out := make([]string, 0, len(smp.Frames))
	for _, id := range smp.Frames {
		out = append(out, FrameString(p.S, id))
	}
	return out
}

// Key is a sample's frames spelled out, innermost first, separated by
// ";" — the same in every snapshot, for comparing profiles of two files.
func (p *Profile) Key(smp *Sample) string {
	return strings.Join(p.FrameStrings(smp), ";")
}

// FrameString formats frame id as "file:line:name" ("?" when out of range).
func FrameString(s *snapshot.Snapshot, id snapshot.FrameID) string {
	if id < 0 || int(id) >= len(s.Frames) {
		return "?"
	}
	f := &s.Frames[id]
	return f.Filename + ":" + strconv.FormatInt(f.Line, 10) + ":" + f.Name
}

// TopFrames returns the depth innermost user frames of frames (see
// UserFrame); when there is none, the depth innermost frames that are not
// interpreter, dispatcher or allocator plumbing (memory_viz's filter and
// allocatorFrame), so that a backward allocation is named by its autograd
// node (BmmBackward0::apply).
func TopFrames(s *snapshot.Snapshot, frames []snapshot.FrameID, depth int) []snapshot.FrameID {
	var out []snapshot.FrameID
	for _, id := range frames {
		if len(out) == depth {
			return out
		}
		if id >= 0 && int(id) < len(s.Frames) && UserFrame(&s.Frames[id]) {
			out = append(out, id)
		}
	}
	if len(out) > 0 {
		return out
	}
	// A backward allocation is best named by its autograd node.
	for i, id := range frames {
		if id >= 0 && int(id) < len(s.Frames) {
			if n := s.Frames[id].Name; strings.Contains(n, "autograd::generated::") || strings.Contains(n, "AccumulateGrad") {
				frames = frames[i:]
				break
			}
		}
	}
	for _, id := range frames {
		if len(out) == depth {
			break
		}
		if id >= 0 && int(id) < len(s.Frames) && replay.KeepFrame(&s.Frames[id]) && !allocatorFrame(&s.Frames[id]) {
			out = append(out, id)
		}
	}
	return out
}

// InternalFrame reports C++ frames every CUDA allocation passes through
// (the caching allocator, stack capture, empty-tensor factories, the
// dispatcher), which say nothing about who allocated: sites leave them
// out, and so do the exported stacks (pprof, flamegraphs) unless asked to
// keep them.
func InternalFrame(f *snapshot.Frame) bool { return allocatorFrame(f) }

// allocatorFrame is InternalFrame.
func allocatorFrame(f *snapshot.Frame) bool {
	for _, p := range []string{"CUDACachingAllocator", "torch::unwind", "CapturedTraceback", "gather_with_cpp",
		"at::detail::", "at::TensorBase", "c10::impl::", "wrap_kernel_functor", "at::_ops::", "empty_strided", "empty_cuda",
		"create_out", "c10::Dispatcher"} {
		if strings.Contains(f.Name, p) {
			return true
		}
	}
	return strings.Contains(f.Filename, "Register")
}

// UserFrame reports whether a frame is the user's own Python code: a .py
// file outside the Python standard library and outside torch and the
// libraries installed beside it (site-packages, dist-packages).
func UserFrame(f *snapshot.Frame) bool {
	fn := strings.ReplaceAll(f.Filename, `\`, "/") // Windows paths
	if !strings.HasSuffix(fn, ".py") {
		return false // C++ frames, <frozen ...>, <string>
	}
	for _, lib := range libraryPaths {
		if strings.Contains(fn, lib) {
			return false
		}
	}
	return true
}

// libraryPaths mark files that are not the user's code.
var libraryPaths = []string{
	"site-packages/", "dist-packages/", "/lib/python3", "/Lib/", "/torch/", "torch/",
	"torchinductor_", // code Inductor generated (/tmp/torchinductor_USER/...)
}
