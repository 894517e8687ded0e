package snapshot

import (
	"fmt"
	"hash/maphash"
	"math"

	"github.com/gpumem/gpumem/internal/pickle"
)

// Handle sub-tags the builder gives finished containers.
const (
	hFrame   uint8 = iota + 1 // X = FrameID
	hStack                    // X = StackID
	hEvent                    // X = index into builder.events
	hEmpty                    // an empty list
	hSegment                  // X = index into builder.segs
	hBlock                    // X = index into builder.blocks
	hTrace                    // X = index into builder.traceRuns
	hPair                     // X = index into builder.pairs: an (int, int) tuple
	hBlocks                   // X = first block | count<<32: a list of consecutive blocks
)

// eventRun is a device trace kept as a range of builder.events.
type eventRun struct{ first, n uint64 }

// builder types containers as the pickle VM completes them: frame dicts
// become FrameIDs, frame lists StackIDs and trace-entry dicts Events, so the
// VM's memo never holds the big generic tree. Everything else (segments,
// settings, annotations: small) stays generic until assemble.
type builder struct {
	d *pickle.Decoder
	s *Snapshot

	// Interned key ids in the decoder's string table.
	kFilename, kName, kLine, kAction, kAddr, kSize, kStream, kTimeUS, kFrames,
	kCompileContext, kUserMetadata, kDeviceFree, kBlocks, kState uint32
	kAddress, kRequestedSize uint32
	// blockStates caches block state spellings by decoder string id
	// (see blockState).
	blockStates []uint8
	keyCache    [keyCacheSize]keyCacheEntry
	actionCache [keyCacheSize]actionCacheEntry
	keyGen      uint64 // the decoder's MemoRewrites when the caches were valid

	// keyKind maps the decoder string ids of trace-entry keys to kw*
	// constants (the ids are the first interned, so the table is tiny).
	keyKind    []uint8
	actions    []Action // decoder string id -> action+1 (0 = not looked up)
	frameIndex map[frameKey]FrameID
	stackIndex map[uint64]StackID
	seed       maphash.Seed
	strIDs     []StringID // decoder string id -> StringID+1 (0 = not yet)
	strIndex   map[string]StringID

	events []Event
	// kept lists the events memory_viz keeps (all but a free_completed
	// merged into the free_requested before it), decided as they are
	// decoded; lastKept is the last of them, or -1. traces turns them into
	// each trace's Viz.
	kept     []int32
	lastKept int
	// metaRuns are the events' MetaIDs as runs (Trace.MetaRuns), the
	// last one's lastMeta.
	metaRuns []MetaRun
	lastMeta MetaID
	pf       *prefaulter // faults b.events in ahead of event (may be nil)
	feed     *EventFeed  // publishes b.events as they are decoded (may be nil)
	ver      *versioner  // versions b.events as they are decoded (may be nil)
	split    *splitter   // reads a part of the entries on another core (may be nil)
	// verWanted: start ver once there are feedEvery entries.
	verWanted bool
	segs      []Segment
	blocks    []Block
	// allocated counts the blocks read in the active_allocated state: as
	// the trace starts, about how many allocations are live at its end
	// (EventFeed.Live).
	allocated int
	// openRuns maps a list being built to the run of events appended so
	// far; traceRuns holds finished ones.
	openRuns  map[pickle.Value]*eventRun
	traceRuns []eventRun
	pairs     [][2]int64
	// streamTmp numbers raw streams in file order; assemble renumbers them
	// in memory_viz's order.
	streamTmp map[int64]StreamID
	streamRaw []int64
	lastRaw   int64 // one-entry cache: most entries share a stream
	lastTmp   StreamID

	sawTime, sawCompile, sawUserMeta bool
	// untimed: an entry without time_us was appended (see
	// Snapshot.TraceTimed).
	untimed        bool
	tooManyStreams bool // more than MaxStreams streams
}

type frameKey struct {
	file, name uint32
	line       int64
}

func newBuilder(s *Snapshot, sizeHint int64) *builder {
	b := &builder{
		s:          s,
		frameIndex: map[frameKey]FrameID{},
		stackIndex: map[uint64]StackID{},
		seed:       maphash.MakeSeed(),
		strIndex:   map[string]StringID{"": 0},
		streamTmp:  map[int64]StreamID{0: 0},
		streamRaw:  []int64{0},
		openRuns:   map[pickle.Value]*eventRun{},
		lastKept:   -1,
	}
	s.Strings = []string{""}
	s.Extras = []KeyValues{nil}
	s.Stacks.Offsets = []int32{0, 0}
	if sizeHint > 0 {
		// A trace entry takes at least ~50 bytes of pickle. Reserving for
		// that many costs address space, not resident memory (untouched
		// pages of a fresh allocation are never faulted in), and avoids
		// the copies of repeated growth.
		n := sizeHint / 64
		if n > 1<<28 {
			n = 1 << 28
		}
		b.events = make([]Event, 0, n)
		b.kept = make([]int32, 0, n)
		b.pf = startPrefault(b.events)
	}
	return b
}

// startFeed hands a new EventFeed to opt.Feed when it is set, and starts
// the versioner when the decode annotates in one pass.
func (b *builder) startFeed(opt *Options) {
	b.wantVersions(opt)
	if opt != nil && opt.Feed != nil {
		b.feed = newEventFeed()
		b.feed.expect = cap(b.events)
		opt.Feed(b.feed)
	}
}

func (b *builder) attach(d *pickle.Decoder) {
	b.d = d
	b.kFilename = d.Intern("filename")
	b.kName = d.Intern("name")
	b.kLine = d.Intern("line")
	b.kAction = d.Intern("action")
	b.kAddr = d.Intern("addr")
	b.kSize = d.Intern("size")
	b.kStream = d.Intern("stream")
	b.kTimeUS = d.Intern("time_us")
	b.kFrames = d.Intern("frames")
	b.kCompileContext = d.Intern("compile_context")
	b.kUserMetadata = d.Intern("user_metadata")
	b.kDeviceFree = d.Intern("device_free")
	b.kBlocks = d.Intern("blocks")
	b.kState = d.Intern("state")
	b.kAddress = d.Intern("address")
	b.kRequestedSize = d.Intern("requested_size")
	for kw, id := range map[uint8]uint32{kwAction: b.kAction, kwAddr: b.kAddr, kwSize: b.kSize,
		kwStream: b.kStream, kwTimeUS: b.kTimeUS, kwFrames: b.kFrames, kwCompileContext: b.kCompileContext,
		kwUserMetadata: b.kUserMetadata, kwDeviceFree: b.kDeviceFree,
		kwAddress: b.kAddress, kwRequestedSize: b.kRequestedSize, kwState: b.kState} {
		for int(id) >= len(b.keyKind) {
			b.keyKind = append(b.keyKind, kwOther)
		}
		b.keyKind[id] = kw
	}
}

// Trace-entry keys, as builder.keyKind gives them.
const (
	kwOther uint8 = iota
	kwAction
	kwAddr
	kwSize
	kwStream
	kwTimeUS
	kwFrames
	kwCompileContext
	kwUserMetadata
	kwDeviceFree
	// Block keys (size and frames are shared with trace entries).
	kwAddress
	kwRequestedSize
	kwState
)

// Finish implements pickle.Finisher.
func (b *builder) Finish(d *pickle.Decoder, v pickle.Value) (pickle.Value, error) {
	switch v.Kind {
	case pickle.Dict:
		return b.dict(v, d.Items(v))
	case pickle.Object:
		// PyTorch's _snapshot() is built of dicts, lists, tuples, str,
		// int, float, bool and None only (memory_viz's unpickler throws on
		// anything else), so an instance of a class here means the file is
		// not a memory snapshot. Keeping it as {"__class__": ...} JSON would
		// also not round-trip: WritePickle has no class to write it back
		// as, and the plain dict it writes instead has keys ("state") that
		// type it as something else when read again.
		cls, _, _, _, _ := d.ObjectParts(v)
		what := "an object built from " + b.kindName(cls)
		if name, ok := d.GlobalName(cls); ok {
			what = "an instance of " + name
		}
		return v, d.Errorf("Python object: %s, which a PyTorch memory snapshot never holds", what)
	case pickle.Tuple:
		// segment_pool_id: keep (int, int) pairs out of the container table.
		if it := d.Items(v); len(it) == 2 && it[0].Kind == pickle.Int && it[1].Kind == pickle.Int {
			b.pairs = append(b.pairs, [2]int64{int64(it[0].X), int64(it[1].X)})
			return pickle.MakeHandle(hPair, uint64(len(b.pairs)-1)), nil
		}
	case pickle.List:
		if r, ok := b.openRuns[v]; ok {
			delete(b.openRuns, v)
			b.traceRuns = append(b.traceRuns, *r)
			return pickle.MakeHandle(hTrace, uint64(len(b.traceRuns)-1)), nil
		}
		items := d.Items(v)
		if len(items) == 0 {
			return pickle.MakeHandle(hEmpty, 0), nil
		}
		if items[0].Kind == pickle.Handle && items[0].Sub == hBlock && len(items) < 1<<31 {
			first := items[0].X
			for i, it := range items {
				if it.Kind != pickle.Handle || it.Sub != hBlock || it.X != first+uint64(i) {
					return v, nil
				}
			}
			return pickle.MakeHandle(hBlocks, first|uint64(len(items))<<32), nil
		}
		for _, it := range items {
			if it.Kind != pickle.Handle || it.Sub != hFrame {
				return v, nil
			}
		}
		return pickle.MakeHandle(hStack, uint64(b.internStack(items))), nil
	}
	return v, nil
}

// dict types a dict by its keys; v is returned when it stays generic.
func (b *builder) dict(v pickle.Value, kv []pickle.Value) (pickle.Value, error) {
	for i := 0; i < len(kv); i += 2 {
		if kv[i].Kind != pickle.String {
			return v, nil
		}
		switch uint32(kv[i].X) {
		case b.kAction:
			return b.event(kv)
		case b.kFilename:
			return b.frame(v, kv)
		case b.kBlocks:
			return b.segment(v, kv)
		case b.kState:
			return b.block(v, kv)
		}
	}
	return v, nil
}

// notTyped stands for the container FinishDict has not built: dict returns
// it when a dict stays generic.
var notTyped = pickle.Value{Kind: pickle.Dict, X: ^uint64(0)}

// FinishDict implements pickle.DictFinisher: the same typing as Finish,
// from the pairs of a dict the decoder read without building it.
func (b *builder) FinishDict(d *pickle.Decoder, kv []pickle.Value) (pickle.Value, bool, error) {
	v, err := b.dict(notTyped, kv)
	if err != nil {
		return v, false, err
	}
	return v, v != notTyped, nil
}

// Append implements pickle.Appender: trace entries appended to a list are
// kept as a run of builder.events instead of one 16-byte value each.
func (b *builder) Append(d *pickle.Decoder, list pickle.Value, items []pickle.Value) bool {
	if len(items) == 0 {
		return true
	}
	for _, it := range items {
		if it.Kind != pickle.Handle || it.Sub != hEvent {
			b.spillRun(list)
			return false
		}
	}
	r, ok := b.openRuns[list]
	if !ok {
		if d.Len(list) != 0 {
			return false
		}
		r = &eventRun{first: items[0].X}
		b.openRuns[list] = r
	}
	for i, it := range items {
		if it.X != r.first+r.n+uint64(i) {
			b.spillRun(list)
			return false
		}
	}
	r.n += uint64(len(items))
	return true
}

// spillRun turns an open run back into ordinary list items.
func (b *builder) spillRun(list pickle.Value) {
	r, ok := b.openRuns[list]
	if !ok {
		return
	}
	delete(b.openRuns, list)
	for i := uint64(0); i < r.n; i++ {
		_ = b.d.Add(list, pickle.MakeHandle(hEvent, r.first+i))
	}
}

func (b *builder) frame(v pickle.Value, kv []pickle.Value) (pickle.Value, error) {
	d := b.d
	var fileID, nameID uint32
	var haveFile, haveName bool
	var line int64
	var extra KeyValues
	for i := 0; i+1 < len(kv); i += 2 {
		key, val := uint32(kv[i].X), kv[i+1]
		switch key {
		case b.kFilename:
			fileID, haveFile = d.StrID(val)
		case b.kName:
			nameID, haveName = d.StrID(val)
		case b.kLine:
			l, ok := val.Int()
			if !ok {
				// C++ frames can carry size_t(-1); keep its bits (the
				// writer emits negative lines as unsigned again).
				u, uok := d.Uint64(val)
				if !uok {
					return v, d.Errorf("frame: line is %s, not int", b.kindName(val))
				}
				l = int64(u)
			}
			line = l
		default:
			kvj, err := b.keyValue(kv[i], val)
			if err != nil {
				return v, err
			}
			extra = append(extra, kvj)
		}
	}
	if !haveFile || !haveName {
		// Not shaped like a frame; leave it generic.
		return v, nil
	}
	if extra == nil {
		k := frameKey{fileID, nameID, line}
		if id, ok := b.frameIndex[k]; ok {
			return pickle.MakeHandle(hFrame, uint64(id)), nil
		}
		id := FrameID(len(b.s.Frames))
		b.frameIndex[k] = id
		f, _ := d.Str(pickle.Value{Kind: pickle.String, X: uint64(fileID)})
		n, _ := d.Str(pickle.Value{Kind: pickle.String, X: uint64(nameID)})
		b.s.Frames = append(b.s.Frames, Frame{Filename: f, Name: n, Line: line})
		return pickle.MakeHandle(hFrame, uint64(id)), nil
	}
	id := FrameID(len(b.s.Frames))
	f, _ := d.Str(pickle.Value{Kind: pickle.String, X: uint64(fileID)})
	n, _ := d.Str(pickle.Value{Kind: pickle.String, X: uint64(nameID)})
	b.s.Frames = append(b.s.Frames, Frame{Filename: f, Name: n, Line: line, Extra: b.addExtra(extra)})
	return pickle.MakeHandle(hFrame, uint64(id)), nil
}

// internStack adds a stack of frame handles, deduplicated by content.
func (b *builder) internStack(items []pickle.Value) StackID {
	var h maphash.Hash
	h.SetSeed(b.seed)
	var buf [4]byte
	for _, it := range items {
		x := uint32(it.X)
		buf[0], buf[1], buf[2], buf[3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
		h.Write(buf[:])
	}
	key := h.Sum64()
	t := &b.s.Stacks
	for {
		id, ok := b.stackIndex[key]
		if !ok {
			break
		}
		fr := t.FrameIDs[t.Offsets[id]:t.Offsets[id+1]]
		if len(fr) == len(items) {
			same := true
			for i, it := range items {
				if fr[i] != FrameID(it.X) {
					same = false
					break
				}
			}
			if same {
				return id
			}
		}
		key++ // probe on collision
	}
	for _, it := range items {
		t.FrameIDs = append(t.FrameIDs, FrameID(it.X))
	}
	t.Offsets = append(t.Offsets, int32(len(t.FrameIDs)))
	id := StackID(len(t.Offsets) - 2)
	b.stackIndex[key] = id
	return id
}

// stackOf converts a frames value to a StackID.
func (b *builder) stackOf(v pickle.Value, what string) (StackID, error) {
	if v.Kind == pickle.Handle {
		switch v.Sub {
		case hStack:
			return StackID(v.X), nil
		case hEmpty:
			return NoStack, nil
		}
	}
	if v.Kind == pickle.None {
		return NoStack, nil
	}
	return NoStack, fmt.Errorf("%s is %s, not a list of frames", what, b.kindName(v))
}

func (b *builder) kindName(v pickle.Value) string {
	if v.Kind == pickle.Handle {
		switch v.Sub {
		case hFrame:
			return "a frame"
		case hStack:
			return "a frame list"
		case hEvent:
			return "a trace entry"
		case hEmpty:
			return "an empty list"
		case hSegment:
			return "a segment"
		case hBlock:
			return "a block"
		case hTrace:
			return "a list of trace entries"
		case hBlocks:
			return "a list of blocks"
		case hPair:
			return "a pair"
		}
	}
	return v.Kind.String()
}

func (b *builder) event(kv []pickle.Value) (pickle.Value, error) {
	d := b.d
	var e Event
	var meta EventMeta
	var extra KeyValues
	for i := 0; i+1 < len(kv); i += 2 {
		key, val := uint32(kv[i].X), kv[i+1]
		kw := kwOther
		if kv[i].Kind == pickle.String && key < uint32(len(b.keyKind)) {
			kw = b.keyKind[key]
		}
		switch kw {
		case kwAction:
			id, ok := d.StrID(val)
			if !ok {
				return val, d.Errorf("trace entry: action is %s, not str", b.kindName(val))
			}
			var a Action
			if int(id) < len(b.actions) && b.actions[id] != 0 {
				a = b.actions[id] - 1
			} else {
				a = b.lookupAction(d, val)
			}
			if a == ActionUnknown {
				// Keep the unknown spelling so nothing is lost.
				kvj, err := b.keyValue(kv[i], val)
				if err != nil {
					return val, err
				}
				extra = append(extra, kvj)
			}
			e.Action = a
		case kwAddr, kwDeviceFree:
			if kw == kwDeviceFree && hasKey(kv, b.kAddr) {
				// Both present (never written by PyTorch): addr wins and
				// device_free is kept verbatim.
				kvj, err := b.keyValue(kv[i], val)
				if err != nil {
					return val, err
				}
				extra = append(extra, kvj)
				continue
			}
			if val.Kind == pickle.None {
				continue
			}
			if val.Kind == pickle.Int && int64(val.X) >= 0 {
				e.Addr = val.X // the common case, without a call
				continue
			}
			u, ok := d.Uint64(val)
			if !ok {
				return val, d.Errorf("trace entry: %s is %s, not a non-negative int", b.keyName(key), b.kindName(val))
			}
			e.Addr = u
		case kwSize:
			if val.Kind == pickle.Int && int64(val.X) >= 0 {
				e.Size = val.X
				continue
			}
			u, ok := d.Uint64(val)
			if !ok {
				return val, d.Errorf("trace entry: size is %s, not a non-negative int", b.kindName(val))
			}
			e.Size = u
		case kwStream:
			s, ok := val.Int()
			if !ok {
				if u, uok := d.Uint64(val); uok {
					s, ok = int64(u), true
				}
			}
			if !ok {
				return val, d.Errorf("trace entry: stream is %s, not int", b.kindName(val))
			}
			e.Stream = b.tmpStream(s)
		case kwTimeUS:
			t, ok := val.Int()
			if !ok {
				if f, fok := val.Float(); fok {
					t, ok = int64(f), true
				}
			}
			if !ok {
				return val, d.Errorf("trace entry: time_us is %s, not int", b.kindName(val))
			}
			e.TimeUS = t
			e.Flags |= FlagHasTime
			b.sawTime = true
		case kwFrames:
			if val.Kind == pickle.Handle && val.Sub == hStack {
				e.Stack = StackID(val.X)
			} else {
				st, err := b.stackOf(val, "frames")
				if err != nil {
					return val, b.finishErr("trace entry", err)
				}
				e.Stack = st
			}
			e.Flags |= FlagHasFrames
		case kwCompileContext:
			id, err := b.stringValue(val, "compile_context")
			if err != nil {
				return val, err
			}
			meta.CompileContext = id
			b.sawCompile = true
		case kwUserMetadata:
			id, err := b.stringValue(val, "user_metadata")
			if err != nil {
				return val, err
			}
			meta.UserMetadata = id
			b.sawUserMeta = true
		default:
			kvj, err := b.keyValue(kv[i], val)
			if err != nil {
				return val, err
			}
			extra = append(extra, kvj)
		}
	}
	if extra != nil {
		meta.Extra = b.addExtra(extra)
	}
	return b.appendEvent(&e, b.s.AddMeta(meta)), nil
}

func hasKey(kv []pickle.Value, k uint32) bool {
	for i := 0; i < len(kv); i += 2 {
		if kv[i].Kind == pickle.String && uint32(kv[i].X) == k {
			return true
		}
	}
	return false
}

func (b *builder) keyName(id uint32) string {
	s, _ := b.d.Str(pickle.Value{Kind: pickle.String, X: uint64(id)})
	return s
}

func (b *builder) tmpStream(raw int64) StreamID {
	if raw == b.lastRaw {
		return b.lastTmp
	}
	id, ok := b.streamTmp[raw]
	if !ok {
		if len(b.streamRaw) > MaxStreams {
			b.tooManyStreams = true // reported by assemble
			return 0
		}
		id = StreamID(len(b.streamRaw))
		b.streamTmp[raw] = id
		b.streamRaw = append(b.streamRaw, raw)
	}
	b.lastRaw, b.lastTmp = raw, id
	return id
}

// stringValue interns a str value into Snapshot.Strings.
func (b *builder) stringValue(v pickle.Value, what string) (StringID, error) {
	if v.Kind == pickle.None {
		return 0, nil
	}
	id, ok := b.d.StrID(v)
	if !ok {
		return 0, b.d.Errorf("%s is %s, not str", what, b.kindName(v))
	}
	if int(id) < len(b.strIDs) && b.strIDs[id] != 0 {
		return b.strIDs[id] - 1, nil
	}
	s, _ := b.d.Str(v)
	sid := b.internString(s)
	for int(id) >= len(b.strIDs) {
		b.strIDs = append(b.strIDs, 0)
	}
	b.strIDs[id] = sid + 1
	return sid, nil
}

func (b *builder) internString(s string) StringID {
	if id, ok := b.strIndex[s]; ok {
		return id
	}
	id := StringID(len(b.s.Strings))
	b.s.Strings = append(b.s.Strings, s)
	b.strIndex[s] = id
	return id
}

func (b *builder) addExtra(kv KeyValues) ExtraID {
	b.s.Extras = append(b.s.Extras, kv)
	return ExtraID(len(b.s.Extras) - 1)
}

// keyValue renders an uninterpreted key and value.
func (b *builder) keyValue(k, v pickle.Value) (KeyValue, error) {
	key, ok := b.d.Str(k)
	if !ok {
		kj, err := b.d.AppendJSON(nil, k, b.renderHandle)
		if err != nil {
			return KeyValue{}, b.d.Errorf("%v", err)
		}
		key = string(kj)
	}
	j, err := b.d.AppendJSON(nil, v, b.renderHandle)
	if err != nil {
		return KeyValue{}, b.d.Errorf("value of %q: %v", key, err)
	}
	return KeyValue{Key: key, JSON: string(j)}, nil
}

// renderHandle writes a typed handle back as the JSON of what it was.
func (b *builder) renderHandle(buf []byte, v pickle.Value) []byte {
	switch v.Sub {
	case hFrame:
		return appendFrameJSON(buf, b.s, FrameID(v.X))
	case hStack:
		buf = append(buf, '[')
		for i, f := range b.s.Stacks.Frames(StackID(v.X)) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendFrameJSON(buf, b.s, f)
		}
		return append(buf, ']')
	case hEmpty:
		return append(buf, "[]"...)
	case hBlocks:
		return append(buf, "[]"...)
	case hPair:
		p := b.pairs[v.X]
		return fmt.Appendf(buf, "[%d,%d]", p[0], p[1])
	case hTrace:
		return append(buf, "[]"...)
	}
	return append(buf, "null"...)
}

func appendFrameJSON(buf []byte, s *Snapshot, id FrameID) []byte {
	if int(id) >= len(s.Frames) || id < 0 {
		return append(buf, "null"...)
	}
	f := &s.Frames[id]
	buf = append(buf, `{"filename":`...)
	buf = pickle.AppendJSONString(buf, f.Filename)
	buf = append(buf, `,"line":`...)
	buf = fmt.Appendf(buf, "%d", f.Line)
	buf = append(buf, `,"name":`...)
	buf = pickle.AppendJSONString(buf, f.Name)
	if f.Extra > 0 && int(f.Extra) < len(s.Extras) {
		for _, kv := range s.Extras[f.Extra] {
			buf = append(buf, ',')
			buf = pickle.AppendJSONString(buf, kv.Key)
			buf = append(buf, ':')
			buf = append(buf, kv.JSON...)
		}
	}
	return append(buf, '}')
}

// toJSON renders any value for Extra.
func (b *builder) toJSON(v pickle.Value) (string, error) {
	j, err := b.d.AppendJSON(nil, v, b.renderHandle)
	if err != nil {
		return "", err
	}
	return string(j), nil
}

// items returns a list's items (nil for the empty-list handle).
func (b *builder) items(v pickle.Value) ([]pickle.Value, bool) {
	switch v.Kind {
	case pickle.List, pickle.Tuple:
		return b.d.Items(v), true
	case pickle.Handle:
		if v.Sub == hEmpty {
			return nil, true
		}
	}
	return nil, false
}

func (b *builder) uint(v pickle.Value, what string) (uint64, error) {
	if u, ok := b.d.Uint64(v); ok {
		return u, nil
	}
	if f, ok := v.Float(); ok && v.Kind == pickle.Float && f >= 0 && f < math.MaxUint64 && f == math.Trunc(f) {
		return uint64(f), nil
	}
	return 0, fmt.Errorf("%s is %s, not a non-negative int", what, b.kindName(v))
}

func (b *builder) int(v pickle.Value, what string) (int64, error) {
	if i, ok := v.Int(); ok {
		return i, nil
	}
	if u, ok := b.d.Uint64(v); ok {
		return int64(u), nil
	}
	if f, ok := v.Float(); ok && v.Kind == pickle.Float && f == math.Trunc(f) {
		return int64(f), nil
	}
	return 0, fmt.Errorf("%s is %s, not int", what, b.kindName(v))
}

func (b *builder) str(v pickle.Value, what string) (string, error) {
	if s, ok := b.d.Str(v); ok {
		return s, nil
	}
	return "", fmt.Errorf("%s is %s, not str", what, b.kindName(v))
}
