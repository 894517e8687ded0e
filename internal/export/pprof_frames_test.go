package export

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

const (
	mallocFrame = `{"filename": "CUDACachingAllocator.cpp", "line": 0, "name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)"}`
	freeFrame   = `{"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::free(c10::cuda::CUDACachingAllocator::Native::Block*)"}`
)

// preTraceFixture is a trace in which block A (1 MiB at 0x100000) was
// allocated before recording and is freed by step's zero_grad, while B is
// allocated by forward and freed by cleanup. With ownFreeStacks, frees
// carry their own stacks (context "all"); else B's free carries its alloc
// stack (context "alloc"), and so does A's. The peak (2 MiB) holds both.
func preTraceFixture(t *testing.T, ownFreeStacks bool) *snapshot.Snapshot {
	t.Helper()
	aStack := `[` + freeFrame + `, {"filename": "/usr/lib/python3/site-packages/torch/optim/optimizer.py", "line": 100, "name": "zero_grad"}, {"filename": "train.py", "line": 20, "name": "step"}]`
	bAlloc := `[` + mallocFrame + `, {"filename": "train.py", "line": 10, "name": "forward"}]`
	bFree := `[` + freeFrame + `, {"filename": "train.py", "line": 30, "name": "cleanup"}]`
	if !ownFreeStacks {
		bFree = bAlloc
		aStack = `[` + mallocFrame + `, {"filename": "train.py", "line": 5, "name": "setup"}]`
	}
	js := fmt.Sprintf(`{"segments": [{"device": 0, "address": 1048576, "total_size": 4194304, "allocated_size": 0, "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large", "segment_pool_id": [0, 0], "is_expandable": false, "frames": [],
 "blocks": [{"address": 1048576, "size": 4194304, "requested_size": 0, "state": "inactive", "frames": []}]}],
 "device_traces": [[
  {"action": "alloc", "addr": 2097152, "size": 1048576, "stream": 0, "frames": %[1]s},
  {"action": "free_requested", "addr": 1048576, "size": 1048576, "stream": 0, "frames": %[2]s},
  {"action": "free_completed", "addr": 1048576, "size": 1048576, "stream": 0, "frames": %[2]s},
  {"action": "free_requested", "addr": 2097152, "size": 1048576, "stream": 0, "frames": %[3]s},
  {"action": "free_completed", "addr": 2097152, "size": 1048576, "stream": 0, "frames": %[3]s}]]}`, bAlloc, aStack, bFree)
	s, err := snapshot.DecodeBytes([]byte(js), "pretrace.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pprofOf(t *testing.T, s *snapshot.Snapshot, d int, opt PprofOptions) *profile.Profile {
	t.Helper()
	var buf bytes.Buffer
	if err := WritePprof(&buf, analysis.NewDevice(s, d), opt); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// peakSamples are the samples with peak values, each as its leaf-first
// function names, with its freed_at label.
func peakSamples(p *profile.Profile) (stacks [][]string, freed []string, bytes []int64) {
	for _, smp := range p.Sample {
		if smp.Value[5] == 0 {
			continue
		}
		var names []string
		for _, l := range smp.Location {
			names = append(names, l.Line[0].Function.Name)
		}
		stacks = append(stacks, names)
		freed = append(freed, strings.Join(smp.Label["freed_at"], ""))
		bytes = append(bytes, smp.Value[5])
	}
	return stacks, freed, bytes
}

// TestPprofBeforeRecording: an allocation made before recording whose
// trace holds only the stack that freed it is one synthetic frame with the
// freeing site as its freed_at label, not an allocation "by" the
// allocator's free; allocator-internal frames are left out unless asked.
func TestPprofBeforeRecording(t *testing.T) {
	s := preTraceFixture(t, true)
	stacks, freed, bytes := peakSamples(pprofOf(t, s, 0, PprofOptions{}))
	if len(stacks) != 2 {
		t.Fatalf("peak samples %v", stacks)
	}
	for i, st := range stacks {
		switch {
		case st[0] == FrameBeforeRecording:
			if len(st) != 1 || freed[i] != "step (train.py:20)" || bytes[i] != 1<<20 {
				t.Errorf("before recording: stack %v freed_at %q bytes %d", st, freed[i], bytes[i])
			}
		case st[0] == "forward":
			if freed[i] != "" {
				t.Errorf("forward's sample has freed_at %q", freed[i])
			}
		default:
			t.Errorf("peak sample %v: want %q or forward as its leaf", st, FrameBeforeRecording)
		}
	}
	// Kept on request: forward's allocation then goes through malloc.
	stacks, _, _ = peakSamples(pprofOf(t, s, 0, PprofOptions{KeepInternalFrames: true}))
	found := false
	for _, st := range stacks {
		found = found || strings.Contains(st[0], "DeviceCachingAllocator::malloc")
	}
	if !found {
		t.Errorf("--keep-internal-frames: no malloc leaf in %v", stacks)
	}
	// Context "alloc": the free entries carry the allocation's stack, which
	// is then the site.
	stacks, freed, _ = peakSamples(pprofOf(t, preTraceFixture(t, false), 0, PprofOptions{}))
	for i, st := range stacks {
		if st[0] == FrameBeforeRecording || freed[i] != "" || st[0] != "setup" && st[0] != "forward" {
			t.Errorf("context alloc: peak sample %v freed_at %q; want the allocation sites", st, freed[i])
		}
	}
}

// TestPprofNoInternalFramesCorpus: on every real snapshot the default
// export's stacks hold no allocator-internal frame and no allocation
// charged to the allocator's free; --keep-internal-frames keeps them and
// the totals stay the same.
func TestPprofNoInternalFramesCorpus(t *testing.T) {
	before := int64(0)
	for _, path := range corpus.Files(t) {
		s := load(t, path)
		for _, d := range s.Devices() {
			p := pprofOf(t, s, d, PprofOptions{})
			for _, fn := range p.Function {
				if strings.Contains(fn.Name, "CUDACachingAllocator") || strings.Contains(fn.Name, "CapturedTraceback") {
					t.Errorf("%s device %d: internal frame %q in the default export", filepath.Base(path), d, fn.Name)
				}
			}
			kept := pprofOf(t, s, d, PprofOptions{KeepInternalFrames: true})
			got, want := pprofTotals(p), pprofTotals(kept)
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s device %d: %s %d, with internal frames %d", filepath.Base(path), d, k, got[k], v)
				}
			}
			for _, smp := range p.Sample {
				if len(smp.Label["freed_at"]) > 0 {
					before += smp.Value[5]
				}
			}
		}
	}
	t.Logf("peak bytes under %s in the corpus: %d", FrameBeforeRecording, before)
}
