package alloc

import (
	"strings"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

func TestParseScriptErrors(t *testing.T) {
	tests := []struct{ script, want string }{
		{"alloc a", "line 1: usage: alloc NAME SIZE [stream=N]"},
		{"# c\n\nalloc a 3XB", `line 3: bad size "3XB"`},
		{"alloc a 1 stream=x", `line 1: bad stream "x"`},
		{"alloc a 1 foo=1", `line 1: unexpected "foo=1"`},
		{"free", "line 1: usage: free NAME"},
		{"empty_cache now", "line 1: empty_cache takes no arguments"},
		{"set", "line 1: usage: set CONFIG"},
		{"set max_split_size_mb:1", "line 1: allocator config: max_split_size_mb"},
		{"malloc a 1", `line 1: unknown command "malloc"`},
	}
	for _, tt := range tests {
		_, err := ParseScript(strings.NewReader(tt.script))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("script %q: error %v, want prefix %q", tt.script, err, tt.want)
		}
	}
}

func TestRunScript(t *testing.T) {
	script := `
# comment
alloc a 3MiB            # large pool, new 20 MiB segment
alloc b 1000 stream=0x10
free a
alloc c 2.5MiB          # reuses a's place
free_requested c
alloc d 1MiB            # c is pending: cannot be reused
free_completed c
set expandable_segments:True
alloc e 25MiB
empty_cache
`
	cmds, err := ParseScript(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	steps, a, err := RunScript(cmds, DefaultConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 10 || steps[0].Line != 3 {
		t.Fatalf("%d steps, first line %d", len(steps), steps[0].Line)
	}
	if !steps[0].NewSegment || steps[0].SegmentSize != 20*MiB || steps[0].Small {
		t.Errorf("step 1: %+v", steps[0])
	}
	if !steps[1].NewSegment || !steps[1].Small || steps[1].SegmentSize != 2*MiB {
		t.Errorf("step 2 (small pool): %+v", steps[1])
	}
	if steps[3].Addr != steps[0].Addr || steps[3].NewSegment {
		t.Errorf("c should reuse a's block at %#x, got %#x", steps[0].Addr, steps[3].Addr)
	}
	// d (1 MiB, small pool, stream 0): the only small segment belongs to
	// stream 0x10, so d gets a new one.
	if !steps[5].NewSegment || !steps[5].Small {
		t.Errorf("d: %+v", steps[5])
	}
	if steps[8].MappedBytes != 40*MiB {
		t.Errorf("e mapped %d, want 40 MiB", steps[8].MappedBytes)
	}
	st := a.Stats()
	if got := st.RequestedBytes[PoolAll].Current; got != 1000+MiB+25*MiB {
		t.Errorf("requested at end = %d", got)
	}
	// empty_cache released the 20 MiB segment (c freed, a freed) but kept
	// the small segments (b, d live) and e's pages.
	if got := st.ReservedBytes[PoolAll].Current; got != 2*MiB+2*MiB+40*MiB {
		t.Errorf("reserved at end = %d, want 44 MiB", got)
	}

	bad := []struct{ script, want string }{
		{"alloc a 1\nalloc a 2", "line 2: a is already allocated"},
		{"free x", "line 1: x is not allocated"},
		{"alloc a 1\nfree a\nfree a", "line 3: a is not allocated"},
		{"alloc a 1\nfree_completed a", "line 2: a has no free_requested waiting"},
	}
	for _, tt := range bad {
		cmds, err := ParseScript(strings.NewReader(tt.script))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := RunScript(cmds, DefaultConfig(), Options{}); err == nil || err.Error() != tt.want {
			t.Errorf("script %q: %v, want %q", tt.script, err, tt.want)
		}
	}
	// An OOM is a step, not an error.
	cmds, _ = ParseScript(strings.NewReader("alloc a 60MiB\nalloc b 60MiB\nalloc c 1MiB"))
	steps, _, err = RunScript(cmds, DefaultConfig(), Options{Capacity: 100 * MiB})
	if err != nil || len(steps) != 3 || !strings.HasPrefix(steps[1].Error, "CUDA out of memory. Tried to allocate 60.00 MiB.") || steps[2].Error != "" {
		t.Errorf("OOM script: %v %+v", err, steps)
	}
}

func FuzzParseScript(f *testing.F) {
	for _, s := range []string{"alloc a 3MiB\nfree a\n", "alloc a 1 stream=7\nempty_cache\n", "set expandable_segments:True\nalloc x 1GB",
		"# only a comment", "free_requested a\nfree_completed a", "alloc a 1.5KiB\nalloc b 0\nfree b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cmds, err := ParseScript(strings.NewReader(s))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Errorf("error without line number: %v", err)
			}
			return
		}
		// Whatever parses runs without panicking (capacity bounds memory).
		_, _, err = RunScript(cmds, DefaultConfig(), Options{Capacity: 4 * GiB})
		if err != nil && !strings.HasPrefix(err.Error(), "line ") {
			t.Errorf("run error without line number: %v", err)
		}
	})
}

// TestReleaseAvailableSkipsExpandable: with max_split_size_mb and
// expandable segments, a failing malloc's release_available_cached_blocks
// leaves expandable blocks alone (PyTorch's `!(*cur)->expandable_segment_`):
// their pages are unmapped by release_cached_blocks, never cudaFree'd as a
// segment (which counted segment.all.current down to -1 and left the pages
// mapped in the model).
func TestReleaseAvailableSkipsExpandable(t *testing.T) {
	script := `
set expandable_segments:True,max_split_size_mb:128
alloc a 300MiB
alloc c 20MiB
free a
alloc b 800MiB
`
	cmds, err := ParseScript(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	steps, a, err := RunScript(cmds, DefaultConfig(), Options{Capacity: GiB})
	if err != nil {
		t.Fatal(err)
	}
	last := steps[len(steps)-1]
	if last.Error != "" {
		t.Fatalf("b should fit once a's pages are unmapped: %s", last.Error)
	}
	st := a.Stats()
	if st.Segment[PoolAll].Current != 0 || st.NumDeviceFree != 1 {
		t.Errorf("segments %d, device frees/unmaps %d; want 0 and 1 (the unmap of a's pages)", st.Segment[PoolAll].Current, st.NumDeviceFree)
	}
	if st.ReservedBytes[PoolAll].Current != 820*MiB || st.AllocatedBytes[PoolAll].Current != 820*MiB {
		t.Errorf("reserved %d, allocated %d; want 820 MiB each", st.ReservedBytes[PoolAll].Current, st.AllocatedBytes[PoolAll].Current)
	}
	for _, e := range a.Trace() {
		if e.Action == snapshot.ActionSegmentFree {
			t.Errorf("expandable block released as a segment: %+v", e)
		}
	}
}
