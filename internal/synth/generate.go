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
	s := &allocSink{a: a, blockStack: map[uint64]snapshot.StackID{}, segStack: map[uint64]snapshot.StackID{}}
	p := newProgram(w, s)
	runErr := p.run()
	res := &Result{Workload: w, StepsDone: p.stepsDone, Events: len(s.events), Stats: a.Stats()}
	if runErr != nil {
		var oom *alloc.OOMError
		if !errors.As(runErr, &oom) {
			return nil, nil, runErr
		}
		res.OOM = oom
	}
	return s.snapshot(p.st, opt.Device, cfg), res, nil
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
}

// compileContextNA is the StringID of "N/A" in the snapshot's Strings.
const compileContextNA snapshot.StringID = 1

// collect turns the simulator's new trace entries into events that happened
// at time ts with stack st (context="all": frees carry the freeing stack).
func (s *allocSink) collect(from int, st snapshot.StackID, ts int64) {
	tr := s.a.Trace()
	for _, e := range tr[from:] {
		s.events = append(s.events, snapshot.Event{
			Addr: e.Addr, Size: e.Size, TimeUS: ts, Stack: st,
			CompileContext: compileContextNA, Action: e.Action,
			Flags: snapshot.FlagHasTime | snapshot.FlagHasFrames,
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

func (s *allocSink) malloc(id tensorID, size uint64, _ kind, st snapshot.StackID, ts int64) error {
	n := len(s.a.Trace())
	addr, err := s.a.Malloc(size, 0)
	s.collect(n, st, ts)
	if err != nil {
		return err
	}
	for int(id) >= len(s.addrs) {
		s.addrs = append(s.addrs, 0)
	}
	s.addrs[id] = addr
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
		Streams:           []int64{0},
		Extras:            []snapshot.KeyValues{nil},
		Traces:            make([]snapshot.Trace, device+1),
		AllocatorSettings: settings(cfg),
		HasAnnotationsKey: true,
	}
	out.Traces[device].Events = s.events
	for i := range s.annots {
		s.annots[i].Device = int32(device)
	}
	out.Annotations = s.annots
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
