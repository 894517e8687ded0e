package export

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
)

// folded writes f as folded stacks.
func folded(t *testing.T, f *Flame) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteFolded(&b, f); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestFlameTrimsInternalFrames: flamegraph stacks (SVG and --collapsed
// share the tree) leave out the allocator's internal frames unless asked,
// and a frame of an unknown file ("??") is its function alone.
func TestFlameTrimsInternalFrames(t *testing.T) {
	s := preTraceFixture(t, true)
	dv := analysis.NewDevice(s, 0)
	m, err := dv.Resolve("peak")
	if err != nil {
		t.Fatal(err)
	}
	trimmed := folded(t, ProfileFlame(dv.LiveProfile(m), StackOptions{}))
	kept := folded(t, ProfileFlame(dv.LiveProfile(m), StackOptions{KeepInternalFrames: true}))
	for _, line := range strings.Split(strings.TrimSpace(trimmed), "\n") {
		if strings.Contains(line, "CachingAllocator") || strings.Contains(line, "??") {
			t.Errorf("trimmed flame line %q", line)
		}
	}
	if !strings.Contains(trimmed, ";train.py:10:forward 1048576") || !strings.Contains(trimmed, "train.py:20:step;optimizer.py:100:zero_grad 1048576") {
		t.Errorf("trimmed flame:\n%s", trimmed)
	}
	if !strings.Contains(kept, "train.py:10:forward;CUDACachingAllocator.cpp:0:c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(") ||
		!strings.Contains(kept, "zero_grad;c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free(") || strings.Contains(kept, "??") {
		t.Errorf("flame with internal frames:\n%s", kept)
	}
}

// TestFlameCorpusNoUnknownFiles: on the real snapshots with C++ stacks no
// flamegraph label reads "??:0:" and none is an allocator frame.
func TestFlameCorpusNoUnknownFiles(t *testing.T) {
	for _, name := range []string{"cs336-kkaitlyn111__memory_ctx128_fullstep.pickle", "cs336-bcrafton__memory_snapshot.pickle", "Attention-ZijianDu__memory__c005a26b.pickle"} {
		s := load(t, realFile(name))
		for kind, f := range map[string]*Flame{"memory": MemoryFlame(s, -1, StackOptions{}), "segments": SegmentsFlame(s, -1, StackOptions{})} {
			out := folded(t, f)
			if strings.Contains(out, "??:") || strings.Contains(out, "CUDACachingAllocator") || strings.Contains(out, "CapturedTraceback") {
				t.Errorf("%s %s: an unknown file or allocator frame in the labels", filepath.Base(name), kind)
			}
		}
		with := folded(t, MemoryFlame(s, -1, StackOptions{KeepInternalFrames: true}))
		if !strings.Contains(with, "CUDACachingAllocator") {
			t.Errorf("%s: --keep-internal-frames lost the allocator frames", name)
		}
	}
}
