package report

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// TraceOptions selects what Trace prints.
type TraceOptions struct {
	// Device limits the listing to one device; -1 lists every device.
	Device int
}

// Trace writes the listing of "python -m torch.cuda._memory_viz trace": one
// Python-like line per trace entry, device by device, such as
//
//	a = cudaMalloc(139637976727552, 20.0MiB)
//	b = a[0:4.0MiB]
//	del b # 4.0MiB
//	# free completed for b 4.0MiB
//
// It differs from PyTorch's (whose bugs it fixes) in these ways:
//   - Names are never reused: each name denotes exactly one allocation or
//     segment for the whole listing, so searching for "b[" or "del b " finds
//     one object's life. (PyTorch meant to recycle names but never did.)
//   - An allocation is placed in the most recent live segment (cudaMalloc or
//     expandable mapping) of this trace that contains it, else in the dump's
//     segment seg_I whose [address, address+total_size) contains it, else
//     in MEM at its absolute address.
//   - segment_map, segment_unmap, snapshot and oom get readable lines
//     instead of Python dict reprs; unknown actions print as a comment.
//   - Frees of blocks allocated before the trace began say so.
//   - TOTAL MEM is the memory allocated on the device when the snapshot was
//     taken: the sum of the sizes of its active_allocated blocks, which is
//     torch.cuda.memory_allocated() at dump time. A comment after it gives
//     the number and requested bytes of allocations made in the trace and
//     never freed. (PyTorch prints a meaningless running value here.)
//   - Each device ends with a newline, and devices are separated by a blank
//     line.
//   - A snapshot without a trace (a bare list of segments) or with empty
//     traces prints one line saying so.
func Trace(w io.Writer, s *snapshot.Snapshot, opt TraceOptions) error {
	bw := bufio.NewWriter(w)
	if s.Traces == nil {
		fmt.Fprintf(bw, "no trace: %s is a bare list of segments (torch.cuda.memory_snapshot()), which records no allocator history\n", displayName(s))
		return bw.Flush()
	}
	if opt.Device >= 0 && opt.Device >= len(s.Traces) {
		return fmt.Errorf("no device %d: the snapshot has traces for devices 0-%d", opt.Device, len(s.Traces)-1)
	}
	printed := 0
	for d := range s.Traces {
		if opt.Device >= 0 && d != opt.Device {
			continue
		}
		if len(s.Traces[d].Events) == 0 {
			continue
		}
		if printed > 0 {
			bw.WriteByte('\n')
		}
		printed++
		writeDeviceTrace(bw, s, d)
	}
	if printed == 0 {
		if opt.Device >= 0 {
			fmt.Fprintf(bw, "no trace entries for device %d\n", opt.Device)
		} else {
			fmt.Fprintf(bw, "no trace entries: memory history was not being recorded (torch.cuda.memory._record_memory_history) when %s was dumped\n", displayName(s))
		}
	}
	return bw.Flush()
}

func displayName(s *snapshot.Snapshot) string {
	if s.Source.Name == "" {
		return "the snapshot"
	}
	return s.Source.Name
}

type traceSegment struct {
	name       string
	addr, size uint64
}

// traceNamer hands out _memory_viz's names: a..z, a1..z1, a2...
type traceNamer struct{ next int }

func (n *traceNamer) name() string {
	r, m := n.next/26, n.next%26
	n.next++
	if r == 0 {
		return string(rune('a' + m))
	}
	return string(rune('a'+m)) + strconv.Itoa(r)
}

func writeDeviceTrace(bw *bufio.Writer, s *snapshot.Snapshot, device int) {
	events := s.Traces[device].Events
	fmt.Fprintf(bw, "Device %d ----------------\n", device)
	fmt.Fprintf(bw, "%s\n", plural(len(events), "entry"))

	var namer traceNamer
	var live intervals // segments and mappings of this trace still alive
	allocName := map[uint64]string{}
	allocSize := map[uint64]uint64{}
	preTraceDel := map[uint64]bool{} // pre-trace blocks whose del was listed

	// The dump's segments of this device, by address, for allocations in
	// segments that predate the trace.
	var dump intervals
	for i := range s.Segments {
		seg := &s.Segments[i]
		if int(seg.Device) == device {
			dump.add(traceSegment{"seg_" + strconv.Itoa(i), seg.Address, seg.TotalSize})
		}
	}
	findSegment := func(addr uint64) (string, uint64, bool) {
		if l, ok := live.find(addr); ok {
			return l.name, l.addr, true
		}
		if l, ok := dump.find(addr); ok {
			return l.name, l.addr, true
		}
		return "", 0, false
	}
	freeName := func(addr uint64) (string, bool) {
		if n, ok := allocName[addr]; ok {
			return n, true
		}
		return strconv.FormatUint(addr, 10), false
	}

	var line []byte
	for i := range events {
		e := &events[i]
		switch e.Action {
		// The three commonest actions avoid fmt: traces run to millions
		// of entries.
		case snapshot.ActionAlloc:
			n := namer.name()
			line = append(line[:0], n...)
			if seg, saddr, ok := findSegment(e.Addr); ok {
				line = append(line, " = "...)
				line = append(line, seg...)
				line = append(line, '[')
				line = strconv.AppendUint(line, e.Addr-saddr, 10)
			} else {
				line = append(line, " = MEM["...)
				line = strconv.AppendUint(line, e.Addr, 10)
			}
			line = append(line, ':')
			line = append(line, units.PythonU(e.Size)...)
			line = append(line, "]\n"...)
			bw.Write(line)
			allocName[e.Addr] = n
			allocSize[e.Addr] = e.Size
		case snapshot.ActionFreeRequested:
			n, ok := freeName(e.Addr)
			line = append(append(append(line[:0], "del "...), n...), " # "...)
			line = append(line, units.PythonU(e.Size)...)
			if !ok {
				line = append(line, ", allocated before the trace began"...)
				preTraceDel[e.Addr] = true
			}
			bw.Write(append(line, '\n'))
		case snapshot.ActionFreeCompleted:
			n, ok := freeName(e.Addr)
			line = append(append(line[:0], "# free completed for "...), n...)
			line = append(append(line, ' '), units.PythonU(e.Size)...)
			if !ok && !preTraceDel[e.Addr] {
				line = append(line, ", allocated before the trace began"...)
			}
			delete(preTraceDel, e.Addr)
			bw.Write(append(line, '\n'))
			delete(allocName, e.Addr)
			delete(allocSize, e.Addr)
		case snapshot.ActionSegmentAlloc:
			n := namer.name()
			fmt.Fprintf(bw, "%s = cudaMalloc(%d, %s)\n", n, e.Addr, units.PythonU(e.Size))
			live.add(traceSegment{n, e.Addr, e.Size})
		case snapshot.ActionSegmentFree:
			if l, ok := live.removeAt(e.Addr); ok {
				n := l.name
				fmt.Fprintf(bw, "cudaFree(%s) # %s\n", n, units.PythonU(e.Size))
			} else {
				fmt.Fprintf(bw, "cudaFree(%d) # %s, allocated before the trace began\n", e.Addr, units.PythonU(e.Size))
			}
		case snapshot.ActionSegmentMap:
			n := namer.name()
			fmt.Fprintf(bw, "%s = cuMemMap(%d, %s) # expandable segment grows\n", n, e.Addr, units.PythonU(e.Size))
			live.add(traceSegment{n, e.Addr, e.Size})
		case snapshot.ActionSegmentUnmap:
			live.removeRange(e.Addr, e.Size)
			fmt.Fprintf(bw, "cuMemUnmap(%d, %s) # expandable segment shrinks\n", e.Addr, units.PythonU(e.Size))
		case snapshot.ActionSnapshot:
			fmt.Fprintf(bw, "# snapshot taken: %s active\n", units.PythonU(e.Size))
		case snapshot.ActionOOM:
			fmt.Fprintf(bw, "raise OutOfMemoryError # %s requested, %s free in CUDA\n", units.PythonU(e.Size), units.PythonU(e.Addr))
		default:
			fmt.Fprintf(bw, "# unknown action %s at %d, size %s\n", unknownAction(s, &s.Traces[device], i), e.Addr, units.PythonU(e.Size))
		}
	}

	var allocated uint64
	for i := range s.Segments {
		if int(s.Segments[i].Device) != device {
			continue
		}
		for _, b := range s.SegmentBlocks(i) {
			if b.State == snapshot.BlockActiveAllocated {
				allocated += b.Size
			}
		}
	}
	var liveBytes uint64
	for _, sz := range allocSize {
		liveBytes += sz
	}
	fmt.Fprintf(bw, "TOTAL MEM: %s # allocated at dump time; %s of this trace still live (%s requested)\n",
		units.PythonU(allocated), plural(len(allocSize), "allocation"), units.PythonU(liveBytes))
}

// plural returns "1 thing" or "N things" ("entry" becomes "entries").
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	if strings.HasSuffix(thing, "y") {
		return strconv.Itoa(n) + " " + strings.TrimSuffix(thing, "y") + "ies"
	}
	return strconv.Itoa(n) + " " + thing + "s"
}

// intervals is a set of disjoint address ranges sorted by address.
type intervals []traceSegment

// search returns the index of the first interval starting after addr.
func (iv intervals) search(addr uint64) int {
	return sort.Search(len(iv), func(i int) bool { return iv[i].addr > addr })
}

// find returns the interval containing addr.
func (iv intervals) find(addr uint64) (traceSegment, bool) {
	i := iv.search(addr) - 1
	if i >= 0 && addr-iv[i].addr < iv[i].size {
		return iv[i], true
	}
	return traceSegment{}, false
}

// add inserts t, dropping intervals it overlaps: the allocator never hands
// out live memory twice, so those must have been freed unrecorded.
func (iv *intervals) add(t traceSegment) {
	iv.removeRange(t.addr, t.size)
	i := iv.search(t.addr)
	*iv = append(*iv, traceSegment{})
	copy((*iv)[i+1:], (*iv)[i:])
	(*iv)[i] = t
}

// removeAt removes the interval starting at addr.
func (iv *intervals) removeAt(addr uint64) (traceSegment, bool) {
	i := iv.search(addr) - 1
	if i >= 0 && (*iv)[i].addr == addr {
		t := (*iv)[i]
		*iv = append((*iv)[:i], (*iv)[i+1:]...)
		return t, true
	}
	return traceSegment{}, false
}

// removeRange removes every interval overlapping [addr, addr+size).
func (iv *intervals) removeRange(addr, size uint64) {
	last := addr + max(size, 1) - 1
	lo := iv.search(addr) - 1
	if lo < 0 || addr-(*iv)[lo].addr >= max((*iv)[lo].size, 1) {
		lo++ // the interval before addr ends before it
	}
	hi := iv.search(last)
	if lo < hi {
		*iv = append((*iv)[:lo], (*iv)[hi:]...)
	}
}

// unknownAction returns the action string of an entry whose action gpumem
// does not know, which the decoder keeps among the entry's extra keys.
func unknownAction(s *snapshot.Snapshot, tr *snapshot.Trace, i int) string {
	if x := s.EventMeta(tr, i).Extra; x > 0 && int(x) < len(s.Extras) {
		for _, kv := range s.Extras[x] {
			if kv.Key == "action" {
				return kv.JSON
			}
		}
	}
	return "?"
}
