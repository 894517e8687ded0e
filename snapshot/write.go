package snapshot

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// WritePickle writes s as the bytes CPython's pickle.dump(obj, protocol=4)
// writes for the Python object PyTorch would have built: keys in PyTorch's
// order for s's generation, each frame dict and each frame list written
// once and then referenced through the memo (PyTorch shares them), equal
// strings memoized once, raw stream values, unknown keys restored from
// their JSON, and 64 KiB FRAMEs cut where CPython's C pickler cuts them.
// Class references kept as {"__class__": ...} JSON come back as plain
// dicts; instances of classes never get this far (Decode refuses them).
func WritePickle(w io.Writer, s *Snapshot) error {
	p := &pickleEmitter{w: bufio.NewWriterSize(w, 1<<20), strs: map[string]uint32{}, frames: map[FrameID]uint32{}, stacks: map[StackID]uint32{}, s: s}
	p.w.Write([]byte{0x80, 4}) // PROTO 4
	if err := walk(s, p); err != nil {
		return err
	}
	p.op('.') // STOP
	p.commit()
	if p.err != nil {
		return p.err
	}
	return p.w.Flush()
}

// WriteJSON writes s as Python's json.dumps(obj) writes the same object
// (tuples as lists, ", " and ": " separators, ASCII only, no trailing
// newline); memory_viz and Decode accept it.
func WriteJSON(w io.Writer, s *Snapshot) error {
	j := &jsonEmitter{w: bufio.NewWriterSize(w, 1<<20), s: s}
	if err := walk(s, j); err != nil {
		return err
	}
	if j.err != nil {
		return j.err
	}
	return j.w.Flush()
}

// emitter receives the snapshot's structure in order. Containers announce
// their length up front because the pickler batches by it.
type emitter interface {
	beginDict(n int)
	key(k string)
	endDict()
	beginList(n int)
	endList()
	pair(a, b int64) // a 2-tuple of ints
	int(i int64)
	uint(u uint64)
	float(f float64)
	str(s string)
	boolean(b bool)
	none()
	stack(id StackID)
}

// b2i counts an optional key.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func extraOf(s *Snapshot, id ExtraID) KeyValues {
	if id > 0 && int(id) < len(s.Extras) {
		return s.Extras[id]
	}
	return nil
}

// walk emits the snapshot in PyTorch's key order.
func walk(s *Snapshot, e emitter) error {
	gen := s.Source.Generation
	// 1.13/2.0 blocks carry history instead of frames; a bare list from a
	// newer torch.cuda.memory_snapshot() has the newer keys.
	legacy := gen == GenD1
	if gen == GenL {
		for i := range s.Blocks {
			if s.Blocks[i].NumHistory > 0 || !s.Blocks[i].HasAddress {
				legacy = true
				break
			}
		}
	}
	if gen == GenL {
		walkSegments(s, e, legacy)
		return nil
	}
	as := s.AllocatorSettings
	e.beginDict(2 + b2i(as != nil) + b2i(s.HasAnnotationsKey) + len(s.Extra))
	e.key("segments")
	walkSegments(s, e, legacy)
	e.key("device_traces")
	e.beginList(len(s.Traces))
	ctx := gen == GenD6 || gen == GenD7
	meta := gen == GenD7
	for d := range s.Traces {
		tr := &s.Traces[d]
		e.beginList(len(tr.Events))
		metas := tr.Metas()
		for i := range tr.Events {
			walkEvent(s, e, &tr.Events[i], s.Meta(metas.At(i)), ctx, meta)
		}
		e.endList()
	}
	e.endList()
	if as != nil {
		e.key("allocator_settings")
		if len(as.Raw) > 0 {
			e.beginDict(len(as.Raw))
			emitExtra(e, as.Raw)
			e.endDict()
		} else {
			e.beginDict(5)
			e.key("PYTORCH_CUDA_ALLOC_CONF")
			e.str(as.Conf)
			e.key("max_split_size")
			e.int(as.MaxSplitSize)
			e.key("garbage_collection_threshold")
			e.float(as.GarbageCollectionThreshold)
			e.key("expandable_segments")
			e.boolean(as.ExpandableSegments)
			e.key("roundup_power2_divisions")
			e.beginDict(len(as.RoundupPower2Divisions))
			for _, r := range as.RoundupPower2Divisions {
				e.key(r.IntervalMiB)
				e.int(r.Divisions)
			}
			e.endDict()
			e.endDict()
		}
	}
	if s.HasAnnotationsKey {
		e.key("external_annotations")
		e.beginList(len(s.Annotations))
		for _, a := range s.Annotations {
			// PyTorch's order: stage, name, device, time_us.
			e.beginDict(b2i(a.Stage != "") + b2i(a.Name != "") + 2 + len(a.Extra))
			if a.Stage != "" {
				e.key("stage")
				e.str(a.Stage)
			}
			if a.Name != "" {
				e.key("name")
				e.str(a.Name)
			}
			e.key("device")
			e.int(int64(a.Device))
			e.key("time_us")
			e.int(a.TimeUS)
			emitExtra(e, a.Extra)
			e.endDict()
		}
		e.endList()
	}
	emitExtra(e, s.Extra)
	e.endDict()
	return nil
}

func walkSegments(s *Snapshot, e emitter, legacy bool) {
	e.beginList(len(s.Segments))
	for i := range s.Segments {
		seg := &s.Segments[i]
		segExtra := extraOf(s, seg.Extra)
		e.beginDict(9 + b2i(seg.HasPoolID) + 2*b2i(!legacy) + len(segExtra))
		e.key("device")
		e.int(int64(seg.Device))
		e.key("address")
		e.uint(seg.Address)
		e.key("total_size")
		e.uint(seg.TotalSize)
		e.key("allocated_size")
		e.uint(seg.AllocatedSize)
		e.key("active_size")
		e.uint(seg.ActiveSize)
		e.key("requested_size")
		e.uint(seg.RequestedSize)
		e.key("stream")
		e.int(s.RawStream(seg.Stream))
		e.key("segment_type")
		if seg.Large {
			e.str("large")
		} else {
			e.str("small")
		}
		if seg.HasPoolID {
			e.key("segment_pool_id")
			e.pair(seg.PoolID[0], seg.PoolID[1])
		}
		if !legacy {
			e.key("is_expandable")
			e.boolean(seg.IsExpandable)
			e.key("frames")
			e.stack(seg.Stack)
		}
		e.key("blocks")
		blocks := s.SegmentBlocks(i)
		e.beginList(len(blocks))
		for _, b := range blocks {
			bExtra := extraOf(s, b.Extra)
			e.beginDict(2 + b2i(b.HasAddress) + b2i(b.HasRequestedSize) + b2i(!legacy) + b2i(b.NumHistory > 0) + len(bExtra))
			if b.HasAddress {
				e.key("address")
				e.uint(b.RawAddress)
			}
			e.key("size")
			e.uint(b.Size)
			if b.HasRequestedSize {
				e.key("requested_size")
				e.uint(b.RequestedSize)
			}
			e.key("state")
			e.str(b.State.String())
			if !legacy {
				e.key("frames")
				e.stack(b.Stack)
			}
			if b.NumHistory > 0 {
				e.key("history")
				hist := s.BlockHistory(&b)
				e.beginList(len(hist))
				for _, h := range hist {
					e.beginDict(2 + b2i(h.HasStack))
					e.key("addr")
					e.uint(h.Addr)
					e.key("real_size")
					e.uint(h.RealSize)
					if h.HasStack {
						e.key("frames")
						e.stack(h.Stack)
					}
					e.endDict()
				}
				e.endList()
			}
			emitExtra(e, bExtra)
			e.endDict()
		}
		e.endList()
		emitExtra(e, segExtra)
		e.endDict()
	}
	e.endList()
}

func walkEvent(s *Snapshot, e emitter, ev *Event, em EventMeta, ctx, meta bool) {
	extra := extraOf(s, em.Extra)
	action, hasAction := "", false
	if ev.Action == ActionUnknown {
		action, hasAction = lookup(extra, "action")
	}
	n := 4 + b2i(ev.Flags&FlagHasTime != 0) + b2i(ctx) + b2i(meta) + b2i(ev.Flags&FlagHasFrames != 0) + len(extra) - b2i(hasAction)
	e.beginDict(n)
	e.key("action")
	switch {
	case hasAction:
		emitJSON(e, action)
	case ev.Action == ActionUnknown:
		e.str("unknown")
	default:
		e.str(ev.Action.String())
	}
	if ev.Action == ActionOOM {
		e.key("device_free")
	} else {
		e.key("addr")
	}
	e.uint(ev.Addr)
	e.key("size")
	e.uint(ev.Size)
	e.key("stream")
	e.int(s.RawStream(ev.Stream))
	if ev.Flags&FlagHasTime != 0 {
		e.key("time_us")
		e.int(ev.TimeUS)
	}
	if ctx {
		e.key("compile_context")
		e.str(s.Text(em.CompileContext))
	}
	if meta {
		e.key("user_metadata")
		e.str(s.Text(em.UserMetadata))
	}
	if ev.Flags&FlagHasFrames != 0 {
		e.key("frames")
		e.stack(ev.Stack)
	}
	for _, kv := range extra {
		if kv.Key == "action" && hasAction {
			continue
		}
		e.key(kv.Key)
		emitJSON(e, kv.JSON)
	}
	e.endDict()
}

func lookup(kvs KeyValues, k string) (string, bool) {
	for _, kv := range kvs {
		if kv.Key == k {
			return kv.JSON, true
		}
	}
	return "", false
}

// emitExtra writes unknown keys after the known ones, in file order.
func emitExtra(e emitter, kvs KeyValues) {
	for _, kv := range kvs {
		e.key(kv.Key)
		emitJSON(e, kv.JSON)
	}
}

// jsonValue is a decoded KeyValue.JSON with dict key order kept.
type jsonValue struct {
	kind byte // 'd' dict, 'l' list, 's' string, 'n' number, 'b' bool, 'z' null
	text string
	keys []string
	kids []jsonValue
}

// parseJSONValue reads one value from dec; ok is false on malformed input.
func parseJSONValue(dec *json.Decoder) (v jsonValue, ok bool) {
	tok, err := dec.Token()
	if err != nil {
		return v, false
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			v.kind = 'd'
			for dec.More() {
				k, err := dec.Token()
				ks, isStr := k.(string)
				if err != nil || !isStr {
					return v, false
				}
				kid, ok := parseJSONValue(dec)
				if !ok {
					return v, false
				}
				v.keys = append(v.keys, ks)
				v.kids = append(v.kids, kid)
			}
		} else if t == '[' {
			v.kind = 'l'
			for dec.More() {
				kid, ok := parseJSONValue(dec)
				if !ok {
					return v, false
				}
				v.kids = append(v.kids, kid)
			}
		} else {
			return v, false
		}
		if _, err := dec.Token(); err != nil {
			return v, false
		}
	case string:
		v.kind, v.text = 's', t
	case json.Number:
		v.kind, v.text = 'n', string(t)
	case bool:
		v.kind = 'b'
		if t {
			v.text = "true"
		}
	case nil:
		v.kind = 'z'
	}
	return v, true
}

// emitJSON replays a JSON value (from KeyValue.JSON) into the emitter,
// keeping key order; malformed JSON becomes None.
func emitJSON(e emitter, j string) {
	dec := json.NewDecoder(strings.NewReader(j))
	dec.UseNumber()
	v, ok := parseJSONValue(dec)
	if !ok {
		e.none()
		return
	}
	emitValue(e, &v)
}

func emitValue(e emitter, v *jsonValue) {
	switch v.kind {
	case 'd':
		e.beginDict(len(v.keys))
		for i := range v.keys {
			e.key(v.keys[i])
			emitValue(e, &v.kids[i])
		}
		e.endDict()
	case 'l':
		e.beginList(len(v.kids))
		for i := range v.kids {
			emitValue(e, &v.kids[i])
		}
		e.endList()
	case 's':
		e.str(v.text)
	case 'n':
		if i, err := strconv.ParseInt(v.text, 10, 64); err == nil {
			e.int(i)
		} else if u, err := strconv.ParseUint(v.text, 10, 64); err == nil {
			e.uint(u)
		} else if f, err := strconv.ParseFloat(v.text, 64); err == nil {
			e.float(f)
		} else {
			e.str(v.text)
		}
	case 'b':
		e.boolean(v.text == "true")
	default:
		e.none()
	}
}

// Pickle framing and batching constants of CPython's C pickler.
const (
	frameSizeTarget = 64 * 1024 // a FRAME is cut at the first boundary past this
	frameSizeMin    = 4         // shorter final frames go without a header
	batchSize       = 1000      // items per MARK ... APPENDS/SETITEMS batch
)

// container is an open list or dict: its announced length and how many
// items (dict: key/value pairs) have been written.
type container struct {
	n, done int
	dict    bool
}

// pickleEmitter writes protocol-4 opcodes as _pickle.c's save_list /
// save_dict do: an empty container is just EMPTY_LIST/EMPTY_DICT MEMOIZE, a
// one-item one ends in APPEND/SETITEM, longer ones are MARK ... APPENDS
// (SETITEMS) batches of 1000, and the current frame may be cut only after
// before any object.
type pickleEmitter struct {
	w      *bufio.Writer
	s      *Snapshot
	out    []byte // the frame being built
	memo   uint32
	strs   map[string]uint32
	frames map[FrameID]uint32
	stacks map[StackID]uint32
	open   []container
	err    error
}

func (p *pickleEmitter) op(b ...byte) { p.out = append(p.out, b...) }

// commit writes the current frame out.
func (p *pickleEmitter) commit() {
	if len(p.out) >= frameSizeMin {
		var hdr [9]byte
		hdr[0] = 0x95 // FRAME
		binary.LittleEndian.PutUint64(hdr[1:], uint64(len(p.out)))
		p.w.Write(hdr[:])
	}
	if _, err := p.w.Write(p.out); err != nil && p.err == nil {
		p.err = err
	}
	p.out = p.out[:0]
}

func (p *pickleEmitter) memoize() uint32 {
	p.op(0x94) // MEMOIZE
	p.memo++
	return p.memo - 1
}

func (p *pickleEmitter) get(i uint32) {
	if i < 256 {
		p.op('h', byte(i)) // BINGET
		return
	}
	p.op('j') // LONG_BINGET
	p.out = binary.LittleEndian.AppendUint32(p.out, i)
}

// save starts writing one object. CPython's save() may end the current
// frame here, before any object (keys, items, tuple members, memo fetches).
func (p *pickleEmitter) save() {
	if len(p.out) >= frameSizeTarget {
		p.commit()
	}
}

// done records that a value ended: an item of the innermost list, or the
// value of the innermost dict's current key.
func (p *pickleEmitter) done() {
	n := len(p.open)
	if n == 0 {
		return
	}
	c := &p.open[n-1]
	c.done++
	if c.n <= 1 || c.done%batchSize != 0 {
		return
	}
	// A full batch: lists start another only if items remain, dicts
	// always do (CPython's loop tests for a full batch, not for more).
	if c.dict {
		p.op('u', '(') // SETITEMS MARK
	} else if c.done < c.n {
		p.op('e', '(') // APPENDS MARK
	}
}

// begin opens a container whose EMPTY_LIST/EMPTY_DICT was just written
// and memoized.
func (p *pickleEmitter) begin(n int, dict bool) {
	p.open = append(p.open, container{n: n, dict: dict})
	if n > 1 {
		p.op('(')
	}
}

func (p *pickleEmitter) end() {
	c := p.open[len(p.open)-1]
	if c.done != c.n && p.err == nil {
		p.err = fmt.Errorf("snapshot: writer announced %d items and wrote %d", c.n, c.done)
	}
	switch {
	case c.n == 1 && c.dict:
		p.op('s') // SETITEM
	case c.n == 1:
		p.op('a') // APPEND
	case c.n > 1 && c.dict:
		p.op('u') // SETITEMS
	case c.n > 1:
		p.op('e') // APPENDS
	}
	p.open = p.open[:len(p.open)-1]
	p.done()
}

func (p *pickleEmitter) beginDict(n int) {
	p.save()
	p.op('}')
	p.memoize()
	p.begin(n, true)
}

func (p *pickleEmitter) key(k string) { p.writeStr(k) }
func (p *pickleEmitter) endDict()     { p.end() }

func (p *pickleEmitter) beginList(n int) {
	p.save()
	p.op(']')
	p.memoize()
	p.begin(n, false)
}

func (p *pickleEmitter) endList() { p.end() }

func (p *pickleEmitter) pair(a, b int64) {
	p.save()
	p.save()
	p.rawInt(a)
	p.save()
	p.rawInt(b)
	p.op(0x86) // TUPLE2
	p.memoize()
	p.done()
}

func (p *pickleEmitter) int(i int64) {
	p.save()
	p.rawInt(i)
	p.done()
}

// rawInt writes i as save_long does for protocol 2+.
func (p *pickleEmitter) rawInt(i int64) {
	switch {
	case i >= 0 && i < 256:
		p.op('K', byte(i))
	case i >= 0 && i < 65536:
		p.op('M', byte(i), byte(i>>8))
	case i >= math.MinInt32 && i <= math.MaxInt32:
		p.op('J')
		p.out = binary.LittleEndian.AppendUint32(p.out, uint32(int32(i)))
	default:
		p.long(big.NewInt(i))
	}
}

// long writes LONG1 with Python's minimal two's-complement encoding.
func (p *pickleEmitter) long(b *big.Int) {
	var le []byte
	if b.Sign() >= 0 {
		be := b.Bytes()
		for i := len(be) - 1; i >= 0; i-- {
			le = append(le, be[i])
		}
		if len(le) == 0 || le[len(le)-1]&0x80 != 0 {
			le = append(le, 0)
		}
	} else {
		// Two's complement of a negative: 2^(8n) + b for the smallest n.
		n := (b.BitLen() + 8) / 8
		m := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), uint(8*n)), b)
		be := m.Bytes()
		for i := len(be) - 1; i >= 0; i-- {
			le = append(le, be[i])
		}
		for len(le) < n {
			le = append(le, 0xff)
		}
		if le[len(le)-1]&0x80 == 0 {
			le = append(le, 0xff)
		}
		for len(le) > 1 && le[len(le)-1] == 0xff && le[len(le)-2]&0x80 != 0 {
			le = le[:len(le)-1]
		}
	}
	p.op(0x8a, byte(len(le))) // LONG1
	p.op(le...)
}

func (p *pickleEmitter) uint(u uint64) {
	if u <= math.MaxInt64 {
		p.int(int64(u))
		return
	}
	p.save()
	p.long(new(big.Int).SetUint64(u))
	p.done()
}

func (p *pickleEmitter) float(f float64) {
	p.save()
	p.op('G') // BINFLOAT
	p.out = binary.BigEndian.AppendUint64(p.out, math.Float64bits(f))
	p.done()
}

func (p *pickleEmitter) str(s string) {
	p.writeStr(s)
	p.done()
}

// writeStr writes a string, memoized on first use and fetched after.
func (p *pickleEmitter) writeStr(s string) {
	p.save()
	if i, ok := p.strs[s]; ok {
		p.get(i)
		return
	}
	if len(s) < 256 {
		p.op(0x8c, byte(len(s))) // SHORT_BINUNICODE
	} else {
		p.op('X') // BINUNICODE
		p.out = binary.LittleEndian.AppendUint32(p.out, uint32(len(s)))
	}
	p.out = append(p.out, s...)
	p.strs[s] = p.memoize()
}

func (p *pickleEmitter) boolean(b bool) {
	p.save()
	if b {
		p.op(0x88) // NEWTRUE
	} else {
		p.op(0x89) // NEWFALSE
	}
	p.done()
}

func (p *pickleEmitter) none() {
	p.save()
	p.op('N')
	p.done()
}

// frame writes frame id's dict the first time and a memo reference after,
// as pickling PyTorch's shared frame dicts does.
func (p *pickleEmitter) frame(id FrameID) {
	p.save()
	if i, ok := p.frames[id]; ok {
		p.get(i)
		p.done()
		return
	}
	f := frameOf(p.s, id, &p.err)
	if f == nil {
		p.none()
		return
	}
	extra := extraOf(p.s, f.Extra)
	p.op('}')
	p.frames[id] = p.memoize()
	p.begin(3+len(extra), true)
	p.key("name")
	p.str(f.Name)
	p.key("filename")
	p.str(f.Filename)
	p.key("line")
	p.uint(frameLine(f.Line))
	emitExtra(p, extra)
	p.endDict()
}

// frameOf returns frame id, or nil after noting a bad id in *err.
func frameOf(s *Snapshot, id FrameID, err *error) *Frame {
	if int(id) >= len(s.Frames) || id < 0 {
		if *err == nil {
			*err = fmt.Errorf("snapshot: frame id %d out of range", id)
		}
		return nil
	}
	return &s.Frames[id]
}

// frameLine is a frame's line as the file had it (size_t(-1) and friends
// read back as negative int64s).
func frameLine(l int64) uint64 { return uint64(l) }

// stack writes a frame list the first time and a memo reference after:
// PyTorch shares one list per traceback (and one empty list).
func (p *pickleEmitter) stack(id StackID) {
	p.save()
	if i, ok := p.stacks[id]; ok {
		p.get(i)
		p.done()
		return
	}
	fs := p.s.Stacks.Frames(id)
	p.op(']')
	p.stacks[id] = p.memoize()
	p.begin(len(fs), false)
	for _, f := range fs {
		p.frame(f)
	}
	p.endList()
}

// jsonEmitter writes JSON with json.dumps's defaults.
type jsonEmitter struct {
	w     *bufio.Writer
	s     *Snapshot
	first []bool // per open container: no item written yet
	err   error
	buf   []byte
}

// sep writes the ", " before every item but a container's first.
func (j *jsonEmitter) sep() {
	n := len(j.first)
	if n == 0 {
		return
	}
	if !j.first[n-1] {
		j.w.WriteString(", ")
	}
	j.first[n-1] = false
}

func (j *jsonEmitter) beginDict(int) { j.sep(); j.w.WriteByte('{'); j.first = append(j.first, true) }
func (j *jsonEmitter) key(k string) {
	j.sep()
	j.buf = AppendPythonJSONString(j.buf[:0], k)
	j.w.Write(j.buf)
	j.w.WriteString(": ")
	j.first[len(j.first)-1] = true // the value needs no comma
}
func (j *jsonEmitter) endDict() { j.end('}') }
func (j *jsonEmitter) beginList(int) {
	j.sep()
	j.w.WriteByte('[')
	j.first = append(j.first, true)
}
func (j *jsonEmitter) endList() { j.end(']') }

// end closes a container and marks its parent as non-empty.
func (j *jsonEmitter) end(c byte) {
	j.w.WriteByte(c)
	j.first = j.first[:len(j.first)-1]
	if n := len(j.first); n > 0 {
		j.first[n-1] = false
	}
}

func (j *jsonEmitter) pair(a, b int64) {
	j.sep()
	fmt.Fprintf(j.w, "[%d, %d]", a, b)
}
func (j *jsonEmitter) int(i int64) {
	j.sep()
	j.w.Write(strconv.AppendInt(j.buf[:0], i, 10))
}
func (j *jsonEmitter) uint(u uint64) {
	j.sep()
	j.w.Write(strconv.AppendUint(j.buf[:0], u, 10))
}
func (j *jsonEmitter) float(f float64) {
	j.sep()
	switch {
	case math.IsNaN(f):
		j.w.WriteString("NaN")
	case math.IsInf(f, 1):
		j.w.WriteString("Infinity")
	case math.IsInf(f, -1):
		j.w.WriteString("-Infinity")
	default:
		j.w.Write(appendPythonFloat(j.buf[:0], f))
	}
}
func (j *jsonEmitter) str(s string) {
	j.sep()
	j.buf = AppendPythonJSONString(j.buf[:0], s)
	j.w.Write(j.buf)
}
func (j *jsonEmitter) boolean(b bool) {
	j.sep()
	j.w.WriteString(strconv.FormatBool(b))
}
func (j *jsonEmitter) none() { j.sep(); j.w.WriteString("null") }

func (j *jsonEmitter) stack(id StackID) {
	fs := j.s.Stacks.Frames(id)
	j.beginList(len(fs))
	for _, id := range fs {
		f := frameOf(j.s, id, &j.err)
		if f == nil {
			j.none()
			continue
		}
		extra := extraOf(j.s, f.Extra)
		// The keys as the pickle writer's frame writes them, through the
		// concrete type: an emitter helper would make each an interface call.
		j.beginDict(3 + len(extra))
		j.key("name")
		j.str(f.Name)
		j.key("filename")
		j.str(f.Filename)
		j.key("line")
		j.uint(frameLine(f.Line))
		emitExtra(j, extra)
		j.endDict()
	}
	j.endList()
}

// appendPythonFloat appends repr(f) for a finite f: the shortest digits
// that round-trip, fixed notation for exponents -4..15 with at least one
// decimal, else d.ddde±XX.
func appendPythonFloat(buf []byte, f float64) []byte {
	e := strconv.AppendFloat(nil, f, 'e', -1, 64) // [-]d[.ddd]e±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	mant, expStr, _ := strings.Cut(string(e), "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	if neg {
		buf = append(buf, '-')
	}
	if exp < -4 || exp >= 16 {
		buf = append(buf, digits[0])
		if len(digits) > 1 {
			buf = append(buf, '.')
			buf = append(buf, digits[1:]...)
		}
		buf = append(buf, 'e')
		if exp < 0 {
			buf = append(buf, '-')
			exp = -exp
		} else {
			buf = append(buf, '+')
		}
		if exp < 10 {
			buf = append(buf, '0')
		}
		return strconv.AppendInt(buf, int64(exp), 10)
	}
	if exp < 0 {
		buf = append(buf, "0."...)
		for i := -1; i > exp; i-- {
			buf = append(buf, '0')
		}
		return append(buf, digits...)
	}
	if len(digits) <= exp+1 {
		buf = append(buf, digits...)
		for i := len(digits); i <= exp; i++ {
			buf = append(buf, '0')
		}
		return append(buf, ".0"...)
	}
	buf = append(buf, digits[:exp+1]...)
	buf = append(buf, '.')
	return append(buf, digits[exp+1:]...)
}

// AppendPythonJSONString appends s quoted as Python's json.dumps quotes it
// (ensure_ascii: everything outside ' '..'~' escaped, astral characters as
// surrogate pairs, invalid UTF-8 as U+FFFD).
func AppendPythonJSONString(buf []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	u4 := func(buf []byte, r rune) []byte {
		return append(buf, '\\', 'u', hexDigits[r>>12&15], hexDigits[r>>8&15], hexDigits[r>>4&15], hexDigits[r&15])
	}
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			default:
				if c < 0x20 || c == 0x7f {
					buf = u4(buf, rune(c))
				} else {
					buf = append(buf, c)
				}
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			r -= 0x10000
			buf = u4(buf, 0xd800+(r>>10))
			buf = u4(buf, 0xdc00+(r&0x3ff))
			continue
		}
		buf = u4(buf, r)
	}
	return append(buf, '"')
}
