package alloc

import (
	"strings"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// AcceleratorAllocatorConfig::parseArgs and CUDAAllocatorConfig::parseArgs.
func TestParseConfig(t *testing.T) {
	tests := []struct {
		in    string
		check func(Config) bool
	}{
		{"", func(c Config) bool {
			return c.MaxSplitSize == Unlimited && c.MaxNonSplitRounding == 20*MiB && !c.ExpandableSegments
		}},
		{"expandable_segments:True", func(c Config) bool { return c.ExpandableSegments }},
		{" expandable_segments : True , max_split_size_mb : 128 ", func(c Config) bool {
			return c.ExpandableSegments && c.MaxSplitSize == 128*MiB
		}},
		{"max_split_size_mb:20", func(c Config) bool { return c.MaxSplitSize == 20*MiB }},
		{"max_non_split_rounding_mb:64", func(c Config) bool { return c.MaxNonSplitRounding == 64*MiB }},
		{"garbage_collection_threshold:0.6", func(c Config) bool { return c.GCThreshold == 0.6 }},
		{"roundup_power2_divisions:4", func(c Config) bool {
			for _, v := range c.RoundupDivisions {
				if v != 4 {
					return false
				}
			}
			return true
		}},
		// The first listed key fills the indices below it; '>' fills those
		// after the last key.
		{"roundup_power2_divisions:[64:8,256:4,1024:4,>:1]", func(c Config) bool {
			want := [16]uint64{8, 8, 8, 8, 8, 8, 8, 0, 4, 0, 4, 1, 1, 1, 1, 1}
			return c.RoundupDivisions == want
		}},
		{"roundup_power2_divisions:[1:0,2:2]", func(c Config) bool { return c.RoundupDivisions[0] == 0 && c.RoundupDivisions[1] == 2 }},
		{"backend:native", func(c Config) bool { return c.Backend == "native" }},
		{"backend:cudaMallocAsync", func(c Config) bool { return c.Backend == "cudaMallocAsync" }},
		{"release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,pinned_num_register_threads:8",
			func(c Config) bool {
				return c.ReleaseLockOnCudaMalloc && c.PinnedUseHostRegister && c.PinnedNumRegisterThreads == 8
			}},
		{"large_segment_size_mb:40", func(c Config) bool { return c.LargeSegmentSize == 40*MiB }},
		{"per_process_memory_fraction:0.5", func(c Config) bool { return c.MemoryFraction == 0.5 }},
		{"graph_capture_record_stream_reuse:False,pinned_use_background_threads:True", func(c Config) bool { return c.PinnedUseBackgroundThreads }},
	}
	for _, tt := range tests {
		c, err := ParseConfig(tt.in)
		if err != nil {
			t.Errorf("ParseConfig(%q): %v", tt.in, err)
			continue
		}
		if !tt.check(c) {
			t.Errorf("ParseConfig(%q) = %+v", tt.in, c)
		}
	}
}

// Invalid settings: one-line errors naming the bad key or value.
func TestParseConfigErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"max_split_size_mb:19", "max_split_size_mb: CachingAllocator option max_split_size_mb too small, must be >= 20"},
		{"max_non_split_rounding_mb:10", "max_non_split_rounding_mb"},
		{"max_split_size_mb:abc", `max_split_size_mb: invalid number "abc"`},
		{"max_split_size_mb", "max_split_size_mb: expected \":\""},
		{"max_split_size_mb:", "max_split_size_mb: expecting a value"},
		{"garbage_collection_threshold:1.0", "set it in (0.0, 1.0)"},
		{"garbage_collection_threshold:0", "set it in (0.0, 1.0)"},
		{"roundup_power2_divisions:3", "power of 2"},
		{"roundup_power2_divisions:[64:3]", "power of 2 or 0"},
		{"roundup_power2_divisions:[65:4]", "intervals have to be power of 2"},
		{"roundup_power2_divisions:[64:4", "closing bracket"},
		{"expandable_segments:yes", `expandable_segments: expected a single True/False argument, got "yes"`},
		{"bogus_key:1", `Unrecognized key "bogus_key"`},
		{"backend:magic", "Unknown allocator backend"},
		{"pinned_num_register_threads:3", "power of 2"},
		{"pinned_num_register_threads:256", "less than or equal to 128"},
		// Spaces are dropped before splitting, as PyTorch's lexer does.
		{"expandable_segments:True max_split_size_mb:64", `got "Truemax_split_size_mb"`},
		{"max_split_size_mb:64 garbage_collection_threshold:0.5", `invalid number "64garbage_collection_threshold"`},
		{",", "unexpected"},
	}
	for _, tt := range tests {
		_, err := ParseConfig(tt.in)
		if err == nil {
			t.Errorf("ParseConfig(%q): no error", tt.in)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseConfig(%q) = %q, want it to contain %q on one line", tt.in, err, tt.want)
		}
	}
}

// parseArgs resets max_split_size, roundup divisions and the GC threshold
// on every parse; other options keep their values.
func TestApplyResets(t *testing.T) {
	c, _ := ParseConfig("expandable_segments:True,max_split_size_mb:64,garbage_collection_threshold:0.5,roundup_power2_divisions:4")
	if err := c.Apply("max_non_split_rounding_mb:30"); err != nil {
		t.Fatal(err)
	}
	if c.MaxSplitSize != Unlimited || c.GCThreshold != 0 || c.RoundupDivisions[3] != 0 {
		t.Errorf("not reset: %+v", c)
	}
	if !c.ExpandableSegments || c.MaxNonSplitRounding != 30*MiB {
		t.Errorf("lost options: %+v", c)
	}
	before := c
	if err := c.Apply("max_split_size_mb:1"); err == nil || c != before {
		t.Errorf("a failed Apply must leave the config unchanged")
	}
}

func TestConfigFromSettings(t *testing.T) {
	if c := ConfigFromSettings(nil); c != DefaultConfig() {
		t.Errorf("nil settings: %+v", c)
	}
	s := &snapshot.AllocatorSettings{
		Conf: "expandable_segments:True,max_split_size_mb:128", MaxSplitSize: 128 * MiB, ExpandableSegments: true,
		RoundupPower2Divisions: []snapshot.RoundupDivision{{IntervalMiB: "1", Divisions: 0}, {IntervalMiB: "2", Divisions: 4}},
	}
	c := ConfigFromSettings(s)
	if !c.ExpandableSegments || c.MaxSplitSize != 128*MiB || c.RoundupDivisions[1] != 4 {
		t.Errorf("settings: %+v", c)
	}
	s = &snapshot.AllocatorSettings{MaxSplitSize: -1}
	if c := ConfigFromSettings(s); c.MaxSplitSize != Unlimited {
		t.Errorf("-1 must mean unlimited, got %d", c.MaxSplitSize)
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"", "expandable_segments:True", "max_split_size_mb:128,garbage_collection_threshold:0.6",
		"roundup_power2_divisions:[64:8,256:4,1024:4,>:1]", "roundup_power2_divisions:4", "backend:native",
		"max_split_size_mb:", "[]:,", "roundup_power2_divisions:[>:2]", "large_segment_size_mb:99999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConfig(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		// A valid config drives the allocator without panicking.
		a := New(c, Options{Capacity: 1 * GiB})
		for _, n := range []uint64{1, 4097, 3 * MiB, 300 * MiB} {
			if p, err := a.Malloc(n, 0); err == nil {
				a.Free(p)
			}
		}
		a.EmptyCache()
		// Its canonical form parses back to the same placement settings.
		c2, err := ParseConfig(c.canonical())
		if c.canonical() != "default" && (err != nil || c2.MaxSplitSize != c.MaxSplitSize || c2.RoundupDivisions != c.RoundupDivisions ||
			c2.ExpandableSegments != c.ExpandableSegments || c2.GCThreshold != c.GCThreshold) {
			t.Errorf("%q -> canonical %q -> %+v, %v", s, c.canonical(), c2, err)
		}
	})
}
