package report

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

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
	fmt.Fprintf(bw, "%d entries\n", len(events))

	var namer traceNamer
	var live []traceSegment // segments and mappings of this trace, oldest first
	allocName := map[uint64]string{}
	allocSize := map[uint64]uint64{}

	findSegment := func(addr uint64) (string, uint64, bool) {
		for i := len(live) - 1; i >= 0; i-- {
			if addr >= live[i].addr && addr-live[i].addr < live[i].size {
				return live[i].name, live[i].addr, true
			}
		}
		for i := range s.Segments {
			seg := &s.Segments[i]
			if int(seg.Device) == device && addr >= seg.Address && addr-seg.Address < seg.TotalSize {
				return "seg_" + strconv.Itoa(i), seg.Address, true
			}
		}
		return "", 0, false
	}
	removeLive := func(addr, size uint64, exact bool) (string, bool) {
		for i := len(live) - 1; i >= 0; i-- {
			l := live[i]
			match := l.addr == addr
			if !exact {
				// An unmap removes every mapping inside the range.
				match = l.addr >= addr && l.addr-addr < size
			}
			if match {
				live = append(live[:i], live[i+1:]...)
				if exact {
					return l.name, true
				}
			}
		}
		return "", false
	}
	freeName := func(addr uint64) (string, bool) {
		if n, ok := allocName[addr]; ok {
			return n, true
		}
		return strconv.FormatUint(addr, 10), false
	}

	for i := range events {
		e := &events[i]
		switch e.Action {
		case snapshot.ActionAlloc:
			n := namer.name()
			if seg, saddr, ok := findSegment(e.Addr); ok {
				fmt.Fprintf(bw, "%s = %s[%d:%s]\n", n, seg, e.Addr-saddr, BytesU(e.Size))
			} else {
				fmt.Fprintf(bw, "%s = MEM[%d:%s]\n", n, e.Addr, BytesU(e.Size))
			}
			allocName[e.Addr] = n
			allocSize[e.Addr] = e.Size
		case snapshot.ActionFreeRequested:
			n, ok := freeName(e.Addr)
			if ok {
				fmt.Fprintf(bw, "del %s # %s\n", n, BytesU(e.Size))
			} else {
				fmt.Fprintf(bw, "del %s # %s, allocated before the trace began\n", n, BytesU(e.Size))
			}
		case snapshot.ActionFreeCompleted:
			n, _ := freeName(e.Addr)
			fmt.Fprintf(bw, "# free completed for %s %s\n", n, BytesU(e.Size))
			delete(allocName, e.Addr)
			delete(allocSize, e.Addr)
		case snapshot.ActionSegmentAlloc:
			n := namer.name()
			fmt.Fprintf(bw, "%s = cudaMalloc(%d, %s)\n", n, e.Addr, BytesU(e.Size))
			live = append(live, traceSegment{n, e.Addr, e.Size})
		case snapshot.ActionSegmentFree:
			if n, ok := removeLive(e.Addr, e.Size, true); ok {
				fmt.Fprintf(bw, "cudaFree(%s) # %s\n", n, BytesU(e.Size))
			} else {
				fmt.Fprintf(bw, "cudaFree(%d) # %s, allocated before the trace began\n", e.Addr, BytesU(e.Size))
			}
		case snapshot.ActionSegmentMap:
			n := namer.name()
			fmt.Fprintf(bw, "%s = cuMemMap(%d, %s) # expandable segment grows\n", n, e.Addr, BytesU(e.Size))
			live = append(live, traceSegment{n, e.Addr, e.Size})
		case snapshot.ActionSegmentUnmap:
			removeLive(e.Addr, e.Size, false)
			fmt.Fprintf(bw, "cuMemUnmap(%d, %s) # expandable segment shrinks\n", e.Addr, BytesU(e.Size))
		case snapshot.ActionSnapshot:
			fmt.Fprintf(bw, "# snapshot taken: %s active\n", BytesU(e.Size))
		case snapshot.ActionOOM:
			fmt.Fprintf(bw, "raise OutOfMemoryError # %s requested, %s free in CUDA\n", BytesU(e.Size), BytesU(e.Addr))
		default:
			fmt.Fprintf(bw, "# unknown action at %d, size %s\n", e.Addr, BytesU(e.Size))
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
		BytesU(allocated), plural(len(allocSize), "allocation"), BytesU(liveBytes))
}

// plural returns "1 thing" or "N things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}
