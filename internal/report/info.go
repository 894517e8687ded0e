package report

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// PeaksFunc returns the peaks of memory_viz's Active Memory Timeline and
// Active Cached Segment Timeline for one device (replay.Peaks).
type PeaksFunc func(s *snapshot.Snapshot, device int) (active, segments uint64)

// Info is everything "gpumem info" says about one snapshot. Its JSON form is
// the output of "gpumem info --json".
type Info struct {
	File         string `json:"file"`
	FileBytes    int64  `json:"file_bytes"`
	DecodedBytes int64  `json:"decoded_bytes"`
	Encoding     string `json:"encoding"`
	Compression  string `json:"compression"`
	Protocol     int    `json:"pickle_protocol"`
	Generation   string `json:"generation"`
	// Format describes the generation; PyTorch the versions that write it.
	Format  string `json:"format"`
	PyTorch string `json:"pytorch_version_hint"`
	// Profiler is set for a torch.profiler output (not a snapshot): what
	// it records and lacks.
	Profiler *ProfilerInfo `json:"profiler,omitempty"`

	Devices  []DeviceInfo `json:"devices"`
	Streams  []StreamInfo `json:"streams"`
	TimeSpan *TimeSpan    `json:"time_span"`

	AllocatorSettings *SettingsInfo  `json:"allocator_settings"`
	Annotations       AnnotationInfo `json:"annotations"`
	CompileContext    StringUse      `json:"compile_context"`
	UserMetadata      StringUse      `json:"user_metadata"`
	// UnknownKeys are top-level keys gpumem does not interpret.
	UnknownKeys []string `json:"unknown_keys"`

	Warnings []string `json:"warnings"`
}

// DeviceInfo describes one device's segments, blocks and trace.
type DeviceInfo struct {
	Device int `json:"device"`
	// Name is, for a torch.profiler output, "cuda:N", "cpu" or "exported
	// device" (omitted for a snapshot: always cuda:N).
	Name                     string `json:"name,omitempty"`
	ActiveTimelinePeakBytes  uint64 `json:"active_timeline_peak_bytes"`
	SegmentTimelinePeakBytes uint64 `json:"segment_timeline_peak_bytes"`
	// Fragmentation is the cache at dump time (the headline figure with
	// its parts; see gpumem peak).
	Fragmentation analysis.Fragmentation `json:"fragmentation"`

	Segments           int    `json:"segments"`
	ExpandableSegments int    `json:"expandable_segments"`
	Blocks             int    `json:"blocks"`
	ReservedBytes      uint64 `json:"reserved_bytes"`
	AllocatedBytes     uint64 `json:"allocated_bytes"`
	ActiveBytes        uint64 `json:"active_bytes"`
	RequestedBytes     uint64 `json:"requested_bytes"`
	// BlockStates counts blocks by state (active_allocated,
	// active_pending_free, inactive).
	BlockStates []StateCount `json:"block_states"`
	Pools       []PoolInfo   `json:"pools"`

	TraceEntries int           `json:"trace_entries"`
	Actions      []ActionCount `json:"trace_actions"`
	TimeSpan     *TimeSpan     `json:"time_span"`
	// PreTraceFrees counts blocks freed in the trace that were allocated
	// before it began; PreTraceSegmentFrees the same for segments.
	PreTraceFrees        int `json:"frees_of_pre_trace_blocks"`
	PreTraceSegmentFrees int `json:"frees_of_pre_trace_segments"`
	// EntriesWithStack counts trace entries that carry frames.
	EntriesWithStack int `json:"entries_with_stack"`

	// BeforeProfilingBytes (torch.profiler Kineto traces with Total
	// Allocated): memory allocated before profiling began and not freed
	// during it, included in the timeline. PeakTotalReservedBytes: the
	// largest Total Reserved.
	BeforeProfilingBytes   uint64 `json:"before_profiling_bytes,omitempty"`
	PeakTotalReservedBytes uint64 `json:"peak_total_reserved_bytes,omitempty"`

	noAllocStacks bool // the trace has allocations, none with a stack
}

// ProfilerInfo describes a torch.profiler output.
type ProfilerInfo struct {
	// Source names the format in a sentence.
	Source       string `json:"source"`
	HasAddresses bool   `json:"has_addresses"`
	HasTotals    bool   `json:"has_total_allocated"`
	Categories   bool   `json:"has_categories"`
	// Segments says why segment views are not available.
	Segments string `json:"segments"`
}

// StateCount is the number and total size of blocks in one state.
type StateCount struct {
	State  string `json:"state"`
	Blocks int    `json:"blocks"`
	Bytes  uint64 `json:"bytes"`
}

// PoolInfo summarizes the segments of one (pool id, small/large) pair.
type PoolInfo struct {
	PoolID         [2]int64 `json:"pool_id"`
	HasPoolID      bool     `json:"has_pool_id"`
	Type           string   `json:"type"`
	Segments       int      `json:"segments"`
	Blocks         int      `json:"blocks"`
	ReservedBytes  uint64   `json:"reserved_bytes"`
	AllocatedBytes uint64   `json:"allocated_bytes"`
	ActiveBytes    uint64   `json:"active_bytes"`
}

// ActionCount is how many trace entries have one action.
type ActionCount struct {
	Action string `json:"action"`
	Count  int    `json:"count"`
}

// TimeSpan is the first and last time_us of a trace (µs since the epoch).
type TimeSpan struct {
	FirstUS    int64 `json:"first_us"`
	LastUS     int64 `json:"last_us"`
	DurationUS int64 `json:"duration_us"`
}

// StreamInfo is one CUDA stream with its raw cudaStream_t value.
type StreamInfo struct {
	ID           int   `json:"id"`
	Raw          int64 `json:"raw"`
	Segments     int   `json:"segments"`
	TraceEntries int   `json:"trace_entries"`
}

// SettingsInfo is allocator_settings, raw and interpreted.
type SettingsInfo struct {
	Conf                       string           `json:"conf"`
	MaxSplitSize               int64            `json:"max_split_size"`
	GarbageCollectionThreshold float64          `json:"garbage_collection_threshold"`
	ExpandableSegments         bool             `json:"expandable_segments"`
	RoundupPower2Divisions     map[string]int64 `json:"roundup_power2_divisions"`
	Raw                        map[string]any   `json:"raw"`
	rawOrder                   []snapshot.KeyValue
	roundup                    []snapshot.RoundupDivision
}

// AnnotationInfo summarizes external_annotations.
type AnnotationInfo struct {
	Present  bool        `json:"present"`
	Count    int         `json:"count"`
	Starts   int         `json:"starts"`
	Ends     int         `json:"ends"`
	Distinct int         `json:"distinct_names"`
	Groups   []NameCount `json:"groups"`
}

// NameCount is a name (or a family of names, like "ProfilerStep#*") and
// how often it occurs.
type NameCount struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// StringUse summarizes a per-entry string (compile_context, user_metadata).
type StringUse struct {
	Entries  int         `json:"entries"`
	Distinct int         `json:"distinct"`
	Top      []NameCount `json:"top"`
}

type genInfo struct{ format, pytorch string }

var generations = map[snapshot.Generation]genInfo{
	snapshot.GenL:   {"bare list of segments (torch.cuda.memory_snapshot(); all 1.13 writes), no trace", "any version"},
	snapshot.GenD1:  {"dict; blocks carry history, no address", "2.0"},
	snapshot.GenD2:  {"dict; blocks with address and frames, trace without time_us", "2.1"},
	snapshot.GenD3:  {"dict; trace entries with time_us", "2.2-2.3"},
	snapshot.GenD23: {"dict; blocks with address and frames, empty trace", "2.1-2.3"},
	snapshot.GenD4:  {"dict with allocator_settings", "2.4"},
	snapshot.GenD5:  {"dict with external_annotations", "2.5+"},
	snapshot.GenD6:  {"dict; trace entries with compile_context", "2.6+"},
	snapshot.GenD7:  {"dict; trace entries with user_metadata", "2.8+"},
	// torch.profiler's outputs (snapshot/profiler.go), not snapshots.
	snapshot.GenKineto:      {"torch.profiler Kineto trace with profile_memory=True ([memory] events), not a snapshot", "1.8+"},
	snapshot.GenTimelineRaw: {"torch.profiler export_memory_timeline, raw form (.raw.json.gz: tensor events with categories), not a snapshot", "2.1+"},
	snapshot.GenTimeline:    {"torch.profiler export_memory_timeline, JSON form (.json: bytes per category per timestamp), not a snapshot", "2.1+"},
}

var numberSuffix = regexp.MustCompile(`[0-9]+$`)

// KeepDevice keeps only device dev's description (dev < 0: all).
func (in *Info) KeepDevice(dev int) {
	if dev >= 0 {
		in.Devices = slices.DeleteFunc(in.Devices, func(d DeviceInfo) bool { return d.Device != dev })
	}
}

// BuildInfo gathers Info for a snapshot; peaks may be nil, leaving the
// timeline peaks 0.
func BuildInfo(s *snapshot.Snapshot, peaks PeaksFunc) *Info {
	in := &Info{
		File:         s.Source.Name,
		FileBytes:    s.Source.FileSize,
		DecodedBytes: s.Source.Size,
		Encoding:     s.Source.Encoding,
		Compression:  s.Source.Compression,
		Protocol:     s.Source.Protocol,
		Generation:   string(s.Source.Generation),
		Warnings:     []string{},
		UnknownKeys:  []string{},
		Streams:      []StreamInfo{},
	}
	if g, ok := generations[s.Source.Generation]; ok {
		in.Format, in.PyTorch = g.format, g.pytorch
	} else {
		in.Format, in.PyTorch = "unknown", "unknown"
	}
	for _, kv := range s.Extra {
		in.UnknownKeys = append(in.UnknownKeys, kv.Key)
	}

	streamSegs := make([]int, len(s.Streams))
	streamEvents := make([]int, len(s.Streams))
	countStream := func(counts []int, id snapshot.StreamID) {
		if id >= 0 && int(id) < len(counts) {
			counts[id]++
		}
	}

	var peakErrs []string
	compile := map[string]int{}
	meta := map[string]int{}
	devices := s.Devices()
	// The timeline peaks (a replay of each trace) are half of info's work
	// after the decode; they run on the second core while the rest of
	// the description is gathered below.
	peaksAt := startPeaks(peaks, s, devices)
	for di0, d := range devices {
		di := DeviceInfo{Device: d, BlockStates: []StateCount{}, Pools: []PoolInfo{}, Actions: []ActionCount{}}
		di.Fragmentation = analysis.DumpFragmentation(s, d)
		states := [3]StateCount{
			{State: snapshot.BlockActiveAllocated.String()},
			{State: snapshot.BlockActivePendingFree.String()},
			{State: snapshot.BlockInactive.String()},
		}
		pools := map[poolKey]*PoolInfo{}
		for i := range s.Segments {
			seg := &s.Segments[i]
			if int(seg.Device) != d {
				continue
			}
			countStream(streamSegs, seg.Stream)
			di.Segments++
			if seg.IsExpandable {
				di.ExpandableSegments++
			}
			key := poolKey{seg.PoolID, seg.HasPoolID, seg.Large}
			p := pools[key]
			if p == nil {
				p = &PoolInfo{PoolID: seg.PoolID, HasPoolID: seg.HasPoolID, Type: "small"}
				if seg.Large {
					p.Type = "large"
				}
				pools[key] = p
			}
			p.Segments++
			p.ReservedBytes += seg.TotalSize
			di.ReservedBytes += seg.TotalSize
			blocks := s.SegmentBlocks(i)
			p.Blocks += len(blocks)
			di.Blocks += len(blocks)
			for k := range blocks {
				b := &blocks[k]
				var st *StateCount
				switch b.State {
				case snapshot.BlockActiveAllocated:
					st = &states[0]
					di.AllocatedBytes += b.Size
					p.AllocatedBytes += b.Size
				case snapshot.BlockActivePendingFree:
					st = &states[1]
				default:
					st = &states[2]
				}
				if b.State != snapshot.BlockInactive {
					di.ActiveBytes += b.Size
					p.ActiveBytes += b.Size
					di.RequestedBytes += s.Requested(b)
				}
				st.Blocks++
				st.Bytes += b.Size
			}
		}
		di.BlockStates = states[:]
		for _, p := range pools {
			di.Pools = append(di.Pools, *p)
		}
		sort.Slice(di.Pools, func(a, b int) bool {
			pa, pb := di.Pools[a], di.Pools[b]
			if pa.PoolID != pb.PoolID {
				if pa.PoolID[0] != pb.PoolID[0] {
					return pa.PoolID[0] < pb.PoolID[0]
				}
				return pa.PoolID[1] < pb.PoolID[1]
			}
			return pa.Type > pb.Type // small before large, as PyTorch lists pools
		})

		if d < len(s.Traces) {
			events := s.Traces[d].Events
			di.TraceEntries = len(events)
			var counts [snapshot.ActionFree + 1]int
			var first, last int64
			haveTime := false
			allocs, allocsWithStack := 0, 0
			metas := s.Traces[d].Metas()
			for i := range events {
				e := &events[i]
				if int(e.Action) < len(counts) {
					counts[e.Action]++
				}
				countStream(streamEvents, e.Stream)
				if e.Flags&snapshot.FlagHasTime != 0 {
					if !haveTime {
						first = e.TimeUS
						haveTime = true
					}
					last = e.TimeUS
				}
				if e.Stack != snapshot.NoStack {
					di.EntriesWithStack++
				}
				if e.Action == snapshot.ActionAlloc || e.Action == snapshot.ActionSegmentAlloc {
					allocs++
					if e.Stack != snapshot.NoStack {
						allocsWithStack++
					}
				}
				em := s.Meta(metas.At(i))
				if c := s.Text(em.CompileContext); c != "" && c != "N/A" {
					compile[c]++
				}
				if m := s.Text(em.UserMetadata); m != "" {
					meta[m]++
				}
			}
			for a := snapshot.ActionAlloc; a <= snapshot.ActionOOM; a++ {
				if counts[a] > 0 {
					di.Actions = append(di.Actions, ActionCount{a.String(), counts[a]})
				}
			}
			if counts[snapshot.ActionUnknown] > 0 {
				di.Actions = append(di.Actions, ActionCount{"unknown", counts[snapshot.ActionUnknown]})
			}
			if haveTime {
				di.TimeSpan = &TimeSpan{first, last, last - first}
				if in.TimeSpan == nil {
					in.TimeSpan = &TimeSpan{first, last, 0}
				}
				in.TimeSpan.FirstUS = min(in.TimeSpan.FirstUS, first)
				in.TimeSpan.LastUS = max(in.TimeSpan.LastUS, last)
				in.TimeSpan.DurationUS = in.TimeSpan.LastUS - in.TimeSpan.FirstUS
			}
			di.PreTraceFrees, di.PreTraceSegmentFrees = replay.PreTraceFrees(events)
			di.noAllocStacks = allocs > 0 && allocsWithStack == 0
		}
		if s.Profiler != nil {
			di.Name = s.DeviceName(d)
		}
		if p := s.Profiler; p != nil && d < len(p.BeforeBytes) && d < len(p.PeakReservedBytes) {
			di.BeforeProfilingBytes, di.PeakTotalReservedBytes = p.BeforeBytes[d], p.PeakReservedBytes[d]
		}
		if peaks != nil {
			p := peaksAt(di0)
			di.ActiveTimelinePeakBytes, di.SegmentTimelinePeakBytes = p.active, p.segments
			if p.err != nil {
				peakErrs = append(peakErrs, fmt.Sprintf("device %d: timeline peaks unavailable: %v", d, p.err))
			}
		}
		in.Devices = append(in.Devices, di)
	}
	if p := s.Profiler; p != nil {
		in.Profiler = &ProfilerInfo{Source: snapshot.ProfilerFormatName(s.Source.Generation), HasAddresses: p.HasAddresses,
			HasTotals: p.HasTotals, Categories: p.Categories, Segments: s.Unavailable("segments")}
	}
	if in.Devices == nil {
		in.Devices = []DeviceInfo{}
	}
	for id, raw := range s.Streams {
		in.Streams = append(in.Streams, StreamInfo{ID: id, Raw: raw, Segments: streamSegs[id], TraceEntries: streamEvents[id]})
	}
	in.CompileContext = stringUse(compile)
	in.UserMetadata = stringUse(meta)

	if as := s.AllocatorSettings; as != nil {
		si := &SettingsInfo{
			Conf:                       as.Conf,
			MaxSplitSize:               as.MaxSplitSize,
			GarbageCollectionThreshold: as.GarbageCollectionThreshold,
			ExpandableSegments:         as.ExpandableSegments,
			RoundupPower2Divisions:     map[string]int64{},
			Raw:                        map[string]any{},
			rawOrder:                   as.Raw,
			roundup:                    as.RoundupPower2Divisions,
		}
		for _, r := range as.RoundupPower2Divisions {
			si.RoundupPower2Divisions[r.IntervalMiB] = r.Divisions
		}
		for _, kv := range as.Raw {
			if json.Valid([]byte(kv.JSON)) {
				si.Raw[kv.Key] = json.RawMessage(kv.JSON)
			} else {
				si.Raw[kv.Key] = kv.JSON // never break --json over one value
			}
		}
		in.AllocatorSettings = si
	}

	in.Annotations = annotationInfo(s)
	in.Warnings = append(warnings(s, in), peakErrs...)
	return in
}

// devicePeaks is what callPeaks found for one device.
type devicePeaks struct {
	active, segments uint64
	err              error
}

// startPeaks computes the peaks of every device (peaks may be nil) and
// returns what waits for device k's (k indexes devices). They are
// computed on another goroutine, one device after another, when the
// snapshot's traces carry their Viz indices (as every decoded snapshot
// does): a replay of a trace without them writes its merged frees'
// flags, which the caller reads meanwhile; then here, when asked.
func startPeaks(peaks PeaksFunc, s *snapshot.Snapshot, devices []int) func(k int) devicePeaks {
	out := make([]devicePeaks, len(devices))
	if peaks == nil {
		return func(int) devicePeaks { return devicePeaks{} }
	}
	for i := range s.Traces {
		if tr := &s.Traces[i]; len(tr.Viz) == 0 && len(tr.Events) > 0 {
			return func(k int) devicePeaks {
				var p devicePeaks
				p.active, p.segments, p.err = callPeaks(peaks, s, devices[k])
				return p
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k, d := range devices {
			out[k].active, out[k].segments, out[k].err = callPeaks(peaks, s, d)
		}
	}()
	return func(k int) devicePeaks {
		<-done
		return out[k]
	}
}

// callPeaks runs peaks, turning a panic on a malformed snapshot into an
// error so that info still prints everything else.
func callPeaks(peaks PeaksFunc, s *snapshot.Snapshot, d int) (active, segments uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	active, segments = peaks(s, d)
	return active, segments, nil
}

type poolKey struct {
	id    [2]int64
	has   bool
	large bool
}

func stringUse(m map[string]int) StringUse {
	u := StringUse{Distinct: len(m), Top: topCounts(m, 5)}
	for _, n := range m {
		u.Entries += n
	}
	return u
}

// topCounts returns the n most frequent names, most frequent first.
func topCounts(m map[string]int, n int) []NameCount {
	out := make([]NameCount, 0, len(m))
	for k, v := range m {
		out = append(out, NameCount{k, v})
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Count != out[b].Count {
			return out[a].Count > out[b].Count
		}
		return out[a].Name < out[b].Name
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func annotationInfo(s *snapshot.Snapshot) AnnotationInfo {
	ai := AnnotationInfo{Present: s.HasAnnotationsKey, Count: len(s.Annotations), Groups: []NameCount{}}
	names := map[string]bool{}
	groups := map[string]int{}
	for _, a := range s.Annotations {
		switch a.Stage {
		case "START":
			ai.Starts++
		case "END":
			ai.Ends++
		}
		names[a.Name] = true
	}
	for _, a := range s.Annotations {
		if a.Stage == "END" && ai.Starts > 0 {
			continue // count each range once
		}
		// ProfilerStep#12 and ProfilerStep#13 are one family.
		g := a.Name
		if strings.Contains(g, "#") {
			g = numberSuffix.ReplaceAllString(g, "*")
		}
		groups[g]++
	}
	ai.Distinct = len(names)
	ai.Groups = topCounts(groups, 8)
	return ai
}

// roundEntryCounts are trace lengths that look like a max_entries setting.
func looksLikeLimit(n int) bool {
	if n < 1000 {
		return false
	}
	if n%1000 == 0 {
		return true
	}
	return n&(n-1) == 0
}

func warnings(s *snapshot.Snapshot, in *Info) []string {
	w := []string{}
	if p := s.Profiler; p != nil {
		// Not a snapshot: what the format lacks is the news, not what a
		// snapshot's trace would say about itself.
		return append(w, p.Notes...)
	}
	if s.Traces == nil {
		return append(w, "no trace: the file is a bare list of segments (torch.cuda.memory_snapshot()); timelines are not available")
	}
	total := 0
	for _, d := range in.Devices {
		total += d.TraceEntries
	}
	if total == 0 {
		return append(w, "empty trace: memory history was not recorded (torch.cuda.memory._record_memory_history was not enabled, or was enabled with enabled='state'); only the dump-time state is available")
	}
	for _, d := range in.Devices {
		if d.TraceEntries == 0 {
			continue
		}
		if d.PreTraceFrees > 0 {
			w = append(w, fmt.Sprintf("device %d: %s of blocks allocated before the trace started (ring buffer max_entries or recording started late); the timeline starts mid-run", d.Device, plural(d.PreTraceFrees, "free")))
		}
		if d.PreTraceSegmentFrees > 0 {
			w = append(w, fmt.Sprintf("device %d: %d cudaFree of segments allocated before the trace started", d.Device, d.PreTraceSegmentFrees))
		}
		if looksLikeLimit(d.TraceEntries) && d.PreTraceFrees > 0 {
			w = append(w, fmt.Sprintf("device %d: the trace has exactly %d entries, which looks like a max_entries limit: older entries were dropped", d.Device, d.TraceEntries))
		}
		if d.noAllocStacks {
			w = append(w, fmt.Sprintf("device %d: no alloc entry of the trace has a stack (recorded with context=None or context=state, or by PyTorch 2.0 without trace_alloc_record_context); allocations cannot be attributed to code", d.Device))
		}
		for _, a := range d.Actions {
			if a.Action == "oom" {
				w = append(w, fmt.Sprintf("device %d: %d out-of-memory (oom) events in the trace", d.Device, a.Count))
			}
		}
	}
	return w
}

// FormatTimeUS formats a time_us value as a UTC timestamp with µs.
func FormatTimeUS(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05.000000 UTC")
}

// FormatDurationUS formats a span of microseconds as seconds.
func FormatDurationUS(us int64) string {
	return fmt.Sprintf("%.6f s", float64(us)/1e6)
}
