package synth

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/snapshot"
)

// Options say how the workload runs: the allocator configuration and the
// simulated device.
type Options struct {
	// Config is the PYTORCH_CUDA_ALLOC_CONF string ("" = defaults).
	Config string
	// Capacity is the device memory in bytes; 0 means unlimited. When a
	// request does not fit, the run records PyTorch's oom trace entry and
	// stops there, as a script that dumps the snapshot on OOM would.
	Capacity uint64
	// Device is the CUDA device ordinal the run uses.
	Device int
}

// Result summarises a generated run.
type Result struct {
	Workload  Workload // with defaults filled in
	StepsDone int      // training steps that finished
	Events    int      // trace entries
	// OOM is non-nil when the run stopped at an out-of-memory error.
	OOM   *alloc.OOMError
	Stats alloc.MemoryStats
	// Truth is the true category of every allocation of the run.
	Truth *Truth
}

// Truth is the true memory category of each allocation of a generated run,
// as gpumem's answers name categories ("parameter", "activation", ...;
// "leak" for Workload.Leak's tensors).
type Truth struct {
	// Events[i] is the category of trace entry i's allocation ("" for
	// entries other than alloc).
	Events []string
	// Before is the category of each block live when recording began, by
	// address (its allocation is not in the trace).
	Before map[uint64]string
}

// Generate runs the workload's training loop through the caching-allocator
// simulator and returns the snapshot torch.cuda.memory._snapshot() would
// give right after it (generation D7: time_us, compile_context "N/A",
// user_metadata "", allocator_settings, a ProfilerStep#N annotation pair
// per step, stacks on every entry and on live blocks and segments).
//
// The snapshot carries raw values only: memory_viz's derived fields
// (versions, merged frees, Trace.Viz) are left zero; decoding the written
// file computes them.
func Generate(w Workload, opt Options) (*snapshot.Snapshot, *Result, error) {
	w, err := w.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := alloc.ParseConfig(opt.Config)
	if err != nil {
		return nil, nil, err
	}
	if opt.Device < 0 || opt.Device > 1024 {
		return nil, nil, fmt.Errorf("bad device %d", opt.Device)
	}
	ao := alloc.Options{Capacity: opt.Capacity, Device: opt.Device, Record: true}
	if cfg.ExpandableSegments {
		// Runs with the default allocator (the embedded demo among them)
		// keep the addresses they always had.
		ao.AddressBase = addressBase(w.Seed, opt.Device)
	}
	a := alloc.New(cfg, ao)
	// The patterns that start recording mid-run (startRecording) record
	// no stacks before it, as PyTorch keeps none for blocks allocated
	// before _record_memory_history.
	late := w.Inference || w.LoRA || w.KeptGrads
	s := &allocSink{a: a, blockStack: map[uint64]snapshot.StackID{}, segStack: map[uint64]snapshot.StackID{}, recording: !late}
	p := newProgram(w, s)
	runErr := p.run()
	snap := s.snapshot(p.st, opt.Device, cfg)
	if w.NoAnnotations {
		snap.HasAnnotationsKey = false
	}
	res := &Result{Workload: w, StepsDone: p.stepsDone, Events: len(snap.Traces[opt.Device].Events), Stats: a.Stats(), Truth: s.truth()}
	if runErr != nil {
		var oom *alloc.OOMError
		if !errors.As(runErr, &oom) {
			return nil, nil, runErr
		}
		res.OOM = oom
	}
	return snap, res, nil
}

// addressBase places an expandable-segment run's reservations as real
// processes do, at an address that differs by device and seed (so that a
// replay must take them from the trace): 0x7f0000000000 less up to 1023
// GiB, in GiB steps; seed 0 on device 0 keeps 0x7f0000000000.
func addressBase(seed int64, device int) uint64 {
	k := (uint64(seed)*0x9e3779b97f4a7c15 + uint64(device)*0xbf58476d1ce4e5b9) >> 54
	return 0x7f0000000000 - k<<30
}

// allocSink feeds the program's calls to the simulator and turns the
// simulator's trace into snapshot events with the program's stacks and
// times.
type allocSink struct {
	a      *alloc.Allocator
	addrs  []uint64 // by tensorID
	events []snapshot.Event
	annots []snapshot.Annotation
	// blockStack is the allocation stack of each live block, segStack the
	// stack of the malloc that created each segment (what PyTorch puts on
	// blocks' and segments' "frames" in the dump).
	blockStack map[uint64]snapshot.StackID
	segStack   map[uint64]snapshot.StackID

	// kinds[i] is the kind of events[i]'s allocation (numKinds: not an
	// alloc); allocEv the alloc event of each live tensor.
	kinds   []kind
	allocEv []int
	// recording is false before startRecording; cut is the first event
	// recorded, before the kinds of the blocks live then by address.
	recording bool
	cut       int
	cutAnnots int
	before    map[uint64]kind
	blockKind map[uint64]kind
}

func (s *allocSink) startRecording() {
	s.recording = true
	s.cut, s.cutAnnots = len(s.events), len(s.annots)
	s.before = map[uint64]kind{}
	for addr, k := range s.blockKind {
		s.before[addr] = k
	}
}

func (s *allocSink) relabel(id tensorID, k kind) {
	if int(id) < len(s.allocEv) && s.allocEv[id] >= 0 {
		s.kinds[s.allocEv[id]] = k
		s.blockKind[s.addrs[id]] = k
	}
}

// truth spells the recorded part of the run's kinds as categories.
func (s *allocSink) truth() *Truth {
	t := &Truth{Events: make([]string, len(s.kinds)-s.cut), Before: map[uint64]string{}}
	for i, k := range s.kinds[s.cut:] {
		if k < numKinds {
			t.Events[i] = categoryOf[k]
		}
	}
	for addr, k := range s.before {
		t.Before[addr] = categoryOf[k]
	}
	return t
}

// compileContextNA is the StringID of "N/A" in the snapshot's Strings.
const compileContextNA snapshot.StringID = 1

// metaNA is the MetaID of compile context "N/A" in the snapshot's Metas.
const metaNA snapshot.MetaID = 1

// collect turns the simulator's new trace entries into events that happened
// at time ts with stack st (context="all": frees carry the freeing stack).
func (s *allocSink) collect(from int, st snapshot.StackID, ts int64) {
	tr := s.a.Trace()
	for _, e := range tr[from:] {
		s.kinds = append(s.kinds, numKinds)
		if !s.recording {
			st = snapshot.NoStack
		}
		s.events = append(s.events, snapshot.Event{
			Addr: e.Addr, Size: e.Size, TimeUS: ts, Stack: st,
			Action: e.Action,
			Flags:  snapshot.FlagHasTime | snapshot.FlagHasFrames,
		})
		switch e.Action {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			if _, ok := s.segStack[e.Addr]; !ok {
				s.segStack[e.Addr] = st
			}
		case snapshot.ActionSegmentFree:
			delete(s.segStack, e.Addr)
		}
	}
}

func (s *allocSink) malloc(id tensorID, size uint64, k kind, st snapshot.StackID, ts int64) error {
	n, ne := len(s.a.Trace()), len(s.events)
	addr, err := s.a.Malloc(size, 0)
	s.collect(n, st, ts)
	if err != nil {
		return err
	}
	for int(id) >= len(s.addrs) {
		s.addrs = append(s.addrs, 0)
	}
	s.addrs[id] = addr
	for int(id) >= len(s.allocEv) {
		s.allocEv = append(s.allocEv, -1)
	}
	s.allocEv[id] = -1
	for i := len(s.events) - 1; i >= ne; i-- {
		if s.events[i].Action == snapshot.ActionAlloc {
			s.kinds[i] = k
			s.allocEv[id] = i
			break
		}
	}
	if s.blockKind == nil {
		s.blockKind = map[uint64]kind{}
	}
	s.blockKind[addr] = k
	if !s.recording {
		st = snapshot.NoStack
	}
	s.blockStack[addr] = st
	return nil
}

func (s *allocSink) free(id tensorID, st snapshot.StackID, ts int64) error {
	addr := s.addrs[id]
	n := len(s.a.Trace())
	if err := s.a.Free(addr); err != nil {
		return fmt.Errorf("synth: internal error: %v", err) // the program frees only what it allocated
	}
	delete(s.blockStack, addr)
	delete(s.blockKind, addr)
	if int(id) < len(s.allocEv) {
		s.allocEv[id] = -1
	}
	s.collect(n, st, ts)
	return nil
}

func (s *allocSink) annotate(name, stage string, ts int64) {
	s.annots = append(s.annots, snapshot.Annotation{Device: 0, TimeUS: ts, Name: name, Stage: stage})
}

// snapshot assembles the dump: segments and blocks at the end of the run,
// the device's trace, settings and annotations.
func (s *allocSink) snapshot(st *stackTable, device int, cfg alloc.Config) *snapshot.Snapshot {
	out := &snapshot.Snapshot{
		Source:            snapshot.Source{Name: "synth", Encoding: "pickle", Protocol: 4, Generation: snapshot.GenD7},
		Frames:            st.frames,
		Stacks:            st.table,
		Strings:           []string{"", "N/A"},
		Metas:             []snapshot.EventMeta{{}, {CompileContext: compileContextNA}},
		Streams:           []int64{0},
		Extras:            []snapshot.KeyValues{nil},
		Traces:            make([]snapshot.Trace, device+1),
		AllocatorSettings: settings(cfg),
		HasAnnotationsKey: true,
	}
	out.Traces[device].Events = s.events[s.cut:]
	if len(out.Traces[device].Events) > 0 {
		// Every entry's compile_context is "N/A", as PyTorch writes it.
		out.Traces[device].MetaRuns = []snapshot.MetaRun{{First: 0, Meta: metaNA}}
	}
	annots := s.annots[s.cutAnnots:]
	for i := range annots {
		annots[i].Device = int32(device)
	}
	out.Annotations = annots
	for _, seg := range s.a.Segments() {
		sg := snapshot.Segment{
			Device: int32(device), Address: seg.Addr, TotalSize: seg.Size,
			Large: !seg.Small, HasPoolID: true, IsExpandable: seg.Expandable,
			Stack:      s.segStack[seg.Addr],
			FirstBlock: int32(len(out.Blocks)), NumBlocks: int32(len(seg.Blocks)),
		}
		for _, b := range seg.Blocks {
			blk := snapshot.Block{
				Addr: b.Addr, RawAddress: b.Addr, HasAddress: true, Size: b.Size,
				RequestedSize: b.Requested, HasRequestedSize: true, State: b.State,
			}
			if b.State == snapshot.BlockActiveAllocated {
				sg.AllocatedSize += b.Size
				blk.Stack = s.blockStack[b.Addr]
			}
			if b.State != snapshot.BlockInactive {
				sg.ActiveSize += b.Size
				sg.RequestedSize += b.Requested
			}
			out.Blocks = append(out.Blocks, blk)
		}
		out.Segments = append(out.Segments, sg)
	}
	return out
}

// settings is the allocator_settings dict PyTorch 2.8+ writes for cfg, with
// its keys in PyTorch's order.
func settings(c alloc.Config) *snapshot.AllocatorSettings {
	maxSplit := int64(-1)
	if c.MaxSplitSize != alloc.Unlimited {
		maxSplit = int64(c.MaxSplitSize)
	}
	set := &snapshot.AllocatorSettings{
		Conf: c.Conf, MaxSplitSize: maxSplit,
		GarbageCollectionThreshold: c.GCThreshold, ExpandableSegments: c.ExpandableSegments,
	}
	divs := "{"
	for i, v := range c.RoundupDivisions {
		mib := strconv.FormatUint(uint64(1)<<i, 10)
		set.RoundupPower2Divisions = append(set.RoundupPower2Divisions, snapshot.RoundupDivision{IntervalMiB: mib, Divisions: int64(v)})
		if i > 0 {
			divs += ","
		}
		divs += strconv.Quote(mib) + ":" + strconv.FormatUint(v, 10)
	}
	divs += "}"
	gc := strconv.FormatFloat(c.GCThreshold, 'g', -1, 64)
	if !strings.ContainsAny(gc, ".eE") {
		gc += ".0"
	}
	set.Raw = snapshot.KeyValues{
		{Key: "PYTORCH_CUDA_ALLOC_CONF", JSON: jsonString(c.Conf)},
		{Key: "max_split_size", JSON: strconv.FormatInt(maxSplit, 10)},
		{Key: "garbage_collection_threshold", JSON: gc},
		{Key: "expandable_segments", JSON: strconv.FormatBool(c.ExpandableSegments)},
		{Key: "pinned_num_register_threads", JSON: strconv.FormatUint(max(c.PinnedNumRegisterThreads, 1), 10)},
		{Key: "release_lock_on_cudamalloc", JSON: strconv.FormatBool(c.ReleaseLockOnCudaMalloc)},
		{Key: "pinned_use_cuda_host_register", JSON: strconv.FormatBool(c.PinnedUseHostRegister)},
		{Key: "graph_capture_record_stream_reuse", JSON: strconv.FormatBool(c.GraphCaptureRecordStreamReuse)},
		{Key: "roundup_power2_divisions", JSON: divs},
	}
	return set
}

// jsonString quotes v as Python's json.dumps does (ASCII only, no HTML
// escaping).
func jsonString(v string) string {
	return string(snapshot.AppendPythonJSONString(nil, v))
}
