package snapshot

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"unsafe"

	"github.com/gpumem/gpumem/internal/pickle"
)

// notSnapshot builds the error for input that decodes but is not a snapshot.
func notSnapshot(format string, args ...any) error {
	return fmt.Errorf("not a PyTorch memory snapshot: "+format, args...)
}

// assemble types the (small) generic remainder of the tree under root and
// fills in the snapshot.
func (b *builder) assemble(root pickle.Value) error {
	if b.tooManyStreams {
		return fmt.Errorf("more than %d distinct streams", MaxStreams)
	}
	s := b.s
	d := b.d
	// The versioner is done before the traces take (or copy) the events.
	pre := b.ver.finish(b.events)
	defer func() {
		if b.tracesAreEvents() {
			if pre != nil {
				s.pending = pre
				at := 0
				for dev := range s.Traces {
					n := len(s.Traces[dev].Events)
					s.Traces[dev].versions = pre.events.slice(at, at+n)
					at += n
				}
			}
			// Every entry went through appendEvent: whether one lacked
			// its time is known.
			s.timed = !b.untimed
		}
	}()
	var segs pickle.Value
	haveSegs := false
	if items, ok := b.items(root); ok && root.Kind != pickle.Tuple {
		_ = items
		segs, haveSegs = root, true
		s.Source.Generation = GenL
	} else if root.Kind == pickle.Dict {
		kv := d.Items(root)
		if err := b.notExport(kv); err != nil {
			return err
		}
		for i := 0; i+1 < len(kv); i += 2 {
			key, ok := d.Str(kv[i])
			val := kv[i+1]
			if !ok {
				kj, err := b.keyValue(kv[i], val)
				if err != nil {
					return err
				}
				s.Extra = append(s.Extra, kj)
				continue
			}
			var err error
			switch key {
			case "segments":
				segs, haveSegs = val, true
			case "device_traces":
				err = b.traces(val)
			case "allocator_settings":
				err = b.settings(val)
			case "external_annotations":
				err = b.annotations(val)
			default:
				var kvj KeyValue
				kvj, err = b.keyValue(kv[i], val)
				s.Extra = append(s.Extra, kvj)
			}
			if err != nil {
				return err
			}
		}
		if !haveSegs {
			keys := ""
			for i := 0; i < len(kv) && i < 16; i += 2 {
				k, _ := d.AppendJSON(nil, kv[i], b.renderHandle)
				if keys != "" {
					keys += ", "
				}
				keys += string(k)
			}
			return notSnapshot("top-level dict has no \"segments\" key (keys: %s)", keys)
		}
	} else {
		return notSnapshot("top-level value is %s, want a dict or a list of segments", b.kindName(root))
	}
	if err := b.segments(segs); err != nil {
		return err
	}
	b.renumberStreams()
	if s.Source.Generation == "" {
		s.Source.Generation = b.generation()
	}
	return nil // annotated by versioned, the decode's last step
}

// ExportSchemaPrefix starts the "schema" value of the JSON gpumem export
// writes (gpumem.snapshot/1), which is not a PyTorch snapshot: its
// segments look like PyTorch's but frames, stacks and events do not.
const ExportSchemaPrefix = "gpumem.snapshot/"

// notExport is an error naming gpumem's own export when the top-level
// dict has its "schema" key, rather than decoding it as a broken snapshot.
func (b *builder) notExport(kv []pickle.Value) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if key, ok := b.d.Str(kv[i]); ok && key == "schema" {
			if v, ok := b.d.Str(kv[i+1]); ok && strings.HasPrefix(v, ExportSchemaPrefix) {
				return fmt.Errorf("this is a gpumem export (%s), not a PyTorch snapshot: open the snapshot it was exported from", v)
			}
		}
	}
	return nil
}

func (b *builder) traces(v pickle.Value) error {
	devs, ok := b.items(v)
	if !ok {
		return notSnapshot("device_traces is %s, not a list", b.kindName(v))
	}
	b.s.Traces = make([]Trace, len(devs))
	for dev, tv := range devs {
		if tv.Kind == pickle.Handle && tv.Sub == hTrace {
			r := b.traceRuns[tv.X]
			b.s.Traces[dev].Events = b.events[r.first : r.first+r.n : r.first+r.n]
			b.s.Traces[dev].MetaRuns = b.metaRunsOf(int(r.first), int(r.first+r.n))
			continue
		}
		entries, ok := b.items(tv)
		if !ok {
			return notSnapshot("device_traces[%d] is %s, not a list", dev, b.kindName(tv))
		}
		// Entries are usually contiguous in b.events; share the backing
		// array then instead of copying.
		contiguous := true
		for i, e := range entries {
			if e.Kind != pickle.Handle || e.Sub != hEvent {
				return fmt.Errorf("device_traces[%d][%d] is %s, not a trace entry dict", dev, i, b.kindName(e))
			}
			if i > 0 && e.X != entries[i-1].X+1 {
				contiguous = false
			}
		}
		if len(entries) == 0 {
			b.s.Traces[dev].Events = []Event{}
			continue
		}
		if contiguous {
			lo := entries[0].X
			hi := lo + uint64(len(entries))
			b.s.Traces[dev].Events = b.events[lo:hi:hi]
			b.s.Traces[dev].MetaRuns = b.metaRunsOf(int(lo), int(hi))
			continue
		}
		evs := make([]Event, len(entries))
		var runs []MetaRun
		for i, e := range entries {
			evs[i] = b.events[e.X]
			if len(b.metaRuns) > 0 {
				runs = appendMetaRun(runs, i, metaAt(b.metaRuns, int(e.X)))
			}
		}
		b.s.Traces[dev].Events = evs
		b.s.Traces[dev].MetaRuns = runs
	}
	b.keptViz()
	return nil
}

// metaRunsOf returns the MetaRuns of a trace that is the events lo..hi-1.
func (b *builder) metaRunsOf(lo, hi int) []MetaRun {
	if len(b.metaRuns) == 0 {
		return nil
	}
	return sliceMetaRuns(b.metaRuns, lo, hi)
}

// keptViz sets each trace's Viz from the events kept while decoding, when
// the traces are runs of the events in their order (as PyTorch writes
// them): merges decided across two traces are undone and those traces
// left to annotate, as are all of them when the traces are laid out
// otherwise.
func (b *builder) keptViz() {
	if !b.tracesAreEvents() {
		return
	}
	kept, first := b.kept, 0
	for dev := range b.s.Traces {
		tr := &b.s.Traces[dev]
		n := len(tr.Events)
		lo := sort.Search(len(kept), func(i int) bool { return int(kept[i]) >= first })
		hi := sort.Search(len(kept), func(i int) bool { return int(kept[i]) >= first+n })
		switch {
		case n == 0:
			tr.Viz = []int32{}
		case lo == len(kept) || int(kept[lo]) != first:
			// Its first event was merged into the last kept one of the
			// trace before: undone, and this trace annotated afresh.
			b.events[kept[lo-1]].Flags &^= FlagMergedFree
			tr.Viz = nil
		case first == 0:
			tr.Viz = kept[lo:hi:hi]
		default:
			tr.Viz = make([]int32, hi-lo)
			for i, k := range kept[lo:hi] {
				tr.Viz[i] = k - int32(first)
			}
		}
		first += n
	}
}

// segments collects the segment list (items are segment handles).
func (b *builder) segments(v pickle.Value) error {
	s := b.s
	segs, ok := b.items(v)
	if !ok {
		return notSnapshot("segments is %s, not a list", b.kindName(v))
	}
	// Segments and blocks were typed in file order; keep those arrays when
	// the list uses them in order, as in every file PyTorch writes.
	inOrder := true
	segsInOrder := len(segs) == len(b.segs)
	next := int32(0)
	for si, sv := range segs {
		if sv.Kind != pickle.Handle || sv.Sub != hSegment {
			return notSnapshot("segments[%d] is %s, not a segment dict", si, b.kindName(sv))
		}
		seg := &b.segs[sv.X]
		if seg.FirstBlock != next {
			inOrder = false
		}
		next = seg.FirstBlock + seg.NumBlocks
		segsInOrder = segsInOrder && sv.X == uint64(si)
	}
	if segsInOrder {
		s.Segments = b.segs
	} else {
		s.Segments = make([]Segment, len(segs))
		for si, sv := range segs {
			s.Segments[si] = b.segs[sv.X]
		}
	}
	if inOrder && int(next) == len(b.blocks) {
		s.Blocks = b.blocks
	} else {
		s.Blocks = make([]Block, 0, len(b.blocks))
		for i := range s.Segments {
			seg := &s.Segments[i]
			first := int32(len(s.Blocks))
			s.Blocks = append(s.Blocks, b.blocks[seg.FirstBlock:seg.FirstBlock+seg.NumBlocks]...)
			seg.FirstBlock = first
		}
	}
	b.blocks, b.segs = nil, nil
	return nil
}

// segment types a segment dict once its blocks are typed.
func (b *builder) segment(v pickle.Value, kv []pickle.Value) (pickle.Value, error) {
	d := b.d
	var seg Segment
	var extra KeyValues
	var haveAlloc, haveActive, haveReq bool
	var blockItems []pickle.Value
	haveBlocks := false
	for i := 0; i+1 < len(kv); i += 2 {
		key, _ := d.Str(kv[i])
		val := kv[i+1]
		var err error
		switch key {
		case "device":
			var x int64
			x, err = b.int(val, key)
			seg.Device = int32(x)
		case "address":
			seg.Address, err = b.uint(val, key)
		case "total_size":
			seg.TotalSize, err = b.uint(val, key)
		case "allocated_size":
			seg.AllocatedSize, err = b.uint(val, key)
			haveAlloc = true
		case "active_size":
			seg.ActiveSize, err = b.uint(val, key)
			haveActive = true
		case "requested_size":
			seg.RequestedSize, err = b.uint(val, key)
			haveReq = true
		case "stream":
			var x int64
			x, err = b.int(val, key)
			seg.Stream = b.tmpStream(x)
		case "segment_type":
			var t string
			t, err = b.str(val, key)
			seg.Large = t == "large"
			if err == nil && t != "large" && t != "small" {
				extra = append(extra, KeyValue{Key: key, JSON: string(pickle.AppendJSONString(nil, t))})
			}
		case "segment_pool_id":
			if val.Kind == pickle.Handle && val.Sub == hPair {
				seg.PoolID = b.pairs[val.X]
				seg.HasPoolID = true
				continue
			}
			items, ok := b.items(val)
			if !ok || len(items) != 2 {
				return v, d.Errorf("segment: segment_pool_id is %s, not a pair", b.kindName(val))
			}
			for j := range 2 {
				if seg.PoolID[j], err = b.int(items[j], key); err != nil {
					break
				}
			}
			seg.HasPoolID = true
		case "is_expandable":
			seg.IsExpandable = val.Kind == pickle.Bool && val.X != 0
		case "frames":
			seg.Stack, err = b.stackOf(val, key)
		case "blocks":
			if val.Kind == pickle.Handle && val.Sub == hBlocks {
				seg.FirstBlock = int32(uint32(val.X))
				seg.NumBlocks = int32(val.X >> 32)
				haveBlocks = true
				continue
			}
			var ok bool
			blockItems, ok = b.items(val)
			if !ok {
				err = fmt.Errorf("blocks is %s, not a list", b.kindName(val))
			}
			haveBlocks = true
		default:
			var kvj KeyValue
			kvj, err = b.keyValue(kv[i], val)
			extra = append(extra, kvj)
		}
		if err != nil {
			return v, b.finishErr("segment", err)
		}
	}
	if seg.NumBlocks == 0 {
		seg.FirstBlock = int32(len(b.blocks))
	}
	if haveBlocks && len(blockItems) > 0 {
		contiguous := true
		for i, it := range blockItems {
			if it.Kind != pickle.Handle || it.Sub != hBlock {
				return v, d.Errorf("segment: blocks[%d] is %s, not a block dict", i, b.kindName(it))
			}
			if it.X != blockItems[0].X+uint64(i) {
				contiguous = false
			}
		}
		if contiguous {
			seg.FirstBlock = int32(blockItems[0].X)
		} else {
			for _, it := range blockItems {
				b.blocks = append(b.roomForBlocks(), b.blocks[it.X])
			}
			seg.FirstBlock = int32(len(b.blocks) - len(blockItems))
		}
		seg.NumBlocks = int32(len(blockItems))
	}
	if !haveAlloc || !haveActive || !haveReq {
		var alloc, active, req uint64
		for _, bl := range b.blocks[seg.FirstBlock : seg.FirstBlock+seg.NumBlocks] {
			if bl.State == BlockActiveAllocated {
				alloc += bl.Size
			}
			if bl.State != BlockInactive {
				active += bl.Size
				req += bl.RequestedSize
			}
		}
		if !haveAlloc {
			seg.AllocatedSize = alloc
		}
		if !haveActive {
			seg.ActiveSize = active
		}
		if !haveReq {
			seg.RequestedSize = req
		}
	}
	if extra != nil {
		seg.Extra = b.addExtra(extra)
	}
	b.segs = append(b.roomForSegs(), seg)
	return pickle.MakeHandle(hSegment, uint64(len(b.segs)-1)), nil
}

// finishErr wraps a field error with the offset of the opcode at hand.
func (b *builder) finishErr(what string, err error) error {
	return b.d.Errorf("%s: %v", what, err)
}

// block types a block dict (with its legacy history, if any).
func (b *builder) block(v pickle.Value, kv []pickle.Value) (pickle.Value, error) {
	d := b.d
	s := b.s
	var bl Block
	var extra KeyValues
	haveFrames := false
	var history []pickle.Value
	haveHistory := false
	for i := 0; i+1 < len(kv); i += 2 {
		key, _ := d.Str(kv[i])
		val := kv[i+1]
		var err error
		switch key {
		case "address":
			bl.RawAddress, err = b.uint(val, key)
			bl.HasAddress = true
		case "size":
			bl.Size, err = b.uint(val, key)
		case "requested_size":
			bl.RequestedSize, err = b.uint(val, key)
			bl.HasRequestedSize = true
		case "state":
			var st string
			st, err = b.str(val, key)
			switch st {
			case "active_allocated":
				bl.State = BlockActiveAllocated
			case "active_pending_free", "active_awaiting_free":
				bl.State = BlockActivePendingFree
			case "inactive":
				bl.State = BlockInactive
			default:
				if err == nil {
					extra = append(extra, KeyValue{Key: key, JSON: string(pickle.AppendJSONString(nil, st))})
				}
			}
		case "frames":
			bl.Stack, err = b.stackOf(val, key)
			haveFrames = true
		case "history":
			var ok bool
			history, ok = b.items(val)
			if !ok {
				err = fmt.Errorf("history is %s, not a list", b.kindName(val))
			}
			haveHistory = true
		default:
			var kvj KeyValue
			kvj, err = b.keyValue(kv[i], val)
			extra = append(extra, kvj)
		}
		if err != nil {
			return v, b.finishErr("block", err)
		}
	}
	if haveHistory {
		bl.FirstHistory = int32(len(s.History))
		for hi, hv := range history {
			if hv.Kind != pickle.Dict {
				return v, d.Errorf("block: history[%d] is %s, not a dict", hi, b.kindName(hv))
			}
			var h HistoryItem
			hkv := d.Items(hv)
			for i := 0; i+1 < len(hkv); i += 2 {
				key, _ := d.Str(hkv[i])
				val := hkv[i+1]
				var err error
				switch key {
				case "addr":
					h.Addr, err = b.uint(val, key)
				case "real_size":
					h.RealSize, err = b.uint(val, key)
				case "frames":
					h.Stack, err = b.stackOf(val, key)
					h.HasStack = true
				}
				if err != nil {
					return v, b.finishErr(fmt.Sprintf("block: history[%d]", hi), err)
				}
			}
			s.History = append(s.History, h)
		}
		bl.NumHistory = int32(len(s.History)) - bl.FirstHistory
	}
	// Legacy blocks (spec A.3, memory_viz's annotate_snapshot): frames
	// and requested size come from the first history item.
	if !haveFrames {
		if bl.NumHistory > 0 {
			h := s.History[bl.FirstHistory]
			bl.Stack = h.Stack
			if bl.RequestedSize == 0 {
				bl.RequestedSize = h.RealSize
			}
		} else if bl.RequestedSize == 0 {
			bl.RequestedSize = bl.Size
		}
	}
	if extra != nil {
		bl.Extra = b.addExtra(extra)
	}
	if bl.State == BlockActiveAllocated {
		b.allocated++
	}
	b.blocks = append(b.roomForBlocks(), bl)
	return pickle.MakeHandle(hBlock, uint64(len(b.blocks)-1)), nil
}

func (b *builder) settings(v pickle.Value) error {
	d := b.d
	if v.Kind != pickle.Dict {
		if v.Kind == pickle.None {
			return nil
		}
		return fmt.Errorf("allocator_settings is %s, not a dict", b.kindName(v))
	}
	as := &AllocatorSettings{MaxSplitSize: -1}
	kv := d.Items(v)
	for i := 0; i+1 < len(kv); i += 2 {
		kvj, err := b.keyValue(kv[i], kv[i+1])
		if err != nil {
			return err
		}
		as.Raw = append(as.Raw, kvj)
		key, _ := d.Str(kv[i])
		val := kv[i+1]
		switch key {
		case "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF":
			if s, ok := d.Str(val); ok && (as.Conf == "" || key == "PYTORCH_CUDA_ALLOC_CONF") {
				as.Conf = s
			}
		case "max_split_size":
			if x, err := b.int(val, "allocator_settings.max_split_size"); err == nil {
				as.MaxSplitSize = x
			}
		case "garbage_collection_threshold":
			if f, ok := val.Float(); ok {
				as.GarbageCollectionThreshold = f
			}
		case "expandable_segments":
			as.ExpandableSegments = val.Kind == pickle.Bool && val.X != 0
		case "roundup_power2_divisions":
			if val.Kind == pickle.Dict {
				rkv := d.Items(val)
				for j := 0; j+1 < len(rkv); j += 2 {
					k, kerr := b.toJSON(rkv[j])
					if s, ok := d.Str(rkv[j]); ok {
						k, kerr = s, nil
					}
					n, err := b.int(rkv[j+1], "roundup_power2_divisions value")
					if kerr != nil || err != nil {
						continue
					}
					as.RoundupPower2Divisions = append(as.RoundupPower2Divisions, RoundupDivision{IntervalMiB: k, Divisions: n})
				}
			}
		}
	}
	b.s.AllocatorSettings = as
	return nil
}

func (b *builder) annotations(v pickle.Value) error {
	d := b.d
	b.s.HasAnnotationsKey = true
	items, ok := b.items(v)
	if !ok {
		if v.Kind == pickle.None {
			return nil
		}
		return fmt.Errorf("external_annotations is %s, not a list", b.kindName(v))
	}
	b.s.Annotations = make([]Annotation, 0, len(items))
	for ai, av := range items {
		if av.Kind != pickle.Dict {
			return fmt.Errorf("external_annotations[%d] is %s, not a dict", ai, b.kindName(av))
		}
		var a Annotation
		kv := d.Items(av)
		for i := 0; i+1 < len(kv); i += 2 {
			key, _ := d.Str(kv[i])
			val := kv[i+1]
			handled := true
			switch key {
			case "device":
				if x, ok := val.Int(); ok {
					a.Device = int32(x)
				} else {
					handled = false
				}
			case "time_us":
				if x, ok := val.Int(); ok {
					a.TimeUS = x
				} else {
					handled = false
				}
			case "name":
				a.Name, handled = d.Str(val)
			case "stage":
				a.Stage, handled = d.Str(val)
			default:
				handled = false
			}
			if !handled {
				kvj, err := b.keyValue(kv[i], val)
				if err != nil {
					return err
				}
				a.Extra = append(a.Extra, kvj)
			}
		}
		b.s.Annotations = append(b.s.Annotations, a)
	}
	return nil
}

// renumberStreams gives streams memory_viz's numbers: raw 0 is 0, others
// 1, 2, ... in first-seen order over device traces 0..n, then segments.
func (b *builder) renumberStreams() {
	s := b.s
	final := make([]StreamID, len(b.streamRaw))
	for i := range final {
		final[i] = -1
	}
	final[0] = 0
	s.Streams = []int64{0}
	name := func(tmp StreamID) StreamID {
		if final[tmp] < 0 {
			final[tmp] = StreamID(len(s.Streams))
			s.Streams = append(s.Streams, b.streamRaw[tmp])
		}
		return final[tmp]
	}
	// Name streams in trace order; once every stream has its final id
	// and the ids did not change, the remaining events need no rewrite
	// (the common case: a single stream, or streams first seen in the
	// same order).
	identity := true
	for t := range s.Traces {
		evs := s.Traces[t].Events
		for i := range evs {
			if !identity {
				evs[i].Stream = name(evs[i].Stream)
				continue
			}
			if len(s.Streams) == len(b.streamRaw) {
				break // every id named, all to themselves
			}
			tmp := evs[i].Stream
			evs[i].Stream = name(tmp)
			identity = evs[i].Stream == tmp
		}
	}
	for i := range s.Segments {
		s.Segments[i].Stream = name(s.Segments[i].Stream)
	}
}

// generation applies SOURCES.md's rules to a dict snapshot.
func (b *builder) generation() Generation {
	s := b.s
	legacy := false
	anyAddress := false
	for i := range s.Blocks {
		if s.Blocks[i].NumHistory > 0 {
			legacy = true
		}
		if s.Blocks[i].HasAddress {
			anyAddress = true
		}
	}
	if legacy || (len(s.Blocks) > 0 && !anyAddress) {
		return GenD1
	}
	switch {
	case b.sawUserMeta:
		return GenD7
	case b.sawCompile:
		return GenD6
	case s.HasAnnotationsKey:
		return GenD5
	case s.AllocatorSettings != nil:
		return GenD4
	case b.sawTime:
		return GenD3
	}
	for i := range s.Traces {
		if len(s.Traces[i].Events) > 0 {
			return GenD2
		}
	}
	return GenD23
}

// roomFor makes room for one more element by doubling: append grows big
// slices by only 1.25x, which for hundreds of thousands of blocks means
// allocating and copying several times their final size.
func roomFor[T any](s []T) []T {
	if len(s) < cap(s) {
		return s
	}
	n := make([]T, len(s), max(2*cap(s), 256))
	copyInPieces(n, s)
	return n
}

// roomForHint is roomFor for an array expected to hold about hint
// items in the end (0: unknown): when it must grow past a smaller
// capacity, it is allocated for all of them at once, with 1/32 to spare.
func roomForHint[T any](s []T, hint int) []T {
	if len(s) < cap(s) {
		return s
	}
	if want := hint + hint/32 + 256; hint > 0 && want > len(s) {
		n := make([]T, len(s), want)
		copyInPieces(n, s)
		return n
	}
	return roomFor(s)
}

// copyInPieces copies src into dst a quarter MiB at a time, yielding
// between pieces. A copy is a memmove, where the Go runtime cannot
// preempt a goroutine; a garbage collection that needs this goroutine's
// stack meanwhile signals it every few microseconds, and when the copy
// faults in fresh pages the signals land in memmove again and again until
// it ends. On an 80 MB snapshot that cost 12% of the decode.
func copyInPieces[T any](dst, src []T) {
	var zero T
	step := max(1, (256<<10)/int(unsafe.Sizeof(zero)))
	for i := 0; i < len(src); i += step {
		if i > 0 {
			runtime.Gosched()
		}
		copy(dst[i:], src[i:min(i+step, len(src))])
	}
}

// roomForBlocks is roomFor for the blocks, sized from the splitter's
// count of the dump's blocks when it has one (splitter.dumpHint).
func (b *builder) roomForBlocks() []Block {
	if len(b.blocks) < cap(b.blocks) {
		return b.blocks
	}
	_, n := b.split.dumpHint()
	return roomForHint(b.blocks, n)
}

// roomForSegs is roomForBlocks for the segments.
func (b *builder) roomForSegs() []Segment {
	if len(b.segs) < cap(b.segs) {
		return b.segs
	}
	n, _ := b.split.dumpHint()
	return roomForHint(b.segs, n)
}
