package snapshot

import (
	"encoding/binary"
	"unsafe"

	"github.com/gpumem/gpumem/internal/pickle"
)

// Pickle opcodes ReadEntry understands.
const (
	opBinGet     = 'h'
	opLongBinGet = 'j'
	opBinInt1    = 'K'
	opBinInt2    = 'M'
	opBinInt     = 'J'
	opLong1      = 0x8a
	opNone       = 'N'
	opSetItems   = 'u'
)

// notEntryKeys are the kw* bits of keys ReadEntry leaves to event.
const notEntryKeys = 1<<kwOther | 1<<kwDeviceFree | 1<<kwAddress | 1<<kwRequestedSize | 1<<kwState

// blockKeys are the kw* bits of the keys readBlock reads.
const blockKeys = 1<<kwAddress | 1<<kwSize | 1<<kwRequestedSize | 1<<kwState | 1<<kwFrames

// keyCacheSize is the number of memo indices of keys ReadEntry remembers.
const keyCacheSize = 64

// keyCacheEntry remembers the kw* of the str memoized at idx-1 (0: empty),
// valid while the decoder's MemoRewrites stays at builder.keyGen: keys are
// a handful of memo entries read millions of times.
type keyCacheEntry struct {
	idx uint64
	kw  uint8
}

// actionCacheEntry remembers the action of the str memoized at idx-1,
// valid as keyCacheEntry is.
type actionCacheEntry struct {
	idx    uint64
	action Action
}

// noEntryReader turns ReadEntry off, so that tests can compare it with the
// ordinary path.
var noEntryReader = false

// ReadEntry implements pickle.EntryReader for blocks (see readBlock) and
// for trace entries of the usual shape: memoized keys (each at most once)
// among action, addr, size, stream, time_us, frames, compile_context and
// user_metadata; small ints, None and memoized strings and stacks as
// values. It gives exactly what event gives for the same pairs; anything
// else (first occurrences of strings, unknown keys or actions, floats, odd
// kinds) is left to the ordinary path.
func (b *builder) ReadEntry(d *pickle.Decoder, buf []byte, p int, self int64) (pickle.Value, int, bool) {
	if noEntryReader {
		return pickle.Value{}, 0, false
	}
	if g := d.MemoRewrites(); g != b.keyGen {
		b.keyCache, b.keyGen = [keyCacheSize]keyCacheEntry{}, g
		b.actionCache = [keyCacheSize]actionCacheEntry{}
	}
	start := p
	var e Event
	var seen uint16         // kw* bits of the keys read
	var stream int64        // raw stream, when seen
	var cc, um pickle.Value // compile_context, user_metadata
	umFirst := false
	for {
		if p >= len(buf) {
			return pickle.Value{}, 0, false
		}
		// The key: a memoized str.
		var i uint64
		switch buf[p] {
		case opBinGet:
			if p+1 >= len(buf) {
				return pickle.Value{}, 0, false
			}
			i = uint64(buf[p+1])
			p += 2
		case opLongBinGet:
			if p+4 >= len(buf) {
				return pickle.Value{}, 0, false
			}
			i = uint64(binary.LittleEndian.Uint32(buf[p+1 : p+5]))
			p += 5
		case opSetItems:
			return b.commitEntry(d, &e, seen, stream, cc, um, umFirst, p+1)
		default:
			return pickle.Value{}, 0, false
		}
		if int64(i) == self {
			return pickle.Value{}, 0, false
		}
		var kw uint8
		if c := &b.keyCache[i%keyCacheSize]; c.idx == i+1 {
			kw = c.kw
		} else {
			k, ok := d.MemoStr(i)
			if !ok || k >= uint32(len(b.keyKind)) {
				return pickle.Value{}, 0, false
			}
			kw = b.keyKind[k]
			*c = keyCacheEntry{idx: i + 1, kw: kw}
		}
		bit := uint16(1) << kw
		if (seen|notEntryKeys)&bit != 0 {
			if seen == 0 && kw == kwAddress {
				return b.readBlock(d, buf, start, self)
			}
			return pickle.Value{}, 0, false // a key seen before, or not for ReadEntry
		}
		seen |= bit

		// The value.
		if p >= len(buf) {
			return pickle.Value{}, 0, false
		}
		var val pickle.Value
		var valIdx uint64 // memo index+1 of a memoized action
		switch buf[p] {
		case opBinGet, opLongBinGet:
			if buf[p] == opBinGet {
				if p+1 >= len(buf) {
					return pickle.Value{}, 0, false
				}
				i = uint64(buf[p+1])
				p += 2
			} else {
				if p+4 >= len(buf) {
					return pickle.Value{}, 0, false
				}
				i = uint64(binary.LittleEndian.Uint32(buf[p+1 : p+5]))
				p += 5
			}
			if int64(i) == self {
				return pickle.Value{}, 0, false
			}
			if kw == kwAction {
				if c := &b.actionCache[i%keyCacheSize]; c.idx == i+1 {
					e.Action = c.action
					continue
				}
				valIdx = i + 1
			}
			var ok bool
			if val, ok = d.MemoPlain(i); !ok {
				return pickle.Value{}, 0, false
			}
		case opBinInt1:
			if p+1 >= len(buf) {
				return pickle.Value{}, 0, false
			}
			val = pickle.Value{Kind: pickle.Int, X: uint64(buf[p+1])}
			p += 2
		case opBinInt2:
			if p+2 >= len(buf) {
				return pickle.Value{}, 0, false
			}
			val = pickle.Value{Kind: pickle.Int, X: uint64(binary.LittleEndian.Uint16(buf[p+1 : p+3]))}
			p += 3
		case opBinInt:
			if p+4 >= len(buf) {
				return pickle.Value{}, 0, false
			}
			val = pickle.Value{Kind: pickle.Int, X: uint64(int64(int32(binary.LittleEndian.Uint32(buf[p+1 : p+5]))))}
			p += 5
		case opLong1:
			if p+10 > len(buf) {
				return pickle.Value{}, 0, false
			}
			n := int(buf[p+1])
			if n > 8 {
				return pickle.Value{}, 0, false
			}
			var x int64
			if n > 0 {
				// Load 8 bytes and keep the low n, sign-extended.
				sh := uint(64 - 8*n)
				x = int64(binary.LittleEndian.Uint64(buf[p+2:p+10])<<sh) >> sh
			}
			val = pickle.Value{Kind: pickle.Int, X: uint64(x)}
			p += 2 + n
		case opNone:
			val = pickle.Value{Kind: pickle.None}
			p++
		default:
			return pickle.Value{}, 0, false
		}

		switch kw {
		case kwAction:
			if val.Kind != pickle.String {
				return pickle.Value{}, 0, false
			}
			id := uint32(val.X)
			var a Action
			if int(id) < len(b.actions) && b.actions[id] != 0 {
				a = b.actions[id] - 1
			} else {
				a = b.lookupAction(d, val)
			}
			if a == ActionUnknown {
				return pickle.Value{}, 0, false
			}
			e.Action = a
			if valIdx != 0 {
				b.actionCache[(valIdx-1)%keyCacheSize] = actionCacheEntry{idx: valIdx, action: a}
			}
		case kwAddr:
			if val.Kind == pickle.None {
				continue
			}
			if val.Kind != pickle.Int || int64(val.X) < 0 {
				return pickle.Value{}, 0, false
			}
			e.Addr = val.X
		case kwSize:
			if val.Kind != pickle.Int || int64(val.X) < 0 {
				return pickle.Value{}, 0, false
			}
			e.Size = val.X
		case kwStream:
			s, ok := val.Int()
			if !ok {
				return pickle.Value{}, 0, false
			}
			stream = s
		case kwTimeUS:
			t, ok := val.Int()
			if !ok {
				return pickle.Value{}, 0, false
			}
			e.TimeUS = t
			e.Flags |= FlagHasTime
		case kwFrames:
			switch {
			case val.Kind == pickle.Handle && val.Sub == hStack:
				e.Stack = StackID(val.X)
			case val.Kind == pickle.Handle && val.Sub == hEmpty, val.Kind == pickle.None:
				e.Stack = NoStack
			default:
				return pickle.Value{}, 0, false
			}
			e.Flags |= FlagHasFrames
		case kwCompileContext:
			if val.Kind != pickle.String && val.Kind != pickle.None {
				return pickle.Value{}, 0, false
			}
			cc = val
		case kwUserMetadata:
			if val.Kind != pickle.String && val.Kind != pickle.None {
				return pickle.Value{}, 0, false
			}
			um = val
			umFirst = seen&(1<<kwCompileContext) == 0
		}
	}
}

// commitEntry records a trace entry ReadEntry has read up to end, doing
// the interning event would have done, in the same order.
func (b *builder) commitEntry(d *pickle.Decoder, e *Event, seen uint16, stream int64, cc, um pickle.Value, umFirst bool, end int) (pickle.Value, int, bool) {
	if seen&(1<<kwAction) == 0 || !d.DictEndsAt(end) {
		// Without an action it is not a trace entry; an incomplete dict
		// may get more items.
		return pickle.Value{}, 0, false
	}
	if seen&(1<<kwStream) != 0 {
		e.Stream = b.tmpStream(stream)
	}
	if seen&(1<<kwTimeUS) != 0 {
		b.sawTime = true
	}
	var meta EventMeta
	if seen&(1<<kwUserMetadata) != 0 && umFirst {
		meta.UserMetadata, _ = b.stringValue(um, "user_metadata")
		b.sawUserMeta = true
	}
	if seen&(1<<kwCompileContext) != 0 {
		meta.CompileContext, _ = b.stringValue(cc, "compile_context")
		b.sawCompile = true
	}
	if seen&(1<<kwUserMetadata) != 0 && !umFirst {
		meta.UserMetadata, _ = b.stringValue(um, "user_metadata")
		b.sawUserMeta = true
	}
	return b.appendEvent(e, b.s.AddMeta(meta)), end, true
}

// appendEvent adds e, whose MetaID is meta, to the events and returns
// its handle.
func (b *builder) appendEvent(e *Event, meta MetaID) pickle.Value {
	n := len(b.events)
	b.makeRoom(n)
	b.noteEvent(e, n, meta)
	b.events = append(b.events, *e)
	return pickle.MakeHandle(hEvent, uint64(n))
}

// makeRoom makes room for event n, the next, and publishes those before it
// every feedEvery events.
func (b *builder) makeRoom(n int) {
	if n == 0 {
		b.feed.setLive(b.allocated) // PyTorch writes the dump before the traces
		if b.split != nil {
			b.split.beginTrace() // the splitter no longer answers its offer itself
		}
	}
	if n == cap(b.events) {
		if b.split != nil {
			// More entries than the splitter predicted before its part: it
			// keeps the old array, and its part is read again (Split).
			b.split.stop.Store(true)
		}
		b.moveEvents(roomFor[Event])
	} else if n&(feedEvery-1) == 0 {
		if b.split != nil {
			b.accept(b.split, false)
		}
		b.pf.advance(n * int(unsafe.Sizeof(Event{})))
		b.feed.publish(b.events, false)
		if n > 0 {
			b.startVersions(cap(b.events))
		}
		b.ver.publish(b.events)
	}
}

// noteEvent notes what event e, to be event n, changes in the columns
// beside the events (appendEvent; the merge of a splitter's part, whose
// events are already in place).
func (b *builder) noteEvent(e *Event, n int, meta MetaID) {
	// memory_viz's merge, decided while the event before is in cache: a
	// pass over every event after the decode took 10 ms of an 80 MB
	// file's first paint.
	if k := b.lastKept; k >= 0 && b.events[k].Flags&FlagMergedFree == 0 && MergesFree(&b.events[k], e) {
		b.events[k].Flags |= FlagMergedFree
	} else {
		b.kept = append(b.kept, int32(n))
		b.lastKept = n
	}
	if e.Flags&FlagHasTime == 0 {
		b.untimed = true
	}
	if meta != b.lastMeta {
		b.metaRuns = append(b.metaRuns, MetaRun{First: int32(n), Meta: meta})
		b.lastMeta = meta
	}
}

// moveEvents moves the events to the copy grow makes of them, with more
// room.
func (b *builder) moveEvents(grow func([]Event) []Event) {
	n := len(b.events)
	b.pf.stop() // the array moves; the new one is faulted as written
	b.pf = nil
	b.events = grow(b.events)
	b.feed.publish(b.events, false) // the reader reads the new array
	if n >= feedEvery {
		b.startVersions(cap(b.events))
	}
	b.ver.publish(b.events)
}

// lookupAction parses an action string and caches it by string id.
func (b *builder) lookupAction(d *pickle.Decoder, val pickle.Value) Action {
	id := uint32(val.X)
	s, _ := d.Str(val)
	a := ParseAction(s)
	for int(id) >= len(b.actions) {
		b.actions = append(b.actions, 0)
	}
	b.actions[id] = a + 1
	return a
}

// long1At reads the LONG1 at buf[p] when its value fits an int64 and buf
// holds 8 bytes past the length byte: the value and the position after
// it, or next 0. It inlines, as memoRef does.
func long1At(buf []byte, p int) (x int64, next int) {
	if p+10 > len(buf) || buf[p+1] > 8 {
		return 0, 0
	}
	n := int(buf[p+1])
	if n > 0 {
		// Load 8 bytes and keep the low n, sign-extended.
		sh := uint(64 - 8*n)
		x = int64(binary.LittleEndian.Uint64(buf[p+2:p+10])<<sh) >> sh
	}
	return x, p + 2 + n
}

// memoRef reads the BINGET or LONG_BINGET at buf[p] (p < len(buf)): the
// memo index and the position after the opcode, or next 0 when buf[p] is
// neither or is cut short. It inlines, as readBlock needs: a call per key
// or value would cost it a few percent. (ReadEntry, the hottest reader,
// keeps its own switch: these helpers cost it 0.4% more instructions.)
func memoRef(buf []byte, p int) (i uint64, next int) {
	switch {
	case buf[p] == opBinGet && p+1 < len(buf):
		return uint64(buf[p+1]), p + 2
	case buf[p] == opLongBinGet && p+4 < len(buf):
		return uint64(binary.LittleEndian.Uint32(buf[p+1 : p+5])), p + 5
	}
	return 0, 0
}

// readBlock is ReadEntry for blocks of PyTorch 2.1+ (address first): keys
// among address, size, requested_size, state and frames, each at most
// once, with ints and memoized strings and stacks as values. It gives what
// block gives for the same pairs; anything else is left to block.
func (b *builder) readBlock(d *pickle.Decoder, buf []byte, p int, self int64) (pickle.Value, int, bool) {
	var bl Block
	var seen uint16
	for {
		if p >= len(buf) {
			return pickle.Value{}, 0, false
		}
		if buf[p] == opSetItems {
			break
		}
		i, next := memoRef(buf, p)
		if next == 0 || int64(i) == self {
			return pickle.Value{}, 0, false
		}
		k, ok := d.MemoStr(i)
		if !ok || k >= uint32(len(b.keyKind)) {
			return pickle.Value{}, 0, false
		}
		p = next
		kw := b.keyKind[k]
		bit := uint16(1) << kw
		if seen&bit != 0 || blockKeys&bit == 0 {
			return pickle.Value{}, 0, false
		}
		seen |= bit
		if p >= len(buf) {
			return pickle.Value{}, 0, false
		}
		var x uint64 // an int value
		isInt := true
		var val pickle.Value // a memoized value
		switch buf[p] {
		case opBinGet, opLongBinGet:
			if i, next = memoRef(buf, p); next == 0 || int64(i) == self {
				return pickle.Value{}, 0, false
			}
			p = next
			if val, ok = d.MemoPlain(i); !ok {
				return pickle.Value{}, 0, false
			}
			isInt = false
		case opBinInt1:
			if p+1 >= len(buf) {
				return pickle.Value{}, 0, false
			}
			x = uint64(buf[p+1])
			p += 2
		case opBinInt2:
			if p+2 >= len(buf) {
				return pickle.Value{}, 0, false
			}
			x = uint64(binary.LittleEndian.Uint16(buf[p+1 : p+3]))
			p += 3
		case opBinInt:
			if p+4 >= len(buf) {
				return pickle.Value{}, 0, false
			}
			v := int32(binary.LittleEndian.Uint32(buf[p+1 : p+5]))
			if v < 0 {
				return pickle.Value{}, 0, false
			}
			x = uint64(v)
			p += 5
		case opLong1:
			v, next := long1At(buf, p)
			if next == 0 || v < 0 {
				return pickle.Value{}, 0, false
			}
			x = uint64(v)
			p = next
		case opNone:
			val = pickle.Value{Kind: pickle.None}
			isInt = false
			p++
		default:
			return pickle.Value{}, 0, false
		}
		switch kw {
		case kwAddress, kwSize, kwRequestedSize:
			if !isInt {
				return pickle.Value{}, 0, false
			}
			switch kw {
			case kwAddress:
				bl.RawAddress, bl.HasAddress = x, true
			case kwSize:
				bl.Size = x
			default:
				bl.RequestedSize, bl.HasRequestedSize = x, true
			}
		case kwState:
			if isInt || val.Kind != pickle.String {
				return pickle.Value{}, 0, false
			}
			st, ok := b.blockState(d, val)
			if !ok {
				return pickle.Value{}, 0, false
			}
			bl.State = st
		case kwFrames:
			switch {
			case isInt:
				return pickle.Value{}, 0, false
			case val.Kind == pickle.Handle && val.Sub == hStack:
				bl.Stack = StackID(val.X)
			case val.Kind == pickle.Handle && val.Sub == hEmpty, val.Kind == pickle.None:
				bl.Stack = NoStack
			default:
				return pickle.Value{}, 0, false
			}
		}
	}
	end := p + 1
	if seen&(1<<kwState) == 0 || !d.DictEndsAt(end) {
		// Without a state it is not typed as a block.
		return pickle.Value{}, 0, false
	}
	if seen&(1<<kwFrames) == 0 && bl.RequestedSize == 0 {
		bl.RequestedSize = bl.Size // legacy default, as block does
	}
	if bl.State == BlockActiveAllocated {
		b.allocated++
	}
	b.blocks = append(b.roomForBlocks(), bl)
	return pickle.MakeHandle(hBlock, uint64(len(b.blocks)-1)), end, true
}

// blockState maps a state string to a BlockState, caching by string id;
// ok is false for a spelling block keeps as an extra.
func (b *builder) blockState(d *pickle.Decoder, val pickle.Value) (BlockState, bool) {
	// blockStates holds 0 (not looked up), 1 (unknown) or 2+state.
	id := uint32(val.X)
	if int(id) < len(b.blockStates) && b.blockStates[id] != 0 {
		c := b.blockStates[id]
		return BlockState(c - 2), c >= 2
	}
	s, _ := d.Str(val)
	c := uint8(1)
	switch s {
	case "active_allocated":
		c = 2 + uint8(BlockActiveAllocated)
	case "active_pending_free", "active_awaiting_free":
		c = 2 + uint8(BlockActivePendingFree)
	case "inactive":
		c = 2 + uint8(BlockInactive)
	}
	for int(id) >= len(b.blockStates) {
		b.blockStates = append(b.blockStates, 0)
	}
	b.blockStates[id] = c
	return BlockState(c - 2), c >= 2
}
