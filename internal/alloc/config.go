package alloc

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/rules"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// Sizes and limits of c10/cuda/CUDACachingAllocator.cpp (constants at the
// top of the file) and c10/core/AllocatorConfig.cpp.
const (
	KiB = units.KiB
	MiB = units.MiB
	GiB = units.GiB

	kMinBlockSize = rules.MinBlockSize // kMinBlockSize: every size is rounded to 512 bytes
	kSmallSize    = rules.SmallSize    // kSmallSize: largest "small" allocation
	kSmallBuffer  = rules.SmallBuffer  // kSmallBuffer: small-pool segment size
	kLargeBuffer  = rules.LargeBuffer  // kLargeBuffer: default large_segment_size_mb

	// roundupIntervals is kRoundUpPowerOfTwoIntervals: 16 power-of-two
	// intervals from 1 MiB to 64 GiB.
	roundupIntervals = rules.Intervals

	// Unlimited is max_split_size when no max_split_size_mb is set
	// (std::numeric_limits<size_t>::max()); memory_stats reports it as -1.
	Unlimited = math.MaxUint64

	// pinnedMaxRegisterThreads is CUDAAllocatorConfig::pinned_max_register_threads().
	pinnedMaxRegisterThreads = 128
)

// Config is the caching allocator's configuration, as set by
// PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF or
// torch.cuda.memory._set_allocator_settings.
type Config struct {
	// MaxSplitSize: blocks this large or larger are never split
	// (max_split_size_mb); Unlimited by default.
	MaxSplitSize uint64
	// MaxNonSplitRounding: an oversize request may take a cached oversize
	// block at most this much larger (max_non_split_rounding_mb, default 20 MiB).
	MaxNonSplitRounding uint64
	// GCThreshold is garbage_collection_threshold (0 = off). It acts only
	// when a memory fraction is set (Options.MemoryFraction or
	// per_process_memory_fraction).
	GCThreshold float64
	// RoundupDivisions[i] is roundup_power2_divisions for sizes in
	// [2^i MiB, 2^(i+1) MiB) (index 0 also covers < 1 MiB, 15 covers >= 32 GiB).
	RoundupDivisions rules.Divisions
	// ExpandableSegments is expandable_segments.
	ExpandableSegments bool
	// LargeSegmentSize is the large-pool segment size for 1..10 MiB
	// requests and the page size of large expandable segments
	// (large_segment_size_mb, default 20 MiB).
	LargeSegmentSize uint64
	// MemoryFraction is per_process_memory_fraction (0 = unset).
	MemoryFraction float64

	// Options that do not change block placement; kept so that a parsed
	// string round-trips and invalid values are reported.
	Backend                       string // "native" or "cudaMallocAsync"
	ReleaseLockOnCudaMalloc       bool
	PinnedUseHostRegister         bool
	PinnedNumRegisterThreads      uint64
	PinnedUseBackgroundThreads    bool
	PinnedReserveSegmentSizeMB    uint64
	GraphCaptureRecordStreamReuse bool

	// Conf is the last settings string applied.
	Conf string
}

// DefaultConfig returns PyTorch's defaults (an empty PYTORCH_ALLOC_CONF).
func DefaultConfig() Config {
	return Config{
		MaxSplitSize:             Unlimited,
		MaxNonSplitRounding:      kLargeBuffer,
		LargeSegmentSize:         kLargeBuffer,
		Backend:                  "native",
		PinnedNumRegisterThreads: 1,
	}
}

// ParseConfig parses a PYTORCH_ALLOC_CONF string on top of the defaults.
func ParseConfig(s string) (Config, error) {
	c := DefaultConfig()
	err := c.Apply(s)
	return c, err
}

// ConfigError is an invalid settings string.
type ConfigError struct {
	Key string // the option being parsed ("" when the string itself is malformed)
	Msg string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return "allocator config: " + e.Msg
	}
	return "allocator config: " + e.Key + ": " + e.Msg
}

// Apply parses s as AcceleratorAllocatorConfig::parseArgs does: it first
// resets max_split_size, roundup_power2_divisions and
// garbage_collection_threshold to their defaults (the other options keep
// their values), then applies each key:value. On error c is unchanged.
func (c *Config) Apply(s string) error {
	n := *c
	n.MaxSplitSize = Unlimited
	n.RoundupDivisions = rules.Divisions{}
	n.GCThreshold = 0
	n.Conf = s
	p := configParser{toks: lexConfig(s)}
	if err := p.parse(&n); err != nil {
		return err
	}
	*c = n
	return nil
}

// lexConfig splits like ConfigTokenizer/lexArgs: ',', ':', '[' and ']'
// are tokens of their own, spaces are dropped.
func lexConfig(s string) []string {
	var toks []string
	var buf strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch ch {
		case ',', ':', '[', ']':
			if buf.Len() > 0 {
				toks = append(toks, buf.String())
				buf.Reset()
			}
			toks = append(toks, string(ch))
		case ' ', '\t', '\n', '\r':
		default:
			buf.WriteByte(ch)
		}
	}
	if buf.Len() > 0 {
		toks = append(toks, buf.String())
	}
	return toks
}

type configParser struct {
	toks []string
	key  string
}

func (p *configParser) errf(format string, args ...any) error {
	return &ConfigError{Key: p.key, Msg: fmt.Sprintf(format, args...)}
}

func (p *configParser) tok(i int) string {
	if i < 0 || i >= len(p.toks) {
		return ""
	}
	return p.toks[i]
}

// expect is ConfigTokenizer::checkToken.
func (p *configParser) expect(i int, want string) error {
	if p.tok(i) != want {
		if i >= len(p.toks) {
			return p.errf("expected %q, got end of string", want)
		}
		return p.errf("expected %q, got %q", want, p.tok(i))
	}
	return nil
}

func (p *configParser) value(i int) (string, error) {
	v := p.tok(i)
	if i >= len(p.toks) || v == "," || v == ":" || v == "[" || v == "]" {
		return "", p.errf("expecting a value")
	}
	return v, nil
}

func (p *configParser) uintAt(i int) (uint64, error) {
	v, err := p.value(i)
	if err != nil {
		return 0, err
	}
	return p.parseUint(v)
}

func (p *configParser) parseUint(v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, p.errf("invalid number %q", v)
	}
	return n, nil
}

func (p *configParser) parseFloat(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, p.errf("invalid number %q", v)
	}
	return f, nil
}

func (p *configParser) parseBool(v string) (bool, error) {
	switch v {
	case "True", "true", "1":
		return true, nil
	case "False", "false", "0":
		return false, nil
	}
	return false, p.errf("expected a single True/False argument, got %q", v)
}

func isPow2(v uint64) bool { return v != 0 && v&(v-1) == 0 }

// An optionParser parses the value token v of a key:value option into c.
type optionParser func(p *configParser, c *Config, v string) error

// options are the keys written key:value; roundup_power2_divisions, which
// may take a list, has a parser of its own.
var options = map[string]optionParser{
	"max_split_size_mb":         mbOption(func(c *Config) *uint64 { return &c.MaxSplitSize }),
	"max_non_split_rounding_mb": mbOption(func(c *Config) *uint64 { return &c.MaxNonSplitRounding }),

	"expandable_segments":               boolOption(func(c *Config) *bool { return &c.ExpandableSegments }),
	"release_lock_on_cudamalloc":        boolOption(func(c *Config) *bool { return &c.ReleaseLockOnCudaMalloc }),
	"release_lock_on_hipmalloc":         boolOption(func(c *Config) *bool { return &c.ReleaseLockOnCudaMalloc }),
	"pinned_use_cuda_host_register":     boolOption(func(c *Config) *bool { return &c.PinnedUseHostRegister }),
	"pinned_use_hip_host_register":      boolOption(func(c *Config) *bool { return &c.PinnedUseHostRegister }),
	"pinned_use_background_threads":     boolOption(func(c *Config) *bool { return &c.PinnedUseBackgroundThreads }),
	"graph_capture_record_stream_reuse": boolOption(func(c *Config) *bool { return &c.GraphCaptureRecordStreamReuse }),

	"garbage_collection_threshold": func(p *configParser, c *Config, v string) error {
		f, err := p.parseFloat(v)
		if err != nil {
			return err
		}
		if !(f > 0 && f < 1) {
			return p.errf("garbage_collect_threshold is invalid, set it in (0.0, 1.0), got %s", v)
		}
		c.GCThreshold = f
		return nil
	},
	"per_process_memory_fraction": func(p *configParser, c *Config, v string) error {
		f, err := p.parseFloat(v)
		if err != nil {
			return err
		}
		if !(f > 0 && f <= 1) {
			return p.errf("per_process_memory_fraction must be in (0.0, 1.0], got %s", v)
		}
		c.MemoryFraction = f
		return nil
	},
	"backend": func(p *configParser, c *Config, v string) error {
		if v != "native" && v != "cudaMallocAsync" {
			return p.errf("Unknown allocator backend %q, options are native and cudaMallocAsync", v)
		}
		c.Backend = v
		return nil
	},
	"pinned_num_register_threads": func(p *configParser, c *Config, v string) error {
		n, err := p.parseUint(v)
		if err != nil {
			return err
		}
		if !isPow2(n) {
			return p.errf("Number of register threads has to be power of 2, got %d", n)
		}
		if n > pinnedMaxRegisterThreads {
			return p.errf("Number of register threads should be less than or equal to %d, got %d", pinnedMaxRegisterThreads, n)
		}
		c.PinnedNumRegisterThreads = n
		return nil
	},
	"pinned_reserve_segment_size_mb": func(p *configParser, c *Config, v string) error {
		n, err := p.parseUint(v)
		if err != nil {
			return err
		}
		if n == 0 {
			return p.errf("Pinned reserve segment size has to be greater than 0")
		}
		c.PinnedReserveSegmentSizeMB = n
		return nil
	},
	"large_segment_size_mb": func(p *configParser, c *Config, v string) error {
		// (unverified bound: newest PyTorch only; we require at least 1 MiB)
		n, err := p.parseUint(v)
		if err != nil {
			return err
		}
		if n < 1 || n > math.MaxUint64/MiB {
			return p.errf("large_segment_size_mb must be >= 1, got %d", n)
		}
		c.LargeSegmentSize = n * MiB
		return nil
	},
}

func boolOption(field func(*Config) *bool) optionParser {
	return func(p *configParser, c *Config, v string) error {
		b, err := p.parseBool(v)
		if err != nil {
			return err
		}
		*field(c) = b
		return nil
	}
}

// mbOption is parseMaxSplitSize / parseMaxNonSplitRoundingSize: the value
// is MiB, at least kLargeBuffer/MiB (20).
func mbOption(field func(*Config) *uint64) optionParser {
	return func(p *configParser, c *Config, v string) error {
		n, err := p.parseUint(v)
		if err != nil {
			return err
		}
		if n < kLargeBuffer/MiB {
			return p.errf("CachingAllocator option %s too small, must be >= %d, got %d", p.key, kLargeBuffer/MiB, n)
		}
		*field(c) = min(n, math.MaxUint64/MiB) * MiB
		return nil
	}
}

func (p *configParser) parse(c *Config) error {
	for i := 0; i < len(p.toks); i++ {
		key := p.toks[i]
		p.key = key
		switch set, ok := options[key]; {
		case ok:
			if err := p.expect(i+1, ":"); err != nil {
				return err
			}
			i += 2
			v, err := p.value(i)
			if err != nil {
				return err
			}
			if err := set(p, c, v); err != nil {
				return err
			}
		case key == "roundup_power2_divisions":
			var err error
			if i, err = p.parseRoundup(c, i); err != nil {
				return err
			}
		case key == "," || key == ":" || key == "[" || key == "]":
			p.key = ""
			return p.errf("unexpected %q at token %d", key, i+1)
		default:
			return &ConfigError{Msg: fmt.Sprintf("Unrecognized key %q in allocator config", key)}
		}
		if i+1 < len(p.toks) {
			p.key = ""
			if p.toks[i+1] != "," {
				return p.errf("expected \",\" after the value of %s, got %q", key, p.toks[i+1])
			}
			i++
		}
	}
	return nil
}

// parseRoundup is parseRoundUpPower2Divisions, both syntaxes.
func (p *configParser) parseRoundup(c *Config, i int) (int, error) {
	if err := p.expect(i+1, ":"); err != nil {
		return i, err
	}
	i += 2
	if p.tok(i) != "[" {
		n, err := p.uintAt(i)
		if err != nil {
			return i, err
		}
		if !isPow2(n) {
			return i, p.errf("For roundups, the divisions has to be power of 2, got %d", n)
		}
		for k := range c.RoundupDivisions {
			c.RoundupDivisions[k] = n
		}
		return i, nil
	}
	first := true
	lastIndex := 0
	for {
		i++
		if i >= len(p.toks) {
			return i, p.errf("expected closing bracket ']'")
		}
		if p.toks[i] == "]" {
			return i, nil
		}
		bound := p.toks[i]
		if err := p.expect(i+1, ":"); err != nil {
			return i, err
		}
		i += 2
		v, err := p.uintAt(i)
		if err != nil {
			return i, err
		}
		if v != 0 && !isPow2(v) {
			return i, p.errf("For roundups, the divisions has to be power of 2 or 0 to disable roundup, got %d", v)
		}
		if bound == ">" {
			for k := lastIndex + 1; k < roundupIntervals; k++ {
				c.RoundupDivisions[k] = v
			}
		} else {
			b, perr := strconv.ParseUint(bound, 10, 64)
			if perr != nil {
				return i, p.errf("invalid interval %q", bound)
			}
			idx, ok := rules.Index(b)
			if !ok {
				return i, p.errf("For roundups, the intervals have to be power of 2, got %d", b)
			}
			if first {
				for k := 0; k < idx; k++ {
					c.RoundupDivisions[k] = v
				}
				first = false
			}
			c.RoundupDivisions[idx] = v
			lastIndex = idx
		}
		if i+1 >= len(p.toks) {
			return i, p.errf("expected closing bracket ']'")
		}
		if p.tok(i+1) != "]" {
			if err := p.expect(i+1, ","); err != nil {
				return i, err
			}
			i++
		}
	}
}

// RoundSize is DeviceCachingAllocator::round_size: the block size a request
// of n bytes gets.
func (c *Config) RoundSize(n uint64) uint64 { return rules.RoundSize(n, &c.RoundupDivisions) }

// AllocationSize is get_allocation_size: the cudaMalloc size for a rounded
// request.
func (c *Config) AllocationSize(size uint64) uint64 {
	return rules.AllocationSize(size, c.LargeSegmentSize)
}

// String renders the settings that differ from the defaults as a config
// string (Conf if that was set).
func (c Config) String() string {
	if c.Conf != "" {
		return c.Conf
	}
	return c.canonical()
}

func (c Config) canonical() string {
	d := DefaultConfig()
	var parts []string
	if c.ExpandableSegments {
		parts = append(parts, "expandable_segments:True")
	}
	if c.MaxSplitSize != Unlimited {
		parts = append(parts, fmt.Sprintf("max_split_size_mb:%d", c.MaxSplitSize/MiB))
	}
	if c.MaxNonSplitRounding != d.MaxNonSplitRounding {
		parts = append(parts, fmt.Sprintf("max_non_split_rounding_mb:%d", c.MaxNonSplitRounding/MiB))
	}
	if c.RoundupDivisions != d.RoundupDivisions {
		same := true
		for _, v := range c.RoundupDivisions {
			same = same && v == c.RoundupDivisions[0]
		}
		if same {
			parts = append(parts, fmt.Sprintf("roundup_power2_divisions:%d", c.RoundupDivisions[0]))
		} else {
			var items []string
			for k, v := range c.RoundupDivisions {
				items = append(items, fmt.Sprintf("%d:%d", uint64(1)<<k, v))
			}
			parts = append(parts, "roundup_power2_divisions:["+strings.Join(items, ",")+"]")
		}
	}
	if c.GCThreshold != 0 {
		parts = append(parts, "garbage_collection_threshold:"+strconv.FormatFloat(c.GCThreshold, 'g', -1, 64))
	}
	if c.LargeSegmentSize != d.LargeSegmentSize {
		parts = append(parts, fmt.Sprintf("large_segment_size_mb:%d", c.LargeSegmentSize/MiB))
	}
	if c.MemoryFraction != 0 {
		parts = append(parts, "per_process_memory_fraction:"+strconv.FormatFloat(c.MemoryFraction, 'g', -1, 64))
	}
	if len(parts) == 0 {
		return "default"
	}
	return strings.Join(parts, ",")
}

// ConfigFromSettings rebuilds the configuration a snapshot was taken with
// from its allocator_settings (defaults when s is nil). The numeric fields
// win over the Conf string, which may be stale or set through the Python
// API; Conf is still parsed for options the dict lacks.
func ConfigFromSettings(s *snapshot.AllocatorSettings) Config {
	c := DefaultConfig()
	if s == nil {
		return c
	}
	if s.Conf != "" {
		if parsed, err := ParseConfig(s.Conf); err == nil {
			c = parsed
		}
	}
	if s.MaxSplitSize < 0 {
		c.MaxSplitSize = Unlimited
	} else {
		c.MaxSplitSize = uint64(s.MaxSplitSize)
	}
	c.GCThreshold = s.GarbageCollectionThreshold
	c.ExpandableSegments = s.ExpandableSegments
	if d := s.Divisions(); d != nil {
		c.RoundupDivisions = *d
	}
	return c
}
