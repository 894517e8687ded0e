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

	"github.com/gpumem/gpumem/internal/pickle"
)

// WritePickle writes s as PyTorch would pickle it (protocol 4): the keys of
// s's generation, each frame dict and each frame list written once and then
// referenced through the memo, raw stream values, and unknown keys restored
// from their JSON. Python objects kept as {"__class__": ...} JSON come back
// as plain dicts.
func WritePickle(w io.Writer, s *Snapshot) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	p := &pickleEmitter{w: bw, strs: map[string]uint32{}, frames: map[FrameID]uint32{}, stacks: map[StackID]uint32{}, s: s}
	bw.Write([]byte{0x80, 4})
	if err := walk(s, p); err != nil {
		return err
	}
	if p.err != nil {
		return p.err
	}
	bw.WriteByte('.')
	return bw.Flush()
}

// WriteJSON writes s as json.dumps(snapshot) would (tuples as lists), which
// memory_viz and Decode accept.
func WriteJSON(w io.Writer, s *Snapshot) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	j := &jsonEmitter{w: bw, s: s}
	if err := walk(s, j); err != nil {
		return err
	}
	if j.err != nil {
		return j.err
	}
	bw.WriteByte('\n')
	return bw.Flush()
}

// emitter receives the snapshot's structure in order.
type emitter interface {
	beginDict()
	key(k string)
	endDict()
	beginList()
	endList()
	pair(a, b int64) // a 2-tuple of ints
	int(i int64)
	uint(u uint64)
	float(f float64)
	str(s string)
	boolean(b bool)
	none()
	frame(id FrameID)
	stack(id StackID)
}

func newerThan(g Generation, gens ...Generation) bool {
	for _, x := range gens {
		if g == x {
			return true
		}
	}
	return false
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
	e.beginDict()
	e.key("segments")
	walkSegments(s, e, legacy)
	e.key("device_traces")
	e.beginList()
	ctx := newerThan(gen, GenD6, GenD7)
	meta := gen == GenD7
	for d := range s.Traces {
		e.beginList()
		for i := range s.Traces[d].Events {
			walkEvent(s, e, &s.Traces[d].Events[i], ctx, meta)
		}
		e.endList()
	}
	e.endList()
	if as := s.AllocatorSettings; as != nil {
		e.key("allocator_settings")
		if len(as.Raw) > 0 {
			emitKeyValues(e, as.Raw)
		} else {
			e.beginDict()
			e.key("PYTORCH_CUDA_ALLOC_CONF")
			e.str(as.Conf)
			e.key("max_split_size")
			e.int(as.MaxSplitSize)
			e.key("garbage_collection_threshold")
			e.float(as.GarbageCollectionThreshold)
			e.key("expandable_segments")
			e.boolean(as.ExpandableSegments)
			e.key("roundup_power2_divisions")
			e.beginDict()
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
		e.beginList()
		for _, a := range s.Annotations {
			e.beginDict()
			if a.Name != "" {
				e.key("name")
				e.str(a.Name)
			}
			if a.Stage != "" {
				e.key("stage")
				e.str(a.Stage)
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
	e.beginList()
	for i := range s.Segments {
		seg := &s.Segments[i]
		e.beginDict()
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
		e.beginList()
		for _, b := range s.SegmentBlocks(i) {
			e.beginDict()
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
				e.beginList()
				for _, h := range s.BlockHistory(&b) {
					e.beginDict()
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
			emitExtraID(s, e, b.Extra)
			e.endDict()
		}
		e.endList()
		emitExtraID(s, e, seg.Extra)
		e.endDict()
	}
	e.endList()
}

func walkEvent(s *Snapshot, e emitter, ev *Event, ctx, meta bool) {
	e.beginDict()
	var extra KeyValues
	if ev.Extra > 0 && int(ev.Extra) < len(s.Extras) {
		extra = s.Extras[ev.Extra]
	}
	e.key("action")
	if ev.Action == ActionUnknown {
		if j, ok := lookup(extra, "action"); ok {
			emitJSON(e, j)
		} else {
			e.str("unknown")
		}
	} else {
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
		e.str(s.String(ev.CompileContext))
	}
	if meta {
		e.key("user_metadata")
		e.str(s.String(ev.UserMetadata))
	}
	if ev.Flags&FlagHasFrames != 0 {
		e.key("frames")
		e.stack(ev.Stack)
	}
	for _, kv := range extra {
		if kv.Key == "action" && ev.Action == ActionUnknown {
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

func emitExtraID(s *Snapshot, e emitter, id ExtraID) {
	if id > 0 && int(id) < len(s.Extras) {
		emitExtra(e, s.Extras[id])
	}
}

func emitExtra(e emitter, kvs KeyValues) {
	for _, kv := range kvs {
		e.key(kv.Key)
		emitJSON(e, kv.JSON)
	}
}

func emitKeyValues(e emitter, kvs KeyValues) {
	e.beginDict()
	emitExtra(e, kvs)
	e.endDict()
}

// emitJSON replays a JSON value (from KeyValue.JSON) into the emitter,
// keeping key order.
func emitJSON(e emitter, j string) {
	dec := json.NewDecoder(strings.NewReader(j))
	dec.UseNumber()
	type level struct{ dict, wantKey bool }
	var stack []level
	for {
		tok, err := dec.Token()
		if err != nil {
			if err != io.EOF && len(stack) == 0 {
				e.none()
			}
			return
		}
		if n := len(stack); n > 0 && stack[n-1].dict && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				e.key(k)
				stack[n-1].wantKey = false
				continue
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				e.beginDict()
				stack = append(stack, level{dict: true, wantKey: true})
				continue
			case '[':
				e.beginList()
				stack = append(stack, level{})
				continue
			case '}':
				e.endDict()
			case ']':
				e.endList()
			}
			stack = stack[:len(stack)-1]
		case string:
			e.str(t)
		case json.Number:
			s := string(t)
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				e.int(i)
			} else if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				e.uint(u)
			} else if f, err := strconv.ParseFloat(s, 64); err == nil {
				e.float(f)
			} else {
				e.str(s)
			}
		case bool:
			e.boolean(t)
		case nil:
			e.none()
		}
		if n := len(stack); n > 0 && stack[n-1].dict {
			stack[n-1].wantKey = true
		}
	}
}

// pickleEmitter writes protocol-4 opcodes. Containers open with a MARK and
// flush items in batches of 1000, as Python's pickler does.
type pickleEmitter struct {
	w      *bufio.Writer
	s      *Snapshot
	memo   uint32
	strs   map[string]uint32
	frames map[FrameID]uint32
	stacks map[StackID]uint32
	counts []int // items since the last MARK, per open container
	dicts  []bool
	err    error
	buf    [16]byte
}

func (p *pickleEmitter) memoize() uint32 {
	p.w.WriteByte(0x94) // MEMOIZE
	p.memo++
	return p.memo - 1
}

func (p *pickleEmitter) get(i uint32) {
	if i < 256 {
		p.w.Write([]byte{'h', byte(i)})
		return
	}
	p.buf[0] = 'j'
	binary.LittleEndian.PutUint32(p.buf[1:], i)
	p.w.Write(p.buf[:5])
}

// item counts one item (a dict's key and value count once, at the value).
func (p *pickleEmitter) item() {
	n := len(p.counts)
	if n == 0 {
		return
	}
	if p.dicts[n-1] {
		return // counted in key()
	}
	p.counts[n-1]++
	if p.counts[n-1] == 1000 {
		p.w.WriteString("e(") // APPENDS, MARK
		p.counts[n-1] = 0
	}
}

func (p *pickleEmitter) beginDict() {
	p.item()
	p.w.WriteString("}\x94(") // EMPTY_DICT MEMOIZE MARK
	p.memo++
	p.counts = append(p.counts, 0)
	p.dicts = append(p.dicts, true)
}

func (p *pickleEmitter) key(k string) {
	n := len(p.counts)
	if n > 0 && p.dicts[n-1] {
		if p.counts[n-1] == 1000 {
			p.w.WriteString("u(") // SETITEMS, MARK
			p.counts[n-1] = 0
		}
		p.counts[n-1]++
	}
	p.writeStr(k)
}

func (p *pickleEmitter) end(op byte) {
	n := len(p.counts)
	if p.counts[n-1] == 0 {
		p.w.WriteByte('1') // POP_MARK: nothing since the last MARK
	} else {
		p.w.WriteByte(op)
	}
	p.counts = p.counts[:n-1]
	p.dicts = p.dicts[:n-1]
}

func (p *pickleEmitter) endDict() { p.end('u') }

func (p *pickleEmitter) beginList() {
	p.item()
	p.w.WriteString("]\x94(") // EMPTY_LIST MEMOIZE MARK
	p.memo++
	p.counts = append(p.counts, 0)
	p.dicts = append(p.dicts, false)
}

func (p *pickleEmitter) endList() { p.end('e') }

func (p *pickleEmitter) pair(a, b int64) {
	p.item()
	p.rawInt(a)
	p.rawInt(b)
	p.w.WriteString("\x86\x94") // TUPLE2 MEMOIZE
	p.memo++
}

func (p *pickleEmitter) int(i int64) {
	p.item()
	p.rawInt(i)
}

func (p *pickleEmitter) rawInt(i int64) {
	switch {
	case i >= 0 && i < 256:
		p.w.Write([]byte{'K', byte(i)})
	case i >= 0 && i < 65536:
		p.w.Write([]byte{'M', byte(i), byte(i >> 8)})
	case i >= math.MinInt32 && i <= math.MaxInt32:
		p.buf[0] = 'J'
		binary.LittleEndian.PutUint32(p.buf[1:], uint32(int32(i)))
		p.w.Write(p.buf[:5])
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
	p.w.Write([]byte{0x8a, byte(len(le))})
	p.w.Write(le)
}

func (p *pickleEmitter) uint(u uint64) {
	if u <= math.MaxInt64 {
		p.int(int64(u))
		return
	}
	p.item()
	p.long(new(big.Int).SetUint64(u))
}

func (p *pickleEmitter) float(f float64) {
	p.item()
	p.buf[0] = 'G'
	binary.BigEndian.PutUint64(p.buf[1:], math.Float64bits(f))
	p.w.Write(p.buf[:9])
}

func (p *pickleEmitter) str(s string) {
	p.item()
	p.writeStr(s)
}

// writeStr writes a memoized string without counting it as an item.
func (p *pickleEmitter) writeStr(s string) {
	if i, ok := p.strs[s]; ok {
		p.get(i)
		return
	}
	if len(s) < 256 {
		p.w.Write([]byte{0x8c, byte(len(s))})
	} else {
		p.buf[0] = 'X'
		binary.LittleEndian.PutUint32(p.buf[1:], uint32(len(s)))
		p.w.Write(p.buf[:5])
	}
	p.w.WriteString(s)
	p.strs[s] = p.memoize()
}

func (p *pickleEmitter) boolean(b bool) {
	p.item()
	if b {
		p.w.WriteByte(0x88)
	} else {
		p.w.WriteByte(0x89)
	}
}

func (p *pickleEmitter) none() {
	p.item()
	p.w.WriteByte('N')
}

func (p *pickleEmitter) frame(id FrameID) {
	if i, ok := p.frames[id]; ok {
		p.item()
		p.get(i)
		return
	}
	if int(id) >= len(p.s.Frames) || id < 0 {
		p.err = fmt.Errorf("snapshot: frame id %d out of range", id)
		p.none()
		return
	}
	f := &p.s.Frames[id]
	p.item()
	p.w.WriteString("}\x94(")
	p.frames[id] = p.memo
	p.memo++
	p.counts = append(p.counts, 0)
	p.dicts = append(p.dicts, true)
	p.key("name")
	p.str(f.Name)
	p.key("filename")
	p.str(f.Filename)
	p.key("line")
	if f.Line < 0 {
		p.uint(uint64(f.Line)) // size_t(-1) and friends, as read
	} else {
		p.int(f.Line)
	}
	emitExtraID(p.s, p, f.Extra)
	p.endDict()
}

func (p *pickleEmitter) stack(id StackID) {
	if i, ok := p.stacks[id]; ok {
		p.item()
		p.get(i)
		return
	}
	p.item()
	p.w.WriteString("]\x94(")
	p.stacks[id] = p.memo
	p.memo++
	p.counts = append(p.counts, 0)
	p.dicts = append(p.dicts, false)
	for _, f := range p.s.Stacks.Frames(id) {
		p.frame(f)
	}
	p.endList()
}

// jsonEmitter writes compact JSON.
type jsonEmitter struct {
	w     *bufio.Writer
	s     *Snapshot
	first []bool // per open container: no item written yet
	err   error
	buf   []byte
}

func (j *jsonEmitter) sep() {
	n := len(j.first)
	if n == 0 {
		return
	}
	if !j.first[n-1] {
		j.w.WriteByte(',')
	}
	j.first[n-1] = false
}

func (j *jsonEmitter) beginDict() { j.sep(); j.w.WriteByte('{'); j.first = append(j.first, true) }
func (j *jsonEmitter) key(k string) {
	j.sep()
	j.buf = pickle.AppendJSONString(j.buf[:0], k)
	j.w.Write(j.buf)
	j.w.WriteByte(':')
	j.first[len(j.first)-1] = true // the value needs no comma
}
func (j *jsonEmitter) endDict() {
	j.w.WriteByte('}')
	j.first = j.first[:len(j.first)-1]
	j.after()
}
func (j *jsonEmitter) beginList() { j.sep(); j.w.WriteByte('['); j.first = append(j.first, true) }
func (j *jsonEmitter) endList() {
	j.w.WriteByte(']')
	j.first = j.first[:len(j.first)-1]
	j.after()
}

// after marks the enclosing container as non-empty once a value ended.
func (j *jsonEmitter) after() {
	if n := len(j.first); n > 0 {
		j.first[n-1] = false
	}
}

func (j *jsonEmitter) pair(a, b int64) {
	j.sep()
	fmt.Fprintf(j.w, "[%d,%d]", a, b)
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
		b := strconv.AppendFloat(j.buf[:0], f, 'g', -1, 64)
		if !strings.ContainsAny(string(b), ".eE") {
			b = append(b, ".0"...)
		}
		j.w.Write(b)
	}
}
func (j *jsonEmitter) str(s string) {
	j.sep()
	j.buf = pickle.AppendJSONString(j.buf[:0], s)
	j.w.Write(j.buf)
}
func (j *jsonEmitter) boolean(b bool) {
	j.sep()
	j.w.WriteString(strconv.FormatBool(b))
}
func (j *jsonEmitter) none() { j.sep(); j.w.WriteString("null") }
func (j *jsonEmitter) frame(id FrameID) {
	j.sep()
	j.buf = appendFrameJSON(j.buf[:0], j.s, id)
	j.w.Write(j.buf)
}
func (j *jsonEmitter) stack(id StackID) {
	j.beginList()
	for _, f := range j.s.Stacks.Frames(id) {
		j.frame(f)
	}
	j.endList()
}
