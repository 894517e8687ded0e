package report

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/units"
)

// WriteInfo writes the text form of "gpumem info".
func WriteInfo(w io.Writer, in *Info) error {
	bw := bufio.NewWriter(w)
	kv := func(k, format string, args ...any) {
		fmt.Fprintf(bw, "%-18s %s\n", k, fmt.Sprintf(format, args...))
	}
	kv("file", "%s", in.File)
	enc := in.Encoding
	if enc == "pickle" {
		enc = "pickle protocol " + strconv.Itoa(in.Protocol)
	}
	if in.Compression != "" {
		enc += ", " + in.Compression + "-compressed (" + units.PythonBytes(uint64(in.DecodedBytes)) + " decompressed)"
	}
	kv("size", "%s, %s", units.PythonBytes(uint64(max(in.FileBytes, 0))), enc)
	kv("format", "%s: %s (written by PyTorch %s)", in.Generation, in.Format, in.PyTorch)
	if p := in.Profiler; p != nil {
		kv("source", "%s", p.Source)
	}
	devs := make([]string, len(in.Devices))
	for i, d := range in.Devices {
		devs[i] = d.Name
		if devs[i] == "" {
			devs[i] = "cuda:" + strconv.Itoa(d.Device)
		}
	}
	kv("devices", "%s", strings.TrimSpace(strconv.Itoa(len(in.Devices))+" "+strings.Join(devs, " ")))
	if in.TimeSpan != nil {
		kv("time span", "%s .. %s (%s)", FormatTimeUS(in.TimeSpan.FirstUS), FormatTimeUS(in.TimeSpan.LastUS), FormatDurationUS(in.TimeSpan.DurationUS))
	}
	var streams []string
	for _, st := range in.Streams {
		desc := strconv.FormatInt(st.Raw, 10)
		if st.Raw == 0 {
			desc += " (default)"
		} else {
			desc += fmt.Sprintf(" (%#x)", uint64(st.Raw))
		}
		streams = append(streams, fmt.Sprintf("%s: %d segments, %d entries", desc, st.Segments, st.TraceEntries))
	}
	if len(streams) == 0 {
		kv("streams", "none")
	}
	for i, st := range streams {
		k := ""
		if i == 0 {
			k = "streams"
		}
		kv(k, "%s", st)
	}

	for _, d := range in.Devices {
		if in.Profiler != nil {
			writeProfilerDevice(bw, kv, in.Profiler, &d)
			continue
		}
		fmt.Fprintf(bw, "\ndevice %d\n", d.Device)
		kv("  peak active", "%s  (memory_viz Active Memory Timeline)", units.PythonBytes(d.ActiveTimelinePeakBytes))
		kv("  peak reserved", "%s  (memory_viz Active Cached Segment Timeline)", units.PythonBytes(d.SegmentTimelinePeakBytes))
		segs := fmt.Sprintf("%d", d.Segments)
		if d.ExpandableSegments > 0 {
			segs += fmt.Sprintf(" (%d expandable)", d.ExpandableSegments)
		}
		kv("  segments", "%s, %d blocks", segs, d.Blocks)
		kv("  reserved", "%s", units.PythonBytes(d.ReservedBytes))
		kv("  allocated", "%s", units.PythonBytes(d.AllocatedBytes))
		kv("  active", "%s", units.PythonBytes(d.ActiveBytes))
		kv("  requested", "%s", units.PythonBytes(d.RequestedBytes))
		if f := &d.Fragmentation; d.Segments > 0 {
			kv("  fragmentation", "%.3f  (1 − largest free block %s / free cached %s)", f.Headline, units.Human(f.LargestFreeBlock), units.Human(f.Free))
		}
		if d.Blocks > 0 {
			rows := [][]string{{"state", "blocks", "size", "bytes"}}
			for _, st := range d.BlockStates {
				rows = append(rows, []string{st.State, strconv.Itoa(st.Blocks), units.PythonU(st.Bytes), strconv.FormatUint(st.Bytes, 10)})
			}
			writeTable(bw, "    ", "lrrr", rows)
		}
		if len(d.Pools) > 0 {
			rows := [][]string{{"pool", "type", "segments", "blocks", "reserved", "allocated", "active"}}
			for _, p := range d.Pools {
				id := "-"
				if p.HasPoolID {
					id = fmt.Sprintf("(%d,%d)", p.PoolID[0], p.PoolID[1])
				}
				rows = append(rows, []string{id, p.Type, strconv.Itoa(p.Segments), strconv.Itoa(p.Blocks),
					units.PythonU(p.ReservedBytes), units.PythonU(p.AllocatedBytes), units.PythonU(p.ActiveBytes)})
			}
			writeTable(bw, "    ", "llrrrrr", rows)
		}
		trace := plural(d.TraceEntries, "entry")
		if in.Generation == "L" {
			trace = "none (this format has no trace)"
		} else if d.TraceEntries > 0 {
			trace += fmt.Sprintf(", %d with a stack", d.EntriesWithStack)
		}
		kv("  trace", "%s", trace)
		writeTraceSpan(bw, kv, &d)
	}

	bw.WriteString("\n")
	if in.Profiler != nil {
		// A profiler output has no allocator settings, compile context or
		// user metadata to report as missing.
		writeAnnotations(kv, in.Annotations, "none")
		writeWarnings(bw, in.Warnings)
		return bw.Flush()
	}
	if as := in.AllocatorSettings; as != nil {
		bw.WriteString("allocator settings\n")
		conf := as.Conf
		if conf == "" {
			conf = "(empty: defaults)"
		} else {
			conf = strconv.Quote(conf)
		}
		kv("  conf", "%s", conf)
		if as.MaxSplitSize < 0 {
			kv("  max_split_size", "unlimited")
		} else {
			kv("  max_split_size", "%s", units.PythonBytes(uint64(as.MaxSplitSize)))
		}
		kv("  expandable", "%t", as.ExpandableSegments)
		if as.GarbageCollectionThreshold == 0 {
			kv("  gc threshold", "0 (off)")
		} else {
			kv("  gc threshold", "%g", as.GarbageCollectionThreshold)
		}
		var rd []string
		for _, r := range as.roundup {
			if r.Divisions != 0 {
				rd = append(rd, fmt.Sprintf("%sMiB:%d", r.IntervalMiB, r.Divisions))
			}
		}
		if len(rd) == 0 {
			kv("  roundup_power2", "none (round to 512 bytes)")
		} else {
			kv("  roundup_power2", "%s", strings.Join(rd, " "))
		}
		first := true
		for _, r := range as.rawOrder {
			switch r.Key {
			case "PYTORCH_CUDA_ALLOC_CONF", "max_split_size", "garbage_collection_threshold", "expandable_segments", "roundup_power2_divisions":
				continue
			}
			k := ""
			if first {
				k, first = "  other", false
			}
			kv(k, "%s=%s", r.Key, r.JSON)
		}
	} else {
		kv("allocator settings", "not recorded (PyTorch before 2.4)")
	}

	writeAnnotations(kv, in.Annotations, "not recorded (PyTorch before 2.5)")
	writeUse := func(k string, u StringUse) {
		if u.Entries == 0 {
			kv(k, "none")
			return
		}
		var top []string
		for _, t := range u.Top {
			top = append(top, fmt.Sprintf("%q x%d", t.Name, t.Count))
		}
		kv(k, "%d entries, %d distinct: %s", u.Entries, u.Distinct, strings.Join(top, ", "))
	}
	writeUse("compile context", in.CompileContext)
	writeUse("user metadata", in.UserMetadata)
	if len(in.UnknownKeys) > 0 {
		kv("unknown keys", "%s", strings.Join(in.UnknownKeys, ", "))
	}

	writeWarnings(bw, in.Warnings)
	return bw.Flush()
}

func writeWarnings(bw *bufio.Writer, ws []string) {
	if len(ws) > 0 {
		bw.WriteString("\nwarnings\n")
		for _, w := range ws {
			fmt.Fprintf(bw, "  - %s\n", w)
		}
	}
}

// writeAnnotations writes the annotations line; absent is what to say
// when the file has no annotations key.
func writeAnnotations(kv func(k, format string, args ...any), an AnnotationInfo, absent string) {
	switch {
	case !an.Present:
		kv("annotations", "%s", absent)
	case an.Count == 0:
		kv("annotations", "none")
	default:
		var groups []string
		for _, g := range an.Groups {
			groups = append(groups, fmt.Sprintf("%s x%d", g.Name, g.Count))
		}
		kv("annotations", "%d (%d START, %d END), %d distinct names", an.Count, an.Starts, an.Ends, an.Distinct)
		if len(groups) > 0 {
			kv("", "%s", strings.Join(groups, ", "))
		}
	}
}

// writeTraceSpan writes a device's trace time and its entries by action.
func writeTraceSpan(bw *bufio.Writer, kv func(k, format string, args ...any), d *DeviceInfo) {
	if d.TimeSpan != nil {
		kv("  trace time", "%s .. %s (%s)", FormatTimeUS(d.TimeSpan.FirstUS), FormatTimeUS(d.TimeSpan.LastUS), FormatDurationUS(d.TimeSpan.DurationUS))
	}
	if len(d.Actions) > 0 {
		var rows [][]string
		for _, a := range d.Actions {
			rows = append(rows, []string{a.Action, strconv.Itoa(a.Count)})
		}
		writeTable(bw, "    ", "lr", rows)
	}
}

// writeProfilerDevice writes one device of a torch.profiler output: its
// peak and trace; it has no segments or blocks to list.
func writeProfilerDevice(bw *bufio.Writer, kv func(k, format string, args ...any), p *ProfilerInfo, d *DeviceInfo) {
	fmt.Fprintf(bw, "\ndevice %d (%s)\n", d.Device, d.Name)
	kv("  peak allocated", "%s  (Active Memory Timeline)", units.PythonBytes(d.ActiveTimelinePeakBytes))
	if d.BeforeProfilingBytes > 0 {
		kv("  before profiling", "%s  (allocated before profiling began, from Total Allocated; included above)", units.PythonBytes(d.BeforeProfilingBytes))
	}
	if d.PeakTotalReservedBytes > 0 {
		kv("  peak reserved", "%s  (largest Total Reserved)", units.PythonBytes(d.PeakTotalReservedBytes))
	} else {
		kv("  peak reserved", "not recorded")
	}
	kv("  segments", "none recorded")
	kv("  trace", "%s, %d with a stack", plural(d.TraceEntries, "entry"), d.EntriesWithStack)
	writeTraceSpan(bw, kv, d)
}

// writeTable writes rows as aligned columns two spaces apart; align has one
// letter per column, 'l' for left and 'r' for right.
func writeTable(w *bufio.Writer, indent, align string, rows [][]string) {
	widths := make([]int, len(align))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	for _, r := range rows {
		line := indent
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-len(c))
			if i > 0 {
				line += "  "
			}
			if align[i] == 'r' {
				line += pad + c
			} else if i < len(r)-1 {
				line += c + pad
			} else {
				line += c
			}
		}
		w.WriteString(line + "\n")
	}
}
