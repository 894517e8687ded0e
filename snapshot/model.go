// Package snapshot is the typed, compact model of a PyTorch CUDA memory
// snapshot and the code that decodes every generation of it.
//
// A Snapshot holds what torch.cuda.memory._snapshot() returned: the
// allocator's segments and blocks at dump time, the per-device trace of
// allocator events, and the optional settings, annotations and metadata that
// newer PyTorch versions add. Frames and stacks are interned once (like
// pprof's Location table) so that millions of events stay small.
//
// The model keeps every raw value from the file. memory_viz's annotation
// (stream renaming, address versions, merging of free_requested and
// free_completed pairs) is computed once at load and stored beside the raw
// values, never in place of them.
//
// A trace entry is an Event of 32 bytes (address, size, time, stack,
// stream, action, flags). What only some readers need is kept in columns
// of its Trace, read by the entry's index: its address version
// (Trace.Version; none when the decode left the versions out,
// Options.NoVersions) and its compile context, user metadata and
// unknown keys (Snapshot.EventMeta; Trace.Metas reads them in order), held
// as runs of entries that share them (Trace.MetaRuns).
package snapshot

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/rules"
)

// Action is what a trace entry records, as PyTorch's "action" string.
type Action uint8

// The trace actions PyTorch writes, in the order of the allocator's enum.
const (
	ActionUnknown Action = iota
	ActionAlloc
	ActionFreeRequested
	ActionFreeCompleted
	ActionSegmentAlloc
	ActionSegmentFree
	ActionSegmentMap
	ActionSegmentUnmap
	ActionSnapshot
	ActionOOM
	// ActionFree is memory_viz's name for a free_requested immediately
	// followed by the free_completed of the same address. It never appears in
	// Event.Action; Trace.Viz reports it for merged pairs.
	ActionFree
)

var actionNames = [...]string{
	ActionUnknown:       "unknown",
	ActionAlloc:         "alloc",
	ActionFreeRequested: "free_requested",
	ActionFreeCompleted: "free_completed",
	ActionSegmentAlloc:  "segment_alloc",
	ActionSegmentFree:   "segment_free",
	ActionSegmentMap:    "segment_map",
	ActionSegmentUnmap:  "segment_unmap",
	ActionSnapshot:      "snapshot",
	ActionOOM:           "oom",
	ActionFree:          "free",
}

// String returns PyTorch's spelling of the action.
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "unknown"
}

// ParseAction maps PyTorch's action string to an Action (ActionUnknown if
// the string is not one PyTorch writes).
func ParseAction(s string) Action {
	for i, n := range actionNames {
		if n == s && Action(i) != ActionFree && Action(i) != ActionUnknown {
			return Action(i)
		}
	}
	return ActionUnknown
}

// IsSegmentAction reports whether the action's address names a segment
// (memory_viz prints those as s'addr_version).
func (a Action) IsSegmentAction() bool {
	return a >= ActionSegmentAlloc && a <= ActionSegmentUnmap
}

// StackID indexes Snapshot.Stacks. NoStack (0) is the empty stack.
type StackID int32

// NoStack is the stack of an entry recorded without frames.
const NoStack StackID = 0

// FrameID indexes Snapshot.Frames.
type FrameID int32

// StreamID is memory_viz's name for a CUDA stream: raw stream 0 is 0, other
// raw cudaStream_t values are numbered 1, 2, ... in first-seen order (device
// traces 0..n first, then segments). Snapshot.Streams maps it back to the raw
// value. It is 16 bits to keep Event at 32 bytes; decoding fails on a
// snapshot with more than MaxStreams streams.
type StreamID int16

// MaxStreams is the most distinct streams a Snapshot can hold.
const MaxStreams = 1<<15 - 1

// StringID indexes Snapshot.Strings. 0 is the empty string / absent value.
type StringID int32

// ExtraID indexes Snapshot.Extras. 0 means none.
type ExtraID int32

// Generation names the snapshot format generation, as in SOURCES.md.
type Generation string

// The format generations PyTorch has written.
const (
	GenL   Generation = "L"    // bare list of segments (torch.cuda.memory_snapshot(), 1.13)
	GenD1  Generation = "D1"   // dict; blocks carry history, no address (2.0)
	GenD2  Generation = "D2"   // blocks with address and frames, no time_us (2.1)
	GenD3  Generation = "D3"   // + time_us on trace entries (2.2-2.3)
	GenD23 Generation = "D2/3" // D2 or D3 with an empty trace
	GenD4  Generation = "D4"   // + allocator_settings (2.4)
	GenD5  Generation = "D5"   // + external_annotations (2.5+)
	GenD6  Generation = "D6"   // + compile_context (2.6+)
	GenD7  Generation = "D7"   // + user_metadata (2.8+)
)

// Snapshot is one decoded memory snapshot.
type Snapshot struct {
	Source Source

	// Segments of every device, in file order (PyTorch writes each device's
	// segments sorted by address).
	Segments []Segment
	// Blocks of all segments; Segment.FirstBlock/NumBlocks slice it.
	Blocks []Block
	// History holds the legacy (1.13/2.0) per-block history items;
	// Block.FirstHistory/NumHistory slice it.
	History []HistoryItem

	// Traces is device_traces: index = device ordinal. Nil for generation L
	// (no device_traces key); an empty Trace for a device with no entries.
	Traces []Trace

	Frames  []Frame
	Stacks  StackTable
	Strings []string    // Strings[0] == ""
	Streams []int64     // StreamID -> raw cudaStream_t value; Streams[0] == 0
	Extras  []KeyValues // ExtraID -> unknown keys kept verbatim; Extras[0] is nil
	// Metas holds the trace entries' EventMeta (MetaID ->); Metas[0] is
	// the zero EventMeta.
	Metas []EventMeta

	// AllocatorSettings is nil when the snapshot has none (before 2.4).
	AllocatorSettings *AllocatorSettings
	// Annotations is external_annotations (2.5+), e.g. ProfilerStep#N ranges.
	Annotations []Annotation
	// HasAnnotationsKey tells an empty external_annotations list from none.
	HasAnnotationsKey bool

	// Extra holds top-level keys this version of gpumem does not know.
	Extra KeyValues

	// Profiler is set when the file is a torch.profiler output, not a
	// snapshot (profiler.go).
	Profiler *Profiler

	// pending is what the decode's versioner counted, until annotate
	// takes it (nil once a decode returns).
	pending *versionState
	// AddMeta's index of Metas and the id it returned last.
	metaIndex map[EventMeta]MetaID
	metaLast  MetaID
	// timed: the pickle decoder saw every trace entry's time_us
	// (TraceTimed).
	timed bool
}

// Source describes the file a snapshot came from.
type Source struct {
	Name        string     // file name as given ("-" for stdin, "demo" for the demo)
	Size        int64      // bytes read (after decompression)
	FileSize    int64      // bytes on disk (before decompression)
	Encoding    string     // "pickle" or "json"
	Compression string     // "", "gzip" or "zstd"
	Protocol    int        // pickle protocol (0-5); 0 for JSON
	Generation  Generation // format generation
}

// Segment is one cudaMalloc (or one contiguous mapped range of an
// expandable segment) at dump time.
type Segment struct {
	// The fields are in order of size, so that a Segment is 88 bytes,
	// not 96 (a 1 GB tiled snapshot holds 760,000).
	Address       uint64
	TotalSize     uint64
	AllocatedSize uint64 // sum of sizes of active_allocated blocks
	ActiveSize    uint64 // sum of sizes of active blocks
	RequestedSize uint64 // sum of requested sizes of active blocks
	PoolID        [2]int64
	Device        int32
	Stack         StackID
	// Version is memory_viz's segment address version at dump time.
	Version      int32
	FirstBlock   int32
	NumBlocks    int32
	Extra        ExtraID
	Stream       StreamID
	Large        bool // segment_type == "large"
	HasPoolID    bool // false when the file has no segment_pool_id (before 2.1)
	IsExpandable bool
}

// BlockState is a block's allocation state.
type BlockState uint8

// Block states as PyTorch writes them.
const (
	BlockInactive BlockState = iota
	BlockActiveAllocated
	BlockActivePendingFree
)

// String returns PyTorch's spelling of the state.
func (s BlockState) String() string {
	switch s {
	case BlockActiveAllocated:
		return "active_allocated"
	case BlockActivePendingFree:
		return "active_pending_free"
	}
	return "inactive"
}

// Block is a contiguous sub-range of a segment.
type Block struct {
	// The fields are in order of size, so that a Block is 56 bytes, not
	// 64 (a 1 GB tiled snapshot holds 1.3 million).

	// Addr is the block's address computed as memory_viz does, by
	// accumulating sizes from the segment's address.
	Addr uint64
	// RawAddress is the file's "address" key (2.1+); HasAddress says whether
	// it was present.
	RawAddress    uint64
	Size          uint64
	RequestedSize uint64 // as in the file (stale for inactive blocks)
	Stack         StackID
	// Version is memory_viz's block address version at dump time.
	Version      int32
	FirstHistory int32
	NumHistory   int32
	Extra        ExtraID
	HasAddress   bool
	// HasRequestedSize is false for legacy blocks without requested_size.
	HasRequestedSize bool
	State            BlockState
}

// HistoryItem is one legacy block history record {addr, real_size, frames}.
type HistoryItem struct {
	Addr     uint64
	RealSize uint64
	Stack    StackID
	HasStack bool
}

// Trace is one device's trace, oldest entry first.
type Trace struct {
	Events []Event
	// Viz lists, in memory_viz's order, the raw indices of the events of
	// memory_viz's annotated trace: a free_requested that memory_viz merges
	// with the next free_completed appears once (with FlagMergedFree set on
	// it) and the free_completed is skipped. Viz positions are memory_viz's
	// event idx.
	Viz []int32
	// versions holds memory_viz's address version of each event
	// (Version). It is a column beside Events, not a field of Event, so
	// that an Event is 32 bytes (15 million of them in a 1 GB snapshot),
	// and only the viewer reads it. Empty when the versions were not
	// computed (Options.NoVersions; Snapshot.Annotate computes them) or
	// the trace is empty.
	versions versionColumn
	// MetaRuns holds each event's MetaID (Snapshot.EventMeta) as runs of
	// entries that share it, which they do for long stretches (the
	// compile_context "N/A" of every entry of most files): MetaRuns[k]
	// gives its Meta to the events from its First up to the next run's
	// First (the last run's, to the end); events before the first run
	// have none (0). The runs are in order of First, each Meta differs
	// from the run's before, and the first is not 0; nil when no entry
	// has any. MetaID and Metas read it, SetMetas makes it.
	MetaRuns []MetaRun
}

// Version returns memory_viz's address version of event i: a block
// version for alloc and free events, a segment version for segment
// events, 0 for the others, and 0 when the versions were not computed.
func (t *Trace) Version(i int) int32 { return t.versions.at(i) }

// HasVersions reports whether the trace's address versions were computed
// (false for an empty trace).
func (t *Trace) HasVersions() bool { return t.versions.len() > 0 }

// SetVersions sets the events' address versions, v[i] being Events[i]'s
// (a model built in code; Snapshot.Annotate computes them); nil or empty
// takes them out.
func (t *Trace) SetVersions(v []int32) {
	t.versions = makeVersionColumn(len(v))
	for i, x := range v {
		t.versions.set(i, x)
	}
}

// MetaRun is a run of a trace's events that share a MetaID
// (Trace.MetaRuns).
type MetaRun struct {
	First int32 // the index of its first event
	Meta  MetaID
}

// MetaID returns event i's MetaID, searching the runs (Metas reads the
// events in order in constant time each).
func (t *Trace) MetaID(i int) MetaID { return metaAt(t.MetaRuns, i) }

// metaAt returns the MetaID runs give event i.
func metaAt(runs []MetaRun, i int) MetaID {
	k := sort.Search(len(runs), func(k int) bool { return int(runs[k].First) > i })
	if k == 0 {
		return 0
	}
	return runs[k-1].Meta
}

// Metas returns a cursor over the MetaIDs of the trace's events.
func (t *Trace) Metas() MetaCursor { return MetaCursor{runs: t.MetaRuns} }

// MetaCursor reads the MetaIDs of a trace's events: At in order of
// event index takes constant time each (a step back searches).
type MetaCursor struct {
	runs []MetaRun
	k    int // runs[:k] start at or before the event last read
}

// At returns event i's MetaID.
func (c *MetaCursor) At(i int) MetaID {
	if c.k > 0 && int(c.runs[c.k-1].First) > i {
		c.k = sort.Search(len(c.runs), func(k int) bool { return int(c.runs[k].First) > i })
	}
	for c.k < len(c.runs) && int(c.runs[c.k].First) <= i {
		c.k++
	}
	if c.k == 0 {
		return 0
	}
	return c.runs[c.k-1].Meta
}

// SetMetas sets the events' MetaIDs, ids[i] being Events[i]'s (a model
// built in code; missing ids are 0).
func (t *Trace) SetMetas(ids []MetaID) {
	t.MetaRuns = nil
	for i, id := range ids {
		t.MetaRuns = appendMetaRun(t.MetaRuns, i, id)
	}
}

// appendMetaRun returns runs with event i's id added, i following the
// last event added.
func appendMetaRun(runs []MetaRun, i int, id MetaID) []MetaRun {
	last := MetaID(0)
	if len(runs) > 0 {
		last = runs[len(runs)-1].Meta
	}
	if id != last {
		runs = append(runs, MetaRun{First: int32(i), Meta: id})
	}
	return runs
}

// sliceMetaRuns returns the runs of the events lo..hi-1 of runs' trace,
// numbered from lo.
func sliceMetaRuns(runs []MetaRun, lo, hi int) []MetaRun {
	if lo >= hi {
		return nil
	}
	k := sort.Search(len(runs), func(k int) bool { return int(runs[k].First) > lo })
	var out []MetaRun
	if k > 0 && runs[k-1].Meta != 0 {
		out = append(out, MetaRun{First: 0, Meta: runs[k-1].Meta})
	}
	for ; k < len(runs) && int(runs[k].First) < hi; k++ {
		out = append(out, MetaRun{First: runs[k].First - int32(lo), Meta: runs[k].Meta})
	}
	return out
}

// EventFlag records per-event facts that are not values in the file.
type EventFlag uint8

const (
	// FlagMergedFree marks a free_requested that memory_viz merges with the
	// free_completed right after it into one "free" event.
	FlagMergedFree EventFlag = 1 << iota
	// FlagHasTime says time_us was present.
	FlagHasTime
	// FlagHasFrames says the entry had a frames key (possibly empty).
	FlagHasFrames
)

// Event is one trace entry. Its address version and its compile
// context, user metadata and unknown keys are columns of its Trace
// (Trace.Version, Snapshot.EventMeta), so that an Event is 32 bytes: a
// 1 GB snapshot holds 15 million, and each byte of Event is 15 MB of
// fresh memory written by the decoder and read by every pass after it.
type Event struct {
	Addr uint64 // addr; for oom the device_free value
	Size uint64
	// TimeUS is time_us (µs since the Unix epoch), when FlagHasTime is set.
	TimeUS int64
	Stack  StackID
	Stream StreamID
	Action Action
	Flags  EventFlag
}

// MetaID indexes Snapshot.Metas. 0 is no compile context, user metadata
// or unknown keys.
type MetaID int32

// EventMeta is what a trace entry has besides the allocator's facts.
type EventMeta struct {
	CompileContext StringID
	UserMetadata   StringID
	Extra          ExtraID
}

// EventMeta returns the compile context, user metadata and unknown keys
// of event i of trace t.
func (s *Snapshot) EventMeta(t *Trace, i int) EventMeta { return s.Meta(t.MetaID(i)) }

// Meta returns the EventMeta of id (the zero one when out of range).
func (s *Snapshot) Meta(id MetaID) EventMeta {
	if id <= 0 || int(id) >= len(s.Metas) {
		return EventMeta{}
	}
	return s.Metas[id]
}

// AddMeta returns the id of m in Metas, adding it if it is new.
func (s *Snapshot) AddMeta(m EventMeta) MetaID {
	if m == (EventMeta{}) {
		return 0
	}
	if s.metaLast > 0 && int(s.metaLast) < len(s.Metas) && s.Metas[s.metaLast] == m {
		return s.metaLast // consecutive entries mostly share theirs
	}
	if len(s.Metas) == 0 {
		s.Metas = []EventMeta{{}}
	}
	if s.metaIndex == nil {
		s.metaIndex = make(map[EventMeta]MetaID, len(s.Metas))
		for i, m := range s.Metas[1:] {
			s.metaIndex[m] = MetaID(i + 1)
		}
	}
	id, ok := s.metaIndex[m]
	if !ok {
		id = MetaID(len(s.Metas))
		s.Metas = append(s.Metas, m)
		s.metaIndex[m] = id
	}
	s.metaLast = id
	return id
}

// VizAction is the action memory_viz shows for this event: ActionFree for a
// merged free pair, the raw action otherwise.
func (e *Event) VizAction() Action {
	if e.Flags&FlagMergedFree != 0 {
		return ActionFree
	}
	return e.Action
}

// Frame is one interned stack frame.
type Frame struct {
	Filename string
	Name     string
	Line     int64
	Extra    ExtraID // fx_node_* and other extra keys
}

// StackTable stores interned stacks as one flat frame-id pool.
// Stack i has frames FrameIDs[Offsets[i]:Offsets[i+1]], innermost first as
// PyTorch writes them. Stack 0 is the empty stack.
type StackTable struct {
	Offsets  []int32
	FrameIDs []FrameID
}

// Len returns the number of stacks (including the empty stack 0).
func (t *StackTable) Len() int {
	if len(t.Offsets) == 0 {
		return 0
	}
	return len(t.Offsets) - 1
}

// Frames returns the frame ids of stack id.
func (t *StackTable) Frames(id StackID) []FrameID {
	if id <= 0 || int(id)+1 >= len(t.Offsets) {
		return nil
	}
	return t.FrameIDs[t.Offsets[id]:t.Offsets[id+1]]
}

// AllocatorSettings is the allocator_settings dict (2.4+).
type AllocatorSettings struct {
	Conf                       string // PYTORCH_CUDA_ALLOC_CONF
	MaxSplitSize               int64  // -1 when unlimited
	GarbageCollectionThreshold float64
	ExpandableSegments         bool
	// RoundupPower2Divisions maps interval start in MiB ("1", "2", ... "32768")
	// to the division count, in file order.
	RoundupPower2Divisions []RoundupDivision
	// Raw keeps every key with its value as JSON, in file order.
	Raw KeyValues
}

// RoundupDivision is one entry of roundup_power2_divisions.
type RoundupDivision struct {
	IntervalMiB string
	Divisions   int64
}

// Annotation is one external_annotations entry, such as a
// record_function START or END.
type Annotation struct {
	Device int32
	TimeUS int64
	Name   string
	Stage  string // "START" or "END" (empty if absent)
	Extra  KeyValues
}

// KeyValue is a key this version does not interpret, with its value as
// compact JSON (a class reference as {"__class__": "module.name"}, bytes
// as {"__bytes__": hex}; instances of classes are refused, not kept).
type KeyValue struct {
	Key  string
	JSON string
}

// KeyValues is an ordered list of uninterpreted keys.
type KeyValues []KeyValue

// Text returns the string for id ("" when out of range).
func (s *Snapshot) Text(id StringID) string {
	if id <= 0 || int(id) >= len(s.Strings) {
		return ""
	}
	return s.Strings[id]
}

// RawStream returns the raw cudaStream_t value of a stream id.
func (s *Snapshot) RawStream(id StreamID) int64 {
	if id < 0 || int(id) >= len(s.Streams) {
		return 0
	}
	return s.Streams[id]
}

// SegmentBlocks returns the blocks of segment i.
func (s *Snapshot) SegmentBlocks(i int) []Block {
	seg := &s.Segments[i]
	return s.Blocks[seg.FirstBlock : seg.FirstBlock+seg.NumBlocks]
}

// BlockHistory returns the legacy history items of a block.
func (s *Snapshot) BlockHistory(b *Block) []HistoryItem {
	return s.History[b.FirstHistory : b.FirstHistory+b.NumHistory]
}

// StackFrames returns the frames of a stack, innermost first.
func (s *Snapshot) StackFrames(id StackID) []FrameID { return s.Stacks.Frames(id) }

// TraceTimed reports whether every entry of device d's trace has its time
// (FlagHasTime; true for an empty or absent trace). The pickle decoder
// knows it as it appends the entries, for the entries as decoded, so that
// the viewer does not pass over the 15 million entries of a 1 GB snapshot
// to say whether its time axis can be shown (25 ms of CPU beside the
// first view's layout); otherwise, or when some entry of the file has
// none, it is a pass over the trace.
func (s *Snapshot) TraceTimed(d int) bool {
	if s.timed || d < 0 || d >= len(s.Traces) {
		return true
	}
	for i := range s.Traces[d].Events {
		if s.Traces[d].Events[i].Flags&FlagHasTime == 0 {
			return false
		}
	}
	return true
}

// Devices returns the sorted device ordinals that have a trace or a segment.
func (s *Snapshot) Devices() []int {
	var t deviceTally
	t.count(s)
	return t.devices()
}

// DefaultDevice is the device a one-device view or export shows when none
// is chosen: memory_viz's choice, the device with the longest trace; on a
// tie (or with no trace) the one with more memory reserved in the dump,
// then the lowest number (0 for an empty snapshot). A device whose trace
// is one snapshot entry and no memory never wins over one that holds it.
// In a torch.profiler trace a GPU wins over host memory (its cpu device).
func (s *Snapshot) DefaultDevice() int {
	var t deviceTally
	t.count(s)
	best, bestEvents, bestReserved := 0, -1, uint64(0)
	devs := t.devices()
	for _, d := range devs {
		if s.Profiler != nil && d == s.Profiler.CPUDevice && len(devs) > 1 {
			continue // a profiler trace's host memory: shown when asked for
		}
		n := 0
		if d >= 0 && d < len(s.Traces) { // a segment's device may be anything
			n = len(s.Traces[d].Events)
		}
		if r := t.reservedOf(d); n > bestEvents || n == bestEvents && r > bestReserved {
			best, bestEvents, bestReserved = d, n, r
		}
	}
	return best
}

// smallDevices bounds the device numbers a deviceTally counts in arrays.
const smallDevices = 64

// deviceTally is the devices of a snapshot (a trace with entries or a
// segment) and the bytes their segments reserve. The viewer asks for them
// on every request that names or defaults a device: a Go map insert per
// segment took 20-40 ms of CPU on a 1 GB snapshot's 760,000 segments, in
// each zoom and in the first paint. Numbers in [0, smallDevices) (every
// CUDA device) are counted in arrays, any other in a map.
type deviceTally struct {
	seen     [smallDevices]bool
	reserved [smallDevices]uint64
	other    map[int]uint64 // reserved bytes by device, for the rest
}

func (t *deviceTally) count(s *Snapshot) {
	for d := range s.Traces {
		if len(s.Traces[d].Events) > 0 {
			t.add(d, 0)
		}
	}
	for i := range s.Segments {
		seg := &s.Segments[i]
		if d := seg.Device; d >= 0 && d < smallDevices {
			t.seen[d] = true
			t.reserved[d] += seg.TotalSize
		} else {
			t.add(int(d), seg.TotalSize)
		}
	}
}

func (t *deviceTally) add(d int, reserved uint64) {
	if d >= 0 && d < smallDevices {
		t.seen[d] = true
		t.reserved[d] += reserved
		return
	}
	if t.other == nil {
		t.other = map[int]uint64{}
	}
	t.other[d] += reserved
}

func (t *deviceTally) reservedOf(d int) uint64 {
	if d >= 0 && d < smallDevices {
		return t.reserved[d]
	}
	return t.other[d]
}

// devices returns the devices counted, sorted.
func (t *deviceTally) devices() []int {
	out := make([]int, 0, len(t.other)+4)
	for d := range t.other {
		out = append(out, d)
	}
	for d, ok := range t.seen {
		if ok {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// Divisions is the roundup_power2_divisions table the file records (the
// settings the allocator rounded with), nil when it records none. Entries
// are placed as PyTorch's parser places them (rules.Index).
func (a *AllocatorSettings) Divisions() *rules.Divisions {
	if a == nil || len(a.RoundupPower2Divisions) == 0 {
		return nil
	}
	var d rules.Divisions
	found := false
	for _, r := range a.RoundupPower2Divisions {
		mb, err := strconv.ParseUint(r.IntervalMiB, 10, 64)
		i, ok := rules.Index(mb)
		if err != nil || !ok || r.Divisions < 0 {
			continue
		}
		d[i], found = uint64(r.Divisions), true
	}
	if !found {
		return nil
	}
	return &d
}

// IsPrivatePool says whether a segment_pool_id names a private pool (a CUDA
// graph's or a MemPool's); (0, 0) is the device's default pool.
func IsPrivatePool(id [2]int64) bool { return id != [2]int64{} }

// InPrivatePool says whether the segment belongs to a private pool (false
// when the file has no segment_pool_id, before PyTorch 2.1).
func (s *Segment) InPrivatePool() bool { return s.HasPoolID && IsPrivatePool(s.PoolID) }

// Requested is a block's requested size, the one rule for a file that
// lacks it: a block with a history (PyTorch 1.13 and 2.0) has its first
// record's real_size; else requested_size as written (legacy files: when
// non-zero), else the block's size.
func (s *Snapshot) Requested(b *Block) uint64 {
	legacy := s.Source.Generation == GenL || s.Source.Generation == GenD1
	switch {
	case b.NumHistory > 0:
		return s.History[b.FirstHistory].RealSize
	case b.RequestedSize != 0 || b.HasRequestedSize && !legacy:
		return b.RequestedSize
	}
	return b.Size
}

// AnnotationSpan is one START/END pair of an external annotation, such as
// ProfilerStep#3 or Optimizer.step#AdamW.step.
type AnnotationSpan struct {
	Name           string
	StartUS, EndUS int64
}

// AnnotationSpans pairs the START and END annotations of a device whose
// name starts with prefix, in the order their ENDs appear; an END without a
// START, and a START never closed, are left out.
func (s *Snapshot) AnnotationSpans(device int, prefix string) []AnnotationSpan {
	var out []AnnotationSpan
	open := map[string]int64{}
	for _, a := range s.Annotations {
		if int(a.Device) != device || !strings.HasPrefix(a.Name, prefix) {
			continue
		}
		switch a.Stage {
		case "START":
			open[a.Name] = a.TimeUS
		case "END":
			if t0, ok := open[a.Name]; ok {
				out = append(out, AnnotationSpan{a.Name, t0, a.TimeUS})
				delete(open, a.Name)
			}
		}
	}
	return out
}
