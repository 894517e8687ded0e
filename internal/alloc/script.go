package alloc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/units"
)

// A script drives the allocator one command a line:
//
//	alloc NAME SIZE [stream=N]   # malloc; NAME names the block
//	free NAME                    # free (free_requested + free_completed)
//	free_requested NAME          # free of a block used on another stream
//	free_completed NAME          # its stream events completed
//	empty_cache                  # torch.cuda.empty_cache()
//	set CONFIG                   # _set_allocator_settings(CONFIG)
//
// '#' starts a comment. SIZE is bytes, optionally with a unit B, KiB, MiB,
// GiB, TiB (KB, MB, GB, TB mean the same powers of 1024), e.g. 3MiB, 1.5GB
// or 1 GiB.

// Op is a script command kind.
type Op uint8

// Script commands.
const (
	OpAlloc Op = iota
	OpFree
	OpFreeRequested
	OpFreeCompleted
	OpEmptyCache
	OpSet
)

var opNames = [...]string{"alloc", "free", "free_requested", "free_completed", "empty_cache", "set"}

func (o Op) String() string { return opNames[o] }

// Command is one parsed script line.
type Command struct {
	Line   int // 1-based line number
	Op     Op
	Name   string
	Size   uint64
	Stream int64
	Config string // for OpSet
	Text   string // the line without comment and surrounding space
}

// ParseScript parses a script. Errors read "line N: ...".
func ParseScript(r io.Reader) ([]Command, error) {
	var cmds []Command
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxScriptLine)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		c, err := parseCommand(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		c.Line = n
		c.Text = line
		cmds = append(cmds, c)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("line %d: longer than %d KiB, the longest line a script may have", n+1, maxScriptLine>>10)
		}
		return nil, fmt.Errorf("line %d: %v", n+1, err)
	}
	return cmds, nil
}

// maxScriptLine bounds a script line (one command is a few dozen bytes).
const maxScriptLine = 64 << 10

func parseCommand(line string) (Command, error) {
	f := strings.Fields(line)
	var c Command
	switch f[0] {
	case "alloc":
		c.Op = OpAlloc
		// "alloc a 1 GiB": the size's unit may stand apart.
		if len(f) >= 4 && !strings.HasPrefix(f[3], "stream=") {
			if _, err := units.Parse(f[2] + f[3]); err == nil {
				f = append(append(f[:2:2], f[2]+f[3]), f[4:]...)
			}
		}
		if len(f) < 3 || len(f) > 4 {
			return c, errors.New("usage: alloc NAME SIZE [stream=N] (SIZE such as 4096, 3MiB or 1.5 GiB)")
		}
		c.Name = f[1]
		sz, err := units.Parse(f[2])
		if err != nil {
			return c, err
		}
		c.Size = sz
		if len(f) == 4 {
			v, ok := strings.CutPrefix(f[3], "stream=")
			if !ok {
				return c, fmt.Errorf("unexpected %q (want stream=N; usage: alloc NAME SIZE [stream=N])", f[3])
			}
			s, err := strconv.ParseInt(v, 0, 64)
			if err != nil {
				return c, fmt.Errorf("bad stream %q", v)
			}
			c.Stream = s
		}
	case "free", "free_requested", "free_completed":
		c.Op = map[string]Op{"free": OpFree, "free_requested": OpFreeRequested, "free_completed": OpFreeCompleted}[f[0]]
		if len(f) != 2 {
			return c, fmt.Errorf("usage: %s NAME", f[0])
		}
		c.Name = f[1]
	case "empty_cache":
		c.Op = OpEmptyCache
		if len(f) != 1 {
			return c, errors.New("empty_cache takes no arguments")
		}
	case "set":
		c.Op = OpSet
		c.Config = strings.TrimSpace(strings.TrimPrefix(line, "set"))
		if c.Config == "" {
			return c, errors.New("usage: set CONFIG")
		}
		if _, err := ParseConfig(c.Config); err != nil {
			return c, err
		}
	default:
		return c, fmt.Errorf("unknown command %q (want alloc, free, free_requested, free_completed, empty_cache, set)", f[0])
	}
	return c, nil
}

// Step is the outcome of one script command.
type Step struct {
	Line int
	Op   string // the command text
	Addr uint64 // block address for alloc
	// Error is the OOM message when an alloc failed (the script goes on).
	Error string
	// NewSegment: the alloc made a cudaMalloc of SegmentSize bytes (or
	// mapped MappedBytes of an expandable segment) in the Small/large pool.
	NewSegment  bool
	SegmentSize uint64
	MappedBytes uint64
	Small       bool
	Before      MemoryStats
	Stats       MemoryStats
}

// Delta of a stat between Before and Stats (current values, all pools).
func (s *Step) Delta(f func(*MemoryStats) *StatArray) int64 {
	return f(&s.Stats)[PoolAll].Current - f(&s.Before)[PoolAll].Current
}

// RunScript runs commands on a fresh allocator. Script mistakes (freeing an
// unknown name, allocating a live name) are errors "line N: ..."; OOMs are
// recorded in the step and the script continues.
func RunScript(cmds []Command, cfg Config, opt Options) ([]Step, *Allocator, error) {
	a := New(cfg, opt)
	names := map[string]uint64{}
	pendingNames := map[string]uint64{}
	steps := make([]Step, 0, len(cmds))
	for _, c := range cmds {
		st := Step{Line: c.Line, Op: c.Text, Before: a.Stats()}
		switch c.Op {
		case OpAlloc:
			if _, live := names[c.Name]; live {
				return steps, a, fmt.Errorf("line %d: %s is already allocated", c.Line, c.Name)
			}
			if _, live := pendingNames[c.Name]; live {
				return steps, a, fmt.Errorf("line %d: %s is still waiting for free_completed", c.Line, c.Name)
			}
			addr, err := a.Malloc(c.Size, c.Stream)
			if err != nil {
				st.Error = err.Error()
			} else if c.Size > 0 {
				names[c.Name] = addr
			}
			st.Addr = addr
			st.NewSegment = a.last.newSegment
			st.SegmentSize = a.last.segSize
			st.MappedBytes = a.last.mapped
			st.Small = a.last.small
		case OpFree, OpFreeRequested:
			addr, ok := names[c.Name]
			if !ok {
				return steps, a, fmt.Errorf("line %d: %s is not allocated", c.Line, c.Name)
			}
			delete(names, c.Name)
			if c.Op == OpFree {
				if err := a.Free(addr); err != nil {
					return steps, a, fmt.Errorf("line %d: %v", c.Line, err)
				}
			} else {
				if err := a.FreeRequested(addr); err != nil {
					return steps, a, fmt.Errorf("line %d: %v", c.Line, err)
				}
				pendingNames[c.Name] = addr
			}
		case OpFreeCompleted:
			addr, ok := pendingNames[c.Name]
			if !ok {
				return steps, a, fmt.Errorf("line %d: %s has no free_requested waiting", c.Line, c.Name)
			}
			delete(pendingNames, c.Name)
			if b := a.active[addr]; b != nil && b.eventCount > 0 {
				if err := a.FreeCompleted(addr); err != nil {
					return steps, a, fmt.Errorf("line %d: %v", c.Line, err)
				}
			} // else an empty_cache already synchronized it
		case OpEmptyCache:
			a.EmptyCache()
			// empty_cache completes every pending free.
			for n, addr := range pendingNames {
				if b := a.active[addr]; b == nil || b.eventCount == 0 {
					delete(pendingNames, n)
				}
			}
		case OpSet:
			nc := a.Config()
			if err := nc.Apply(c.Config); err != nil {
				return steps, a, fmt.Errorf("line %d: %v", c.Line, err)
			}
			a.SetConfig(nc)
			a.stats.MaxSplitSize = maxSplitStat(nc.MaxSplitSize)
		}
		st.Stats = a.Stats()
		steps = append(steps, st)
	}
	return steps, a, nil
}
