package synth

import (
	"bufio"
	"encoding/binary"
	"io"
	"math"
	"strconv"

	"github.com/gpumem/gpumem/snapshot"
)

// This file writes synth's snapshots (generation D7, as built by Generate)
// as PyTorch would: a protocol-4 pickle with 64 KiB FRAMEs in which every
// string, dict, list and tuple is memoized and shared frame dicts and frame
// lists are written once and then referenced (BINGET), or as the JSON that
// memory_viz also accepts. It covers exactly the fields Generate fills.

// Pickle opcodes used here.
const (
	opProto          = 0x80
	opFrame          = 0x95
	opStop           = '.'
	opMark           = '('
	opMemoize        = 0x94
	opBinGet         = 'h'
	opLongBinGet     = 'j'
	opEmptyDict      = '}'
	opEmptyList      = ']'
	opSetItem        = 's'
	opSetItems       = 'u'
	opAppend         = 'a'
	opAppends        = 'e'
	opTuple2         = 0x86
	opShortBinUni    = 0x8c
	opBinUnicode     = 'X'
	opBinInt1        = 'K'
	opBinInt2        = 'M'
	opBinInt         = 'J'
	opLong1          = 0x8a
	opBinFloat       = 'G'
	opNewTrue        = 0x88
	opNewFalse       = 0x89
	frameSizeTarget  = 64 * 1024
	pickleBatchItems = 1000 // pickle's _BATCHSIZE for APPENDS/SETITEMS
)

// pickler is a minimal protocol-4 writer with Python's memo discipline.
type pickler struct {
	w     *bufio.Writer
	frame []byte
	memo  uint32
	strs  map[string]uint32
	err   error
}

func (p *pickler) op(b ...byte) { p.frame = append(p.frame, b...) }

// endItem closes the current frame once it has reached pickle's target size
// (Python's framer commits frames only between opcodes, as here).
func (p *pickler) endItem() {
	if len(p.frame) >= frameSizeTarget {
		p.flushFrame()
	}
}

func (p *pickler) flushFrame() {
	if len(p.frame) == 0 || p.err != nil {
		return
	}
	var hdr [9]byte
	hdr[0] = opFrame
	binary.LittleEndian.PutUint64(hdr[1:], uint64(len(p.frame)))
	if _, err := p.w.Write(hdr[:]); err != nil {
		p.err = err
	}
	if _, err := p.w.Write(p.frame); err != nil && p.err == nil {
		p.err = err
	}
	p.frame = p.frame[:0]
}

func (p *pickler) memoize() uint32 {
	p.op(opMemoize)
	p.memo++
	return p.memo - 1
}

func (p *pickler) get(i uint32) {
	if i < 256 {
		p.op(opBinGet, byte(i))
		return
	}
	p.op(opLongBinGet)
	p.frame = binary.LittleEndian.AppendUint32(p.frame, i)
}

func (p *pickler) str(s string) {
	if i, ok := p.strs[s]; ok {
		p.get(i)
		return
	}
	if len(s) < 256 {
		p.op(opShortBinUni, byte(len(s)))
	} else {
		p.op(opBinUnicode)
		p.frame = binary.LittleEndian.AppendUint32(p.frame, uint32(len(s)))
	}
	p.frame = append(p.frame, s...)
	p.strs[s] = p.memoize()
}

// int writes v as CPython's save_long does for protocol 2+.
func (p *pickler) int(v int64) {
	switch {
	case v >= 0 && v < 256:
		p.op(opBinInt1, byte(v))
	case v >= 0 && v < 65536:
		p.op(opBinInt2, byte(v), byte(v>>8))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		p.op(opBinInt)
		p.frame = binary.LittleEndian.AppendUint32(p.frame, uint32(int32(v)))
	default:
		// LONG1: minimal little-endian two's complement.
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		n := 8
		for n > 1 {
			top, next := b[n-1], b[n-2]
			if (top == 0 && next&0x80 == 0) || (top == 0xff && next&0x80 != 0) {
				n--
				continue
			}
			break
		}
		p.op(opLong1, byte(n))
		p.frame = append(p.frame, b[:n]...)
	}
}

// uint writes an unsigned value; addresses above 2^63 need 9 LONG1 bytes.
func (p *pickler) uint(v uint64) {
	if v <= math.MaxInt64 {
		p.int(int64(v))
		return
	}
	p.op(opLong1, 9)
	p.frame = binary.LittleEndian.AppendUint64(p.frame, v)
	p.frame = append(p.frame, 0)
}

func (p *pickler) float(f float64) {
	p.op(opBinFloat)
	p.frame = binary.BigEndian.AppendUint64(p.frame, math.Float64bits(f))
}

func (p *pickler) bool(b bool) {
	if b {
		p.op(opNewTrue)
	} else {
		p.op(opNewFalse)
	}
}

// dict writes a dict of n items; item(i) writes key i and its value.
func (p *pickler) dict(n int, item func(i int)) {
	p.op(opEmptyDict)
	p.memoize()
	p.batched(n, item, opSetItem, opSetItems)
}

// list writes a list of n items; item(i) writes item i.
func (p *pickler) list(n int, item func(i int)) uint32 {
	p.op(opEmptyList)
	m := p.memoize()
	p.batched(n, item, opAppend, opAppends)
	return m
}

// batched is pickle's _batch_appends/_batch_setitems: MARK ... APPENDS per
// 1000 items, a lone item with APPEND/SETITEM.
func (p *pickler) batched(n int, item func(i int), one, many byte) {
	for start := 0; start < n; start += pickleBatchItems {
		end := min(start+pickleBatchItems, n)
		if end-start == 1 {
			item(start)
			p.op(one)
		} else {
			p.op(opMark)
			for i := start; i < end; i++ {
				item(i)
				p.endItem()
			}
			p.op(many)
		}
		p.endItem()
	}
}

// writePickle writes s as a protocol-4 pickle.
func writePickle(w io.Writer, s *snapshot.Snapshot) error {
	p := &pickler{w: bufio.NewWriterSize(w, 1<<20), strs: map[string]uint32{}}
	frameMemo := make([]int64, len(s.Frames))
	for i := range frameMemo {
		frameMemo[i] = -1
	}
	stackMemo := make([]int64, s.Stacks.Len())
	for i := range stackMemo {
		stackMemo[i] = -1
	}
	frames := func(id snapshot.StackID) {
		if id > 0 && int(id) < len(stackMemo) && stackMemo[id] >= 0 {
			p.get(uint32(stackMemo[id]))
			return
		}
		fs := s.StackFrames(id)
		m := p.list(len(fs), func(i int) {
			fid := fs[i]
			if frameMemo[fid] >= 0 {
				p.get(uint32(frameMemo[fid]))
				return
			}
			f := &s.Frames[fid]
			p.op(opEmptyDict)
			frameMemo[fid] = int64(p.memoize())
			p.op(opMark)
			p.str("name")
			p.str(f.Name)
			p.str("filename")
			p.str(f.Filename)
			p.str("line")
			p.int(f.Line)
			p.op(opSetItems)
		})
		if id > 0 {
			stackMemo[id] = int64(m)
		}
	}

	p.w.Write([]byte{opProto, 4})
	topKeys := 2
	if s.AllocatorSettings != nil {
		topKeys++
	}
	if s.HasAnnotationsKey {
		topKeys++
	}
	p.dict(topKeys, func(k int) {
		switch k {
		case 0:
			p.str("segments")
			p.list(len(s.Segments), func(i int) { p.segment(s, i, frames) })
		case 1:
			p.str("device_traces")
			p.list(len(s.Traces), func(d int) {
				ev := s.Traces[d].Events
				p.list(len(ev), func(i int) { p.event(s, &ev[i], frames) })
			})
		case 2:
			if s.AllocatorSettings != nil {
				p.str("allocator_settings")
				p.settings(s.AllocatorSettings)
				return
			}
			fallthrough
		case 3:
			p.str("external_annotations")
			p.list(len(s.Annotations), func(i int) {
				a := &s.Annotations[i]
				p.dict(4, func(k int) {
					switch k {
					case 0:
						p.str("stage")
						p.str(a.Stage)
					case 1:
						p.str("name")
						p.str(a.Name)
					case 2:
						p.str("device")
						p.int(int64(a.Device))
					case 3:
						p.str("time_us")
						p.int(a.TimeUS)
					}
				})
			})
		}
	})
	p.op(opStop)
	p.flushFrame()
	if p.err != nil {
		return p.err
	}
	return p.w.Flush()
}

var segmentKeys = [...]string{"device", "address", "total_size", "allocated_size", "active_size", "requested_size",
	"stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}

func (p *pickler) segment(s *snapshot.Snapshot, i int, frames func(snapshot.StackID)) {
	seg := &s.Segments[i]
	p.dict(len(segmentKeys), func(k int) {
		p.str(segmentKeys[k])
		switch k {
		case 0:
			p.int(int64(seg.Device))
		case 1:
			p.uint(seg.Address)
		case 2:
			p.uint(seg.TotalSize)
		case 3:
			p.uint(seg.AllocatedSize)
		case 4:
			p.uint(seg.ActiveSize)
		case 5:
			p.uint(seg.RequestedSize)
		case 6:
			p.int(s.RawStream(seg.Stream))
		case 7:
			if seg.Large {
				p.str("large")
			} else {
				p.str("small")
			}
		case 8:
			p.int(seg.PoolID[0])
			p.int(seg.PoolID[1])
			p.op(opTuple2)
			p.memoize()
		case 9:
			p.bool(seg.IsExpandable)
		case 10:
			frames(seg.Stack)
		case 11:
			blocks := s.SegmentBlocks(i)
			p.list(len(blocks), func(j int) {
				b := &blocks[j]
				p.dict(5, func(k int) {
					switch k {
					case 0:
						p.str("address")
						p.uint(b.Addr)
					case 1:
						p.str("size")
						p.uint(b.Size)
					case 2:
						p.str("requested_size")
						p.uint(b.RequestedSize)
					case 3:
						p.str("state")
						p.str(b.State.String())
					case 4:
						p.str("frames")
						frames(b.Stack)
					}
				})
			})
		}
	})
}

func (p *pickler) event(s *snapshot.Snapshot, e *snapshot.Event, frames func(snapshot.StackID)) {
	p.dict(8, func(k int) {
		switch k {
		case 0:
			p.str("action")
			p.str(e.Action.String())
		case 1:
			if e.Action == snapshot.ActionOOM {
				p.str("device_free")
			} else {
				p.str("addr")
			}
			p.uint(e.Addr)
		case 2:
			p.str("size")
			p.uint(e.Size)
		case 3:
			p.str("stream")
			p.int(s.RawStream(e.Stream))
		case 4:
			p.str("time_us")
			p.int(e.TimeUS)
		case 5:
			p.str("compile_context")
			p.str(s.String(e.CompileContext))
		case 6:
			p.str("user_metadata")
			p.str(s.String(e.UserMetadata))
		case 7:
			p.str("frames")
			frames(e.Stack)
		}
	})
}

func (p *pickler) settings(a *snapshot.AllocatorSettings) {
	raw := a.Raw
	p.dict(len(raw), func(k int) {
		kv := raw[k]
		p.str(kv.Key)
		switch kv.Key {
		case "PYTORCH_CUDA_ALLOC_CONF":
			p.str(a.Conf)
		case "max_split_size":
			p.int(a.MaxSplitSize)
		case "garbage_collection_threshold":
			p.float(a.GarbageCollectionThreshold)
		case "roundup_power2_divisions":
			d := a.RoundupPower2Divisions
			p.dict(len(d), func(i int) {
				p.str(d[i].IntervalMiB)
				p.int(d[i].Divisions)
			})
		default:
			// The remaining settings are booleans or small ints, kept as JSON.
			switch kv.JSON {
			case "true":
				p.bool(true)
			case "false":
				p.bool(false)
			default:
				n, _ := strconv.ParseInt(kv.JSON, 10, 64)
				p.int(n)
			}
		}
	})
}

// jsonWriter writes the same structure as json.dumps(snapshot) would.
type jsonWriter struct {
	w   *bufio.Writer
	buf []byte
}

func (j *jsonWriter) raw(s string) { j.w.WriteString(s) }

func (j *jsonWriter) str(s string) {
	j.buf = strconv.AppendQuoteToASCII(j.buf[:0], s)
	// strconv quoting matches JSON for the ASCII text written here except for
	// escapes JSON lacks; map them to \u forms.
	j.w.Write(jsonFixEscapes(j.buf))
}

func (j *jsonWriter) int(v int64) { j.w.Write(strconv.AppendInt(j.buf[:0], v, 10)) }
func (j *jsonWriter) uint(v uint64) {
	j.w.Write(strconv.AppendUint(j.buf[:0], v, 10))
}

// jsonFixEscapes rewrites Go escapes that are not JSON (\a \v \x..) as \u00XX.
func jsonFixEscapes(q []byte) []byte {
	var out []byte
	for i := 0; i < len(q); i++ {
		if q[i] != '\\' || i+1 >= len(q) {
			if out != nil {
				out = append(out, q[i])
			}
			continue
		}
		var rep string
		switch q[i+1] {
		case 'a':
			rep = `\u0007`
		case 'v':
			rep = `\u000b`
		case 'x':
			if i+3 < len(q) {
				rep = `\u00` + string(q[i+2:i+4])
			}
		}
		if rep == "" {
			if out != nil {
				out = append(out, q[i], q[i+1])
			}
			i++
			continue
		}
		if out == nil {
			out = append([]byte{}, q[:i]...)
		}
		out = append(out, rep...)
		if q[i+1] == 'x' {
			i += 3
		} else {
			i++
		}
	}
	if out == nil {
		return q
	}
	return out
}

// writeJSON writes s as JSON with Python's default separators.
func writeJSON(w io.Writer, s *snapshot.Snapshot) error {
	j := &jsonWriter{w: bufio.NewWriterSize(w, 1<<20)}
	frames := func(id snapshot.StackID) {
		j.raw("[")
		for i, fid := range s.StackFrames(id) {
			if i > 0 {
				j.raw(", ")
			}
			f := &s.Frames[fid]
			j.raw(`{"name": `)
			j.str(f.Name)
			j.raw(`, "filename": `)
			j.str(f.Filename)
			j.raw(`, "line": `)
			j.int(f.Line)
			j.raw("}")
		}
		j.raw("]")
	}
	j.raw(`{"segments": [`)
	for i := range s.Segments {
		if i > 0 {
			j.raw(", ")
		}
		seg := &s.Segments[i]
		j.raw(`{"device": `)
		j.int(int64(seg.Device))
		j.raw(`, "address": `)
		j.uint(seg.Address)
		j.raw(`, "total_size": `)
		j.uint(seg.TotalSize)
		j.raw(`, "allocated_size": `)
		j.uint(seg.AllocatedSize)
		j.raw(`, "active_size": `)
		j.uint(seg.ActiveSize)
		j.raw(`, "requested_size": `)
		j.uint(seg.RequestedSize)
		j.raw(`, "stream": `)
		j.int(s.RawStream(seg.Stream))
		if seg.Large {
			j.raw(`, "segment_type": "large"`)
		} else {
			j.raw(`, "segment_type": "small"`)
		}
		j.raw(`, "segment_pool_id": [`)
		j.int(seg.PoolID[0])
		j.raw(", ")
		j.int(seg.PoolID[1])
		j.raw(`], "is_expandable": `)
		j.raw(strconv.FormatBool(seg.IsExpandable))
		j.raw(`, "frames": `)
		frames(seg.Stack)
		j.raw(`, "blocks": [`)
		for k, b := range s.SegmentBlocks(i) {
			if k > 0 {
				j.raw(", ")
			}
			j.raw(`{"address": `)
			j.uint(b.Addr)
			j.raw(`, "size": `)
			j.uint(b.Size)
			j.raw(`, "requested_size": `)
			j.uint(b.RequestedSize)
			j.raw(`, "state": `)
			j.str(b.State.String())
			j.raw(`, "frames": `)
			frames(b.Stack)
			j.raw("}")
		}
		j.raw("]}")
	}
	j.raw(`], "device_traces": [`)
	for d := range s.Traces {
		if d > 0 {
			j.raw(", ")
		}
		j.raw("[")
		for i := range s.Traces[d].Events {
			e := &s.Traces[d].Events[i]
			if i > 0 {
				j.raw(", ")
			}
			j.raw(`{"action": `)
			j.str(e.Action.String())
			if e.Action == snapshot.ActionOOM {
				j.raw(`, "device_free": `)
			} else {
				j.raw(`, "addr": `)
			}
			j.uint(e.Addr)
			j.raw(`, "size": `)
			j.uint(e.Size)
			j.raw(`, "stream": `)
			j.int(s.RawStream(e.Stream))
			j.raw(`, "time_us": `)
			j.int(e.TimeUS)
			j.raw(`, "compile_context": `)
			j.str(s.String(e.CompileContext))
			j.raw(`, "user_metadata": `)
			j.str(s.String(e.UserMetadata))
			j.raw(`, "frames": `)
			frames(e.Stack)
			j.raw("}")
		}
		j.raw("]")
	}
	j.raw("]")
	if a := s.AllocatorSettings; a != nil {
		j.raw(`, "allocator_settings": {`)
		for i, kv := range a.Raw {
			if i > 0 {
				j.raw(", ")
			}
			j.str(kv.Key)
			j.raw(": ")
			j.raw(pyJSON(kv.JSON))
		}
		j.raw("}")
	}
	if s.HasAnnotationsKey {
		j.raw(`, "external_annotations": [`)
		for i, a := range s.Annotations {
			if i > 0 {
				j.raw(", ")
			}
			j.raw(`{"stage": `)
			j.str(a.Stage)
			j.raw(`, "name": `)
			j.str(a.Name)
			j.raw(`, "device": `)
			j.int(int64(a.Device))
			j.raw(`, "time_us": `)
			j.int(a.TimeUS)
			j.raw("}")
		}
		j.raw("]")
	}
	j.raw("}")
	return j.w.Flush()
}

// pyJSON respaces compact JSON with Python's ", " and ": " separators (the
// settings values are flat: numbers, booleans, strings without those
// characters, or one dict of numbers).
func pyJSON(s string) string {
	out := make([]byte, 0, len(s)+16)
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		out = append(out, c)
		switch {
		case c == '"' && (i == 0 || s[i-1] != '\\'):
			inStr = !inStr
		case !inStr && (c == ',' || c == ':'):
			out = append(out, ' ')
		}
	}
	return string(out)
}
