package pickle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits that keep hostile input from exhausting memory.
const (
	// MaxStack bounds the VM stack (values plus marks); deeper nesting is
	// refused rather than risking unbounded memory or recursion later.
	MaxStack = 1 << 19
	// chunkSize is how much the streaming reader asks for at a time.
	chunkSize = 1 << 20
)

// A Finisher turns complete containers into compact caller-defined values.
//
// Finish is called for each container when it is complete: when it is added
// to another container, consumed by REDUCE/BUILD/NEWOBJ, or returned by STOP.
// It returns v unchanged or a replacement (typically a Handle). A replacement
// also replaces v in the memo, and v's container slot is recycled, so Finish
// must copy whatever it keeps from Items.
type Finisher interface {
	Finish(d *Decoder, v Value) (Value, error)
}

// An Appender is a Finisher that may also take over items appended to a
// list (APPEND/APPENDS), e.g. to keep a run of typed handles instead of
// 16-byte values. Append returns true when it consumed the items.
type Appender interface {
	Append(d *Decoder, list Value, items []Value) bool
}

// contPage is the container table's page size.
const contPage = 1024

// objExtra holds the parts of an Object container beyond its items.
type objExtra struct {
	cls, args, state Value
	list             []Value
}

// Decoder is a pickle virtual machine that never executes anything.
type Decoder struct {
	r     io.Reader
	buf   []byte
	pos   int
	end   int
	base  int64 // stream offset of buf[0]
	eof   bool
	total int64 // total stream size when known, else -1
	// A bytes decoder with a progress hook hands the VM its input a
	// window at a time: buf[:end] is the window, buf[:limit] the input,
	// and fill opens the next window (see SetProgress).
	limit    int
	every    int
	progress func(off int64)

	op    byte
	opOff int64
	proto int

	stack []Value
	marks []int32

	memo      [][]uint64
	memoLen   uint64
	memoMap   map[uint64]Value
	memoCount int
	// runs hold ranges of memo entries a splitter made, by first index
	// (MemoizeRun); runEnd is past the last. Their slots are holes, in
	// the shared holePage for the pages they start; sharedEnd is past
	// the last such page (writes below it go through ownPage).
	runs      []memoRun
	runEnd    uint64
	sharedEnd uint64

	conts  [][]container
	nconts uint32
	free   []uint32
	objs   map[uint32]*objExtra

	strs   []string
	strIdx map[string]uint32
	bytes  [][]byte
	bigs   []*big.Int

	fin   Finisher
	app   Appender
	dfin  DictFinisher
	entry EntryReader
	split Splitter // reads part of the input on another core (see Splitter)
	// strRewrites counts overwrites of memo slots holding a str (see
	// MemoRewrites).
	strRewrites uint64
	readErr     error // first read error, reported even if a look-ahead hit it
	// overLimit, when set, is the error for a length field claiming more
	// than the total set by SetSizeLimit (a bound, not the exact size).
	overLimit  func(off int64, need int64) error
	kvScratch  []Value
	pendingRel []Value
	work       []Value
}

// NewDecoder returns a decoder reading a pickle stream from r. fin may be nil.
func NewDecoder(r io.Reader, fin Finisher) *Decoder {
	d := newDecoder(fin)
	d.r = r
	d.total = -1
	d.buf = make([]byte, chunkSize)
	return d
}

// NewBytesDecoder returns a decoder over an in-memory pickle.
func NewBytesDecoder(b []byte, fin Finisher) *Decoder {
	d := newDecoder(fin)
	d.buf = b
	d.end = len(b)
	d.eof = true
	d.total = int64(len(b))
	return d
}

func newDecoder(fin Finisher) *Decoder {
	d := &Decoder{fin: fin, strIdx: make(map[string]uint32), objs: map[uint32]*objExtra{}}
	d.app, _ = fin.(Appender)
	d.dfin, _ = fin.(DictFinisher)
	d.entry, _ = fin.(EntryReader)
	d.strs = append(d.strs, "")
	d.strIdx[""] = 0
	return d
}

// SetProgress makes a bytes decoder call fn with the offset it has
// reached every time it has read about every more bytes. It must be called
// before Decode; streaming decoders ignore it (their reader can count).
//
// The input is handed to the VM a window at a time, so the check costs
// nothing on the hot path: reaching the end of a window is already the
// VM's test for a refill.
func (d *Decoder) SetProgress(every int, fn func(off int64)) {
	if d.r != nil || every <= 0 || fn == nil {
		return
	}
	d.limit, d.every, d.progress = d.end, every, fn
	d.end = min(d.end, every)
}

// canFill reports whether fill may make more bytes available.
func (d *Decoder) canFill() bool {
	return (d.r != nil && !d.eof) || d.end < d.limit
}

// SetSizeHint tells the decoder the stream's total size (when known), so
// that length fields claiming more are refused before allocating.
func (d *Decoder) SetSizeHint(n int64) {
	if d.r != nil {
		d.total = n
	}
}

// SetSizeLimit is SetSizeHint for a stream whose size is not known but
// bounded by n (a decompressed input): a length field claiming more than
// the bound leaves is refused before allocating, with over's error (given
// the opcode's offset and the bytes claimed).
func (d *Decoder) SetSizeLimit(n int64, over func(off, need int64) error) {
	if d.r != nil && n >= 0 {
		d.total, d.overLimit = n, over
	}
}

// Protocol returns the protocol named by the PROTO opcode (0 if none).
func (d *Decoder) Protocol() int { return d.proto }

// Offset returns the stream offset of the opcode being decoded.
func (d *Decoder) Offset() int64 { return d.opOff }

// Errorf returns an *Error at the current opcode.
func (d *Decoder) Errorf(format string, args ...any) *Error {
	return &Error{Offset: d.opOff, Op: d.op, Msg: fmt.Sprintf(format, args...)}
}

func (d *Decoder) opErr(format string, args ...any) *Error {
	return &Error{Offset: d.opOff, Op: d.op, Msg: OpName(d.op) + ": " + fmt.Sprintf(format, args...)}
}

// fill makes at least n unread bytes available in buf[pos:end].
func (d *Decoder) fill(n int) error {
	if d.end-d.pos >= n {
		return nil
	}
	if d.end < d.limit {
		// A bytes decoder's next window.
		d.end = min(d.limit, max(d.pos+n, d.end+d.every))
		d.progress(int64(d.pos))
		if d.end-d.pos >= n {
			return nil
		}
		return d.truncated(n)
	}
	if d.readErr != nil {
		// Sticky: a read error seen by a look-ahead that ignored it.
		return d.readErr
	}
	if d.r == nil || d.eof {
		return d.truncated(n)
	}
	if d.total >= 0 && int64(n) > d.total-(d.base+int64(d.pos)) {
		if d.overLimit != nil {
			return d.overLimit(d.opOff, int64(n))
		}
		return d.truncated(n)
	}
	if d.pos > 0 {
		copy(d.buf, d.buf[d.pos:d.end])
		d.base += int64(d.pos)
		d.end -= d.pos
		d.pos = 0
	}
	for d.end < n {
		if d.end == len(d.buf) {
			// Grow by doubling so a bogus length costs at most twice the
			// data that is really there.
			size := 2 * len(d.buf)
			if size < chunkSize {
				size = chunkSize
			}
			if size > n && n > len(d.buf) {
				size = max(n, len(d.buf)+len(d.buf)/4)
			}
			nb := make([]byte, size)
			copy(nb, d.buf[:d.end])
			d.buf = nb
		}
		m, err := d.r.Read(d.buf[d.end:])
		d.end += m
		if err == io.EOF {
			d.eof = true
			break
		}
		if err != nil {
			d.readErr = &Error{Offset: d.base + int64(d.end), Op: d.op, Msg: "read error: " + err.Error(), Err: err}
			return d.readErr
		}
	}
	if d.end < n {
		return d.truncated(n)
	}
	return nil
}

func (d *Decoder) truncated(n int) error {
	left := d.end - d.pos
	if d.op == 0 || d.base+int64(d.pos) == d.opOff {
		if left == 0 && n == 1 {
			return &Error{Offset: d.opOff, Msg: "unexpected end of input: no STOP opcode"}
		}
	}
	return &Error{Offset: d.opOff, Op: d.op,
		Msg: fmt.Sprintf("truncated %s: need %d bytes, %d left", OpName(d.op), n, left)}
}

// take returns the next n bytes; the slice is valid until the next read.
func (d *Decoder) take(n int) ([]byte, error) {
	p := d.pos
	if e := p + n; e <= d.end {
		d.pos = e
		return d.buf[p:e], nil
	}
	return d.takeSlow(n)
}

// takeSlow refills, keeping take small enough to inline.
func (d *Decoder) takeSlow(n int) ([]byte, error) {
	if err := d.fill(n); err != nil {
		return nil, err
	}
	b := d.buf[d.pos : d.pos+n]
	d.pos += n
	return b, nil
}

// takeLen reads a length field's payload, refusing lengths beyond the input.
func (d *Decoder) takeLen(n uint64) ([]byte, error) {
	if n > math.MaxInt32*4 || (d.total >= 0 && int64(n) > d.total-(d.base+int64(d.pos))) {
		left := int64(d.end - d.pos)
		if d.total >= 0 {
			left = d.total - (d.base + int64(d.pos))
			if d.overLimit != nil {
				return nil, d.overLimit(d.opOff, int64(min(n, math.MaxInt64)))
			}
		}
		return nil, &Error{Offset: d.opOff, Op: d.op,
			Msg: fmt.Sprintf("truncated %s: need %d bytes, %d left", OpName(d.op), n, left)}
	}
	return d.take(int(n))
}

// lenPrefixed reads the payload of an opcode that gives its length first:
// in 1 byte (SHORT_* and LONG1), 8 bytes (*8) or 4 bytes (the rest, where
// BINSTRING and LONG4 take it as signed, like Python).
func (d *Decoder) lenPrefixed(op byte) ([]byte, error) {
	switch op {
	case opShortBinUnicode, opShortBinString, opShortBinBytes, opLong1:
		b, err := d.take(1)
		if err != nil {
			return nil, err
		}
		return d.take(int(b[0]))
	case opBinUnicode8, opBinBytes8, opByteArray8:
		b, err := d.take(8)
		if err != nil {
			return nil, err
		}
		return d.takeLen(binary.LittleEndian.Uint64(b))
	}
	b, err := d.take(4)
	if err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(b)
	if (op == opBinString || op == opLong4) && int32(n) < 0 {
		return nil, d.opErr("negative length %d", int32(n))
	}
	return d.takeLen(uint64(n))
}

// line reads up to and including '\n' and returns it without the newline.
func (d *Decoder) line() ([]byte, error) {
	// scanned counts bytes already searched, so small input windows do not
	// make a long line quadratic.
	scanned := 0
	for {
		if i := bytes.IndexByte(d.buf[d.pos+scanned:d.end], '\n'); i >= 0 {
			i += scanned
			b := d.buf[d.pos : d.pos+i]
			d.pos += i + 1
			return b, nil
		}
		have := d.end - d.pos
		scanned = have
		if have > 1<<20 {
			return nil, d.opErr("line too long")
		}
		if !d.canFill() {
			return nil, &Error{Offset: d.opOff, Op: d.op, Msg: fmt.Sprintf("truncated %s: no newline", OpName(d.op))}
		}
		if err := d.fill(have + 1); err != nil {
			return nil, &Error{Offset: d.opOff, Op: d.op, Msg: fmt.Sprintf("truncated %s: no newline", OpName(d.op))}
		}
	}
}

// Intern returns the string id of s, adding it if new.
func (d *Decoder) Intern(s string) uint32 {
	if id, ok := d.strIdx[s]; ok {
		return id
	}
	id := uint32(len(d.strs))
	d.strs = append(d.strs, s)
	d.strIdx[s] = id
	return id
}

func (d *Decoder) internBytes(b []byte) Value {
	if id, ok := d.strIdx[string(b)]; ok {
		return Value{Kind: String, X: uint64(id)}
	}
	s := string(b)
	id := uint32(len(d.strs))
	d.strs = append(d.strs, s)
	d.strIdx[s] = id
	return Value{Kind: String, X: uint64(id)}
}

func (d *Decoder) push(v Value) error {
	n := len(d.stack)
	if n < cap(d.stack) {
		d.stack = d.stack[:n+1]
		d.stack[n] = v
		return nil
	}
	return d.pushGrow(v)
}

// pushGrow grows the stack, refusing to pass MaxStack.
func (d *Decoder) pushGrow(v Value) error {
	if len(d.stack) >= MaxStack {
		return d.tooDeep()
	}
	d.stack = append(d.stack, v)
	return nil
}

// underflow and noMark are the stack helpers' errors.
func (d *Decoder) underflow() error { return d.opErr("stack underflow") }

func (d *Decoder) noMark() error { return d.opErr("no MARK on the stack") }

func (d *Decoder) tooDeep() error {
	return d.opErr("stack too deep: more than %d entries", MaxStack)
}

func (d *Decoder) pop() (Value, error) {
	n := len(d.stack)
	if n == 0 || (len(d.marks) > 0 && int(d.marks[len(d.marks)-1]) >= n) {
		return Value{}, d.underflow()
	}
	v := d.stack[n-1]
	d.stack = d.stack[:n-1]
	return v, nil
}

func (d *Decoder) top() (*Value, error) {
	n := len(d.stack)
	if n == 0 || (len(d.marks) > 0 && int(d.marks[len(d.marks)-1]) >= n) {
		return nil, d.underflow()
	}
	return &d.stack[n-1], nil
}

// above returns the top n values, refusing to reach below the topmost mark.
func (d *Decoder) above(n int) ([]Value, error) {
	k := len(d.stack)
	if k < n || (len(d.marks) > 0 && int(d.marks[len(d.marks)-1]) > k-n) {
		return nil, d.underflow()
	}
	return d.stack[k-n:], nil
}

// popMark returns the values above the topmost mark (valid until the next
// push) and removes them and the mark.
func (d *Decoder) popMark() ([]Value, error) {
	if len(d.marks) == 0 {
		return nil, d.noMark()
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := d.stack[m:]
	d.stack = d.stack[:m]
	return items, nil
}

// newCont allocates a container slot.
func (d *Decoder) newCont(k Kind, n int) (Value, *container) {
	var id uint32
	if len(d.free) > 0 {
		id = d.free[len(d.free)-1]
		d.free = d.free[:len(d.free)-1]
	} else {
		// The table is paged so that growing it never copies.
		id = d.nconts
		if id&(contPage-1) == 0 {
			d.conts = append(d.conts, make([]container, contPage))
		}
		d.nconts++
	}
	c := &d.conts[id/contPage][id%contPage]
	c.kind = k
	c.memo = -1
	c.multi = false
	c.hasCont = false
	if cap(c.items) < n {
		c.items = make([]Value, 0, n)
	}
	return Value{Kind: k, X: uint64(c.gen&genMask)<<32 | uint64(id)}, c
}

// cont returns v's container, or nil if v is not a live container.
func (d *Decoder) cont(v Value) *container {
	if !v.IsContainer() {
		return nil
	}
	id := uint32(v.X)
	if id >= d.nconts {
		return nil
	}
	c := &d.conts[id/contPage][id%contPage]
	if c.gen&genMask != uint32(v.X>>32) || c.kind != v.Kind {
		return nil
	}
	return c
}

// release recycles a container and the unmemoized containers inside it.
func (d *Decoder) release(v Value) {
	work := append(d.work[:0], v)
	defer func() { d.work = work[:0] }()
	for len(work) > 0 {
		v := work[len(work)-1]
		work = work[:len(work)-1]
		c := d.cont(v)
		if c == nil {
			continue
		}
		if c.hasCont {
			for _, it := range c.items {
				if it.IsContainer() {
					if ic := d.cont(it); ic != nil && ic.memo < 0 && it != v {
						work = append(work, it)
					}
				}
			}
		}
		id := uint32(v.X)
		if c.kind == Object {
			delete(d.objs, id)
		}
		c.gen++
		c.kind = None
		c.pending = false
		c.hasCont = false
		c.repl = Value{}
		if cap(c.items) > 4096 {
			c.items = nil
		} else {
			c.items = c.items[:0]
		}
		d.free = append(d.free, id)
	}
}

// finish hands a complete container to the Finisher.
func (d *Decoder) finish(v Value) (Value, error) {
	if d.fin == nil || !v.IsContainer() {
		return v, nil
	}
	c := d.cont(v)
	if c != nil && c.pending {
		// The same container was on the stack twice (pushed, then fetched
		// from the memo before it was finished): reuse the replacement.
		return c.repl, nil
	}
	nv, err := d.fin.Finish(d, v)
	if err != nil {
		return v, err
	}
	if nv != v {
		c = d.cont(v)
		if c != nil {
			if c.memo >= 0 {
				if old, ok := d.memoGet(uint64(c.memo)); ok && old == v {
					d.memoPut(uint64(c.memo), nv)
				}
			}
			if !c.multi {
				c.pending = true
				c.repl = nv
				d.pendingRel = append(d.pendingRel, v)
				if len(d.pendingRel) >= 256 {
					d.flushReleases()
				}
			}
		}
	}
	return nv, nil
}

// flushReleases rewrites stack copies of replaced containers and recycles
// their slots.
func (d *Decoder) flushReleases() {
	for i, v := range d.stack {
		if c := d.cont(v); c != nil && c.pending {
			d.stack[i] = c.repl
		}
	}
	for _, v := range d.pendingRel {
		d.release(v)
	}
	d.pendingRel = d.pendingRel[:0]
}

func (d *Decoder) finishAll(vs []Value) error {
	if d.fin == nil {
		return nil
	}
	for i, v := range vs {
		if v.IsContainer() {
			nv, err := d.finish(v)
			if err != nil {
				return err
			}
			vs[i] = nv
		}
	}
	return nil
}

// The memo's dense part is paged so that growing it never copies. Slots
// pack a Value into 8 bytes (kind, sub-tag, 56-bit payload); the rare value
// that does not fit (a big int or float payload) lives in memoMap and its
// slot says so.
const memoPageBits = 16

// genMask keeps container generations within the packed payload.
const genMask = 1<<24 - 1

const (
	slotHole    = uint64(mark)        // no entry
	slotSpilled = uint64(mark) | 1<<4 // entry in memoMap
	payloadMax  = uint64(1)<<56 - 1   // largest packed payload
)

func packSlot(v Value) (uint64, bool) {
	if v.X > payloadMax || v.Sub > 15 {
		return 0, false
	}
	return uint64(v.Kind) | uint64(v.Sub)<<4 | v.X<<8, true
}

func unpackSlot(s uint64) Value {
	return Value{Kind: Kind(s & 15), Sub: uint8(s>>4) & 15, X: s >> 8}
}

func (d *Decoder) memoSlot(i uint64) *uint64 {
	return &d.memo[i>>memoPageBits][i&(1<<memoPageBits-1)]
}

func (d *Decoder) memoGet(i uint64) (Value, bool) {
	if i < d.memoLen {
		if s := *d.memoSlot(i); s&15 != uint64(mark) {
			return unpackSlot(s), true
		}
	}
	v, ok := d.memoMap[i]
	if !ok && i < d.runEnd {
		return d.runValue(i)
	}
	return v, ok
}

func (d *Decoder) memoPut(i uint64, v Value) {
	if i >= d.memoLen && i <= uint64(2*d.memoCount+1024) {
		// Dense indices go to the pages; their number stays within a
		// small multiple of the entries, so sparse indices (kept in the
		// map) cannot make the memo outgrow the input.
		for d.memoLen <= i {
			if d.memoLen&(1<<memoPageBits-1) == 0 {
				page := make([]uint64, 1<<memoPageBits)
				for j := range page {
					page[j] = slotHole
				}
				d.memo = append(d.memo, page)
			}
			d.memoLen++
		}
	}
	if i < d.memoLen {
		if i < d.sharedEnd {
			d.ownPage(i)
		}
		p := d.memoSlot(i)
		if *p&15 == uint64(String) {
			d.strRewrites++
		}
		if *p == slotHole {
			if _, ok := d.memoMap[i]; !ok && !d.inRun(i) {
				d.memoCount++
			}
		}
		if packed, ok := packSlot(v); ok {
			*p = packed
			if d.memoMap != nil {
				delete(d.memoMap, i)
			}
			return
		}
		*p = slotSpilled
	} else if _, ok := d.memoMap[i]; !ok {
		d.memoCount++
	}
	if d.memoMap == nil {
		d.memoMap = map[uint64]Value{}
	}
	d.memoMap[i] = v
}

func (d *Decoder) put(i uint64) error {
	t, err := d.top()
	if err != nil {
		return err
	}
	d.putValue(i, *t)
	return nil
}

// putValue memoizes v at i, noting the index on a container.
func (d *Decoder) putValue(i uint64, v Value) {
	d.memoPut(i, v)
	if c := d.cont(v); c != nil {
		if c.memo >= 0 && c.memo != int64(i) {
			c.multi = true
		}
		c.memo = int64(i)
	}
}

func (d *Decoder) get(i uint64) error {
	v, ok := d.memoGet(i)
	if !ok {
		return d.opErr("memo key %d not found", i)
	}
	if v.IsContainer() && d.cont(v) == nil {
		return d.opErr("memo key %d refers to a released container", i)
	}
	return d.push(v)
}

// Decode runs the VM until STOP and returns the (finished) result.
func (d *Decoder) Decode() (Value, error) {
	v, err := d.run()
	// The memo serves the VM only: its pages (8 bytes an entry, a tenth of
	// a snapshot's size) are let go before the caller assembles the
	// result, which allocates meanwhile.
	d.memo, d.memoMap, d.memoLen, d.runs, d.runEnd, d.sharedEnd = nil, nil, 0, nil, 0, 0
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			err = &Error{Offset: d.opOff, Op: d.op, Msg: err.Error(), Err: err}
		}
		return Value{}, err
	}
	return v, nil
}

func (d *Decoder) run() (Value, error) {
	for {
		if d.pos >= d.end {
			d.op = 0
			d.opOff = d.base + int64(d.pos)
			if err := d.fill(1); err != nil {
				return Value{}, err
			}
		}
		d.opOff = d.base + int64(d.pos)
		op := d.buf[d.pos]
		d.pos++
		d.op = op
		switch op {
		case opBinGet, opLongBinGet:
			// Memo reads are most of a snapshot's opcodes: fast path for
			// a non-container entry with the bytes and stack room at hand.
			var i uint64
			if p := d.pos; op == opBinGet && p < d.end {
				i = uint64(d.buf[p])
				d.pos = p + 1
			} else if op == opLongBinGet && p+4 <= d.end {
				i = uint64(binary.LittleEndian.Uint32(d.buf[p : p+4]))
				d.pos = p + 4
			} else {
				n := 1
				if op == opLongBinGet {
					n = 4
				}
				b, err := d.take(n)
				if err != nil {
					return Value{}, err
				}
				i = uint64(b[0])
				if n == 4 {
					i = uint64(binary.LittleEndian.Uint32(b))
				}
			}
			if i < d.memoLen {
				slot := d.memo[i>>memoPageBits][i&(1<<memoPageBits-1)]
				if k := Kind(slot & 15); k != mark && (k < List || k > Object) {
					if n := len(d.stack); n < cap(d.stack) {
						d.stack = d.stack[:n+1]
						d.stack[n] = unpackSlot(slot)
						continue
					}
				}
			}
			if err := d.get(i); err != nil {
				return Value{}, err
			}
		case opMemoize:
			if err := d.put(uint64(d.memoCount)); err != nil {
				return Value{}, err
			}
		case opBinPut:
			b, err := d.take(1)
			if err != nil {
				return Value{}, err
			}
			if err := d.put(uint64(b[0])); err != nil {
				return Value{}, err
			}
		case opLongBinPut:
			b, err := d.take(4)
			if err != nil {
				return Value{}, err
			}
			if err := d.put(uint64(binary.LittleEndian.Uint32(b))); err != nil {
				return Value{}, err
			}
		case opMark:
			if d.split != nil && d.split.SplitAt() == d.opOff {
				took, err := d.split.Split(d)
				if err != nil {
					return Value{}, err
				}
				if took {
					continue
				}
			}
			if len(d.marks)+len(d.stack) >= MaxStack {
				return Value{}, d.opErr("stack too deep: more than %d entries", MaxStack)
			}
			d.marks = append(d.marks, int32(len(d.stack)))
		case opBinInt1:
			b, err := d.take(1)
			if err != nil {
				return Value{}, err
			}
			if err := d.push(intValue(int64(b[0]))); err != nil {
				return Value{}, err
			}
		case opBinInt2:
			b, err := d.take(2)
			if err != nil {
				return Value{}, err
			}
			if err := d.push(intValue(int64(binary.LittleEndian.Uint16(b)))); err != nil {
				return Value{}, err
			}
		case opBinInt:
			b, err := d.take(4)
			if err != nil {
				return Value{}, err
			}
			if err := d.push(intValue(int64(int32(binary.LittleEndian.Uint32(b))))); err != nil {
				return Value{}, err
			}
		case opLong1, opLong4:
			p, err := d.lenPrefixed(op)
			if err != nil {
				return Value{}, err
			}
			if err := d.push(d.longValue(p)); err != nil {
				return Value{}, err
			}
		case opShortBinUnicode, opShortBinString, opBinUnicode, opBinString, opBinUnicode8:
			p, err := d.lenPrefixed(op)
			if err != nil {
				return Value{}, err
			}
			if err := d.push(d.internBytes(p)); err != nil {
				return Value{}, err
			}
		case opShortBinBytes, opBinBytes, opBinBytes8, opByteArray8:
			p, err := d.lenPrefixed(op)
			if err != nil {
				return Value{}, err
			}
			if err := d.push(d.bytesValue(p)); err != nil {
				return Value{}, err
			}
		case opEmptyDict, opEmptyList, opEmptyTuple, opEmptySet:
			if op == opEmptyDict && d.dfin != nil {
				if err := d.fastDict(); err != nil {
					return Value{}, err
				}
				continue
			}
			v, _ := d.newCont(emptyKind(op), 0)
			if err := d.push(v); err != nil {
				return Value{}, err
			}
		case opSetItems, opAppends, opAddItems:
			if err := d.addMarked(); err != nil {
				return Value{}, err
			}
		case opSetItem, opAppend:
			// The target and one key/value pair or one item.
			n := 3
			if op == opAppend {
				n = 2
			}
			s, err := d.above(n)
			if err != nil {
				return Value{}, err
			}
			if err := d.addTo(s[0], s[1:]); err != nil {
				return Value{}, err
			}
			d.stack = d.stack[:len(d.stack)-(n-1)]
		case opTuple1, opTuple2, opTuple3:
			n := int(op-opTuple1) + 1
			items, err := d.above(n)
			if err != nil {
				return Value{}, err
			}
			v, err := d.seq(Tuple, items)
			if err != nil {
				return Value{}, err
			}
			d.stack = d.stack[:len(d.stack)-n]
			d.stack = append(d.stack, v)
		case opTuple, opList, opFrozenSet:
			items, err := d.popMark()
			if err != nil {
				return Value{}, err
			}
			k := Tuple
			if op == opList {
				k = List
			} else if op == opFrozenSet {
				k = FrozenSet
			}
			v, err := d.seq(k, items)
			if err != nil {
				return Value{}, err
			}
			d.stack = append(d.stack, v)
		case opDict:
			items, err := d.popMark()
			if err != nil {
				return Value{}, err
			}
			if len(items)%2 != 0 {
				return Value{}, d.opErr("odd number of items (%d)", len(items))
			}
			if err := d.finishAll(items); err != nil {
				return Value{}, err
			}
			v, c := d.newCont(Dict, len(items))
			c.items = append(c.items, items...)
			markCont(c, items)
			d.stack = append(d.stack, v)
		case opNone:
			if err := d.push(Value{Kind: None}); err != nil {
				return Value{}, err
			}
		case opNewTrue, opNewFalse:
			v := Value{Kind: Bool}
			if op == opNewTrue {
				v.X = 1
			}
			if err := d.push(v); err != nil {
				return Value{}, err
			}
		case opBinFloat:
			b, err := d.take(8)
			if err != nil {
				return Value{}, err
			}
			if err := d.push(Value{Kind: Float, X: binary.BigEndian.Uint64(b)}); err != nil {
				return Value{}, err
			}
		case opFrame:
			b, err := d.take(8)
			if err != nil {
				return Value{}, err
			}
			n := binary.LittleEndian.Uint64(b)
			if left := d.total - (d.base + int64(d.pos)); d.total >= 0 && n > uint64(left) {
				if d.overLimit != nil {
					return Value{}, d.overLimit(d.opOff, int64(min(n, math.MaxInt64)))
				}
				return Value{}, &Error{Offset: d.opOff, Op: d.op,
					Msg: fmt.Sprintf("truncated FRAME: need %d bytes, %d left", n, left)}
			}
			// Prefetch the frame when it is of a sane size, so the
			// opcodes inside it need no refill.
			// A short frame is not an error here (the in-memory path reads
			// no further either); the opcodes inside report truncation.
			if n <= 1<<24 && d.end-d.pos < int(n) && d.canFill() {
				_ = d.fill(int(n))
			}
		case opProto:
			b, err := d.take(1)
			if err != nil {
				return Value{}, err
			}
			if b[0] > 5 {
				return Value{}, d.opErr("unsupported protocol %d", b[0])
			}
			d.proto = int(b[0])
		case opStop:
			if d.readErr != nil {
				return Value{}, d.readErr
			}
			if len(d.marks) > 0 {
				// Python ignores leftover marks' contents only if the top
				// value exists; keep it simple and strict.
				return Value{}, d.opErr("unbalanced MARK at STOP")
			}
			v, err := d.pop()
			if err != nil {
				return Value{}, err
			}
			return d.finish(v)
		case opPop:
			if len(d.stack) > 0 && (len(d.marks) == 0 || int(d.marks[len(d.marks)-1]) < len(d.stack)) {
				d.stack = d.stack[:len(d.stack)-1]
			} else if _, err := d.popMark(); err != nil {
				return Value{}, err
			}
		case opPopMark:
			if _, err := d.popMark(); err != nil {
				return Value{}, err
			}
		case opDup:
			t, err := d.top()
			if err != nil {
				return Value{}, err
			}
			if err := d.push(*t); err != nil {
				return Value{}, err
			}
		case opInt, opLong, opFloat, opString, opUnicode:
			v, err := d.textValue(op)
			if err != nil {
				return Value{}, err
			}
			if err := d.push(v); err != nil {
				return Value{}, err
			}
		case opGet, opPut:
			l, err := d.line()
			if err != nil {
				return Value{}, err
			}
			i, perr := strconv.ParseUint(strings.TrimSpace(string(l)), 10, 63)
			if perr != nil {
				return Value{}, d.opErr("bad memo key %q", truncate(l))
			}
			if op == opGet {
				err = d.get(i)
			} else {
				err = d.put(i)
			}
			if err != nil {
				return Value{}, err
			}
		case opGlobal:
			cls, err := d.globalLines()
			if err != nil {
				return Value{}, err
			}
			if err := d.push(cls); err != nil {
				return Value{}, err
			}
		case opStackGlobal:
			name, err := d.pop()
			if err != nil {
				return Value{}, err
			}
			mod, err := d.pop()
			if err != nil {
				return Value{}, err
			}
			if mod.Kind != String || name.Kind != String {
				return Value{}, d.opErr("module and name must be str, got %s and %s", mod.Kind, name.Kind)
			}
			if err := d.push(d.global(d.strs[mod.X], d.strs[name.X])); err != nil {
				return Value{}, err
			}
		case opInst, opObj:
			var cls Value
			if op == opInst {
				var err error
				if cls, err = d.globalLines(); err != nil {
					return Value{}, err
				}
			}
			items, err := d.popMark()
			if err != nil {
				return Value{}, err
			}
			if op == opObj {
				if len(items) == 0 {
					return Value{}, d.opErr("missing class")
				}
				cls, items = items[0], items[1:]
			}
			args, err := d.seq(Tuple, items)
			if err != nil {
				return Value{}, err
			}
			if err := d.pushObject(cls, args); err != nil {
				return Value{}, err
			}
		case opReduce, opNewObj:
			cls, args, err := d.popCall()
			if err != nil {
				return Value{}, err
			}
			if err := d.pushObject(cls, args); err != nil {
				return Value{}, err
			}
		case opNewObjEx:
			kwargs, err := d.pop()
			if err != nil {
				return Value{}, err
			}
			cls, args, err := d.popCall()
			if err != nil {
				return Value{}, err
			}
			if kwargs, err = d.finish(kwargs); err != nil {
				return Value{}, err
			}
			if err := d.pushObject(cls, args); err != nil {
				return Value{}, err
			}
			if v := d.stack[len(d.stack)-1]; v.Kind == Object {
				if o := d.objs[uint32(v.X)]; o != nil {
					o.state = kwargs // keyword arguments are kept as the state
				}
			}
		case opBuild:
			state, err := d.pop()
			if err != nil {
				return Value{}, err
			}
			if state, err = d.finish(state); err != nil {
				return Value{}, err
			}
			t, err := d.top()
			if err != nil {
				return Value{}, err
			}
			c := d.cont(*t)
			if c == nil || c.kind != Object {
				return Value{}, d.opErr("BUILD on %s", t.Kind)
			}
			d.objs[uint32(t.X)].state = state
		case opPersID, opBinPersID:
			var pid Value
			if op == opPersID {
				l, err := d.line()
				if err != nil {
					return Value{}, err
				}
				pid = d.internBytes(l)
			} else {
				var err error
				if pid, err = d.pop(); err != nil {
					return Value{}, err
				}
				if pid, err = d.finish(pid); err != nil {
					return Value{}, err
				}
			}
			if err := d.pushObject(d.global("", "persistent_id"), pid); err != nil {
				return Value{}, err
			}
		case opExt1, opExt2, opExt4:
			n := 1 << (op - opExt1)
			if op == opExt4 {
				n = 4
			}
			b, err := d.take(n)
			if err != nil {
				return Value{}, err
			}
			var code uint64
			for i := n - 1; i >= 0; i-- {
				code = code<<8 | uint64(b[i])
			}
			v, err := d.object(d.global("", "extension"), intValue(int64(code)))
			if err != nil {
				return Value{}, err
			}
			if err := d.push(v); err != nil {
				return Value{}, err
			}
		case opNextBuffer, opReadonlyBuffer:
			return Value{}, d.opErr("out-of-band buffers (protocol 5 %s) are not supported", OpName(op))
		default:
			return Value{}, &Error{Offset: d.opOff, Op: op, Msg: fmt.Sprintf("unknown opcode 0x%02x", op)}
		}
	}
}

// emptyKind is the container an EMPTY_* opcode makes.
func emptyKind(op byte) Kind {
	switch op {
	case opEmptyDict:
		return Dict
	case opEmptyTuple:
		return Tuple
	case opEmptySet:
		return Set
	}
	return List
}

// textValue reads the line argument of protocol 0's INT, LONG, FLOAT,
// STRING or UNICODE and returns the value it spells.
func (d *Decoder) textValue(op byte) (Value, error) {
	l, err := d.line()
	if err != nil {
		return Value{}, err
	}
	switch op {
	case opInt:
		switch s := string(l); s {
		case "00":
			return Value{Kind: Bool}, nil
		case "01":
			return Value{Kind: Bool, X: 1}, nil
		default:
			return d.parseInt(s)
		}
	case opLong:
		return d.parseInt(strings.TrimSuffix(string(l), "L"))
	case opFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(string(l)), 64)
		if err != nil {
			return Value{}, d.opErr("bad float %q", truncate(l))
		}
		return Value{Kind: Float, X: math.Float64bits(f)}, nil
	case opString:
		b, ok := unquoteString(l)
		if !ok {
			return Value{}, d.opErr("bad quoted string %q", truncate(l))
		}
		return d.internBytes(latin1(b)), nil
	}
	return d.internBytes(rawUnicodeEscape(l)), nil
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

func (d *Decoder) parseInt(s string) (Value, error) {
	t := strings.TrimSpace(s)
	if i, err := strconv.ParseInt(t, 10, 64); err == nil {
		return intValue(i), nil
	}
	if len(t) > 1<<16 {
		return Value{}, d.opErr("integer literal too long")
	}
	b, ok := new(big.Int).SetString(t, 0)
	if !ok {
		return Value{}, d.opErr("bad integer %q", truncate([]byte(s)))
	}
	return d.bigValue(b), nil
}

// longValue decodes a little-endian two's-complement integer.
func (d *Decoder) longValue(p []byte) Value {
	n := len(p)
	if n == 0 {
		return intValue(0)
	}
	if n <= 8 {
		var u uint64
		for i := n - 1; i >= 0; i-- {
			u = u<<8 | uint64(p[i])
		}
		if n < 8 && p[n-1]&0x80 != 0 {
			u |= ^uint64(0) << (8 * n)
		}
		return intValue(int64(u))
	}
	be := make([]byte, n)
	for i := range p {
		be[n-1-i] = p[i]
	}
	b := new(big.Int).SetBytes(be)
	if p[n-1]&0x80 != 0 {
		b.Sub(b, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	return d.bigValue(b)
}

func (d *Decoder) bigValue(b *big.Int) Value {
	if b.IsInt64() {
		return intValue(b.Int64())
	}
	d.bigs = append(d.bigs, b)
	return Value{Kind: BigInt, X: uint64(len(d.bigs) - 1)}
}

func (d *Decoder) bytesValue(p []byte) Value {
	d.bytes = append(d.bytes, append([]byte(nil), p...))
	return Value{Kind: Bytes, X: uint64(len(d.bytes) - 1)}
}

func (d *Decoder) global(mod, name string) Value {
	if mod == "" {
		return Value{Kind: Global, X: uint64(d.Intern(name))}
	}
	return Value{Kind: Global, X: uint64(d.Intern(mod + "." + name))}
}

// seq builds a tuple, list or frozenset from items (finishing them).
func (d *Decoder) seq(k Kind, items []Value) (Value, error) {
	if err := d.finishAll(items); err != nil {
		return Value{}, err
	}
	v, c := d.newCont(k, len(items))
	c.items = append(c.items, items...)
	markCont(c, items)
	return v, nil
}

// object builds the inert result of calling cls(args). A few builtin
// containers are recognised so that they read as data: OrderedDict, set,
// frozenset, and bytes as pickled by protocols below 3.
func (d *Decoder) object(cls, args Value) (Value, error) {
	if cls.Kind == Global {
		name := d.strs[cls.X]
		ac := d.cont(args)
		var a []Value
		if ac != nil && ac.kind == Tuple {
			a = ac.items
		}
		switch name {
		case "collections.OrderedDict", "builtins.dict", "__builtin__.dict":
			if ac != nil && len(a) == 0 {
				v, _ := d.newCont(Dict, 0)
				return v, nil
			}
		case "builtins.set", "__builtin__.set", "builtins.frozenset", "__builtin__.frozenset":
			k := Set
			if strings.HasSuffix(name, "frozenset") {
				k = FrozenSet
			}
			if ac != nil && len(a) == 0 {
				v, _ := d.newCont(k, 0)
				return v, nil
			}
			if len(a) == 1 {
				if lc := d.cont(a[0]); lc != nil && lc.kind == List {
					items := append([]Value(nil), lc.items...)
					v, c := d.newCont(k, len(items))
					c.items = append(c.items, items...)
					markCont(c, items)
					return v, nil
				}
			}
		case "builtins.bytes", "__builtin__.bytes":
			if ac != nil && len(a) == 0 {
				return d.bytesValue(nil), nil
			}
		case "builtins.bytearray", "__builtin__.bytearray":
			if ac != nil && len(a) == 0 {
				return d.bytesValue(nil), nil
			}
			if len(a) == 1 && a[0].Kind == Bytes {
				return a[0], nil
			}
		case "_codecs.encode":
			if len(a) == 2 && a[0].Kind == String && a[1].Kind == String &&
				(d.strs[a[1].X] == "latin1" || d.strs[a[1].X] == "latin-1") {
				s := d.strs[a[0].X]
				out := make([]byte, 0, len(s))
				for _, r := range s {
					if r > 255 {
						return d.plainObject(cls, args), nil
					}
					out = append(out, byte(r))
				}
				return d.bytesValue(out), nil
			}
		}
	}
	return d.plainObject(cls, args), nil
}

// pushObject pushes object(cls, args) in place of the values it was
// built from, which the caller has popped (so there is room).
func (d *Decoder) pushObject(cls, args Value) error {
	v, err := d.object(cls, args)
	if err != nil {
		return err
	}
	d.stack = append(d.stack, v)
	return nil
}

// popCall pops the class and the (finished) arguments of REDUCE and NEWOBJ.
func (d *Decoder) popCall() (cls, args Value, err error) {
	if args, err = d.pop(); err != nil {
		return
	}
	if cls, err = d.pop(); err != nil {
		return
	}
	args, err = d.finish(args)
	return
}

// globalLines reads the module and name lines of GLOBAL and INST.
func (d *Decoder) globalLines() (Value, error) {
	mod, err := d.line()
	if err != nil {
		return Value{}, err
	}
	m := string(mod) // the next line may reuse mod's bytes
	name, err := d.line()
	if err != nil {
		return Value{}, err
	}
	return d.global(m, string(name)), nil
}

func (d *Decoder) plainObject(cls, args Value) Value {
	v, _ := d.newCont(Object, 0)
	d.objs[uint32(v.X)] = &objExtra{cls: cls, args: args}
	return v
}

// addMarked runs SETITEMS, APPENDS and ADDITEMS: the values above the
// topmost mark are added to the target below it (see addTo), then they and
// the mark are removed.
func (d *Decoder) addMarked() error {
	if len(d.marks) == 0 {
		return d.noMark()
	}
	m := int(d.marks[len(d.marks)-1])
	if m == 0 {
		return d.underflow()
	}
	items := d.stack[m:]
	if d.op == opSetItems && len(items)%2 != 0 {
		return d.opErr("odd number of items (%d)", len(items))
	}
	if err := d.addTo(d.stack[m-1], items); err != nil {
		return err
	}
	d.stack = d.stack[:m]
	d.marks = d.marks[:len(d.marks)-1]
	if d.op == opSetItems && d.dfin != nil && d.stack[m-1].Kind == Dict && d.dictDone(len(items)/2) {
		// As fastDict does: finish the dict now, in file order.
		v, err := d.finish(d.stack[m-1])
		if err != nil {
			return err
		}
		d.stack[m-1] = v
	}
	return nil
}

// addTo finishes items and adds them to target as the current opcode
// says: key/value pairs (SETITEM, SETITEMS), list items (APPEND, APPENDS)
// or set members (ADDITEMS).
func (d *Decoder) addTo(target Value, items []Value) error {
	for _, it := range items {
		// Finished now, a container added to itself would be typed by
		// what it holds so far ("an empty list"); a snapshot never holds
		// a cycle.
		if it.IsContainer() && it == target {
			return d.opErr("a %s that contains itself", target.Kind)
		}
	}
	if err := d.finishAll(items); err != nil {
		return err
	}
	switch d.op {
	case opAppend, opAppends:
		return d.appendItems(target, items)
	case opAddItems:
		c := d.cont(target)
		if c == nil || c.kind != Set {
			return d.opErr("ADDITEMS to %s", target.Kind)
		}
		c.items = append(c.items, items...)
		markCont(c, items)
		return nil
	}
	return d.addPairs(target, items)
}

func (d *Decoder) addPairs(target Value, kv []Value) error {
	c := d.cont(target)
	if c == nil || (c.kind != Dict && c.kind != Object) {
		return d.opErr("%s to %s", OpName(d.op), target.Kind)
	}
	markCont(c, kv)
	if c.kind == Dict {
		// Python dict semantics: a repeated key replaces the earlier value.
		// Only scan when the dict is small, as real pickles never repeat.
		if len(c.items) > 0 && len(c.items) <= 64 {
			for i := 0; i+1 < len(kv); i += 2 {
				k := kv[i]
				replaced := false
				if k.Kind == String || k.Kind == Int || k.Kind == Bool || k.Kind == None {
					for j := 0; j < len(c.items); j += 2 {
						if c.items[j] == k {
							c.items[j+1] = kv[i+1]
							replaced = true
							break
						}
					}
				}
				if !replaced {
					c.items = append(c.items, k, kv[i+1])
				}
			}
			return nil
		}
	}
	c.items = append(c.items, kv...)
	markCont(c, kv)
	return nil
}

func (d *Decoder) appendItems(target Value, items []Value) error {
	c := d.cont(target)
	if c == nil {
		return d.opErr("%s to %s", OpName(d.op), target.Kind)
	}
	switch c.kind {
	case List:
		if d.app != nil && d.app.Append(d, target, items) {
			return nil
		}
		c.items = append(c.items, items...)
		markCont(c, items)
	case Object:
		o := d.objs[uint32(target.X)]
		o.list = append(o.list, items...)
	default:
		return d.opErr("%s to %s", OpName(d.op), target.Kind)
	}
	return nil
}

func latin1(b []byte) []byte {
	ascii := true
	for _, c := range b {
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return b
	}
	out := make([]byte, 0, len(b)*2)
	for _, c := range b {
		out = utf8.AppendRune(out, rune(c))
	}
	return out
}

// pyEscapes maps the letter after a backslash in a Python bytes literal to
// the byte it stands for (0: not a one-letter escape).
var pyEscapes = [256]byte{'n': '\n', 't': '\t', 'r': '\r', 'a': '\a', 'b': '\b', 'f': '\f', 'v': '\v',
	'\\': '\\', '\'': '\'', '"': '"'}

// unquoteString decodes protocol 0's STRING argument: a Python bytes repr.
func unquoteString(l []byte) ([]byte, bool) {
	l = []byte(strings.TrimRight(string(l), "\r"))
	if len(l) < 2 || (l[0] != '\'' && l[0] != '"') || l[len(l)-1] != l[0] {
		return nil, false
	}
	s := l[1 : len(l)-1]
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			out = append(out, c)
			continue
		}
		i++
		e := s[i]
		if b := pyEscapes[e]; b != 0 {
			out = append(out, b)
			continue
		}
		switch e {
		case '\n':
		case 'x':
			if i+2 < len(s)+0 && i+2 <= len(s)-1 {
				if v, err := strconv.ParseUint(string(s[i+1:i+3]), 16, 8); err == nil {
					out = append(out, byte(v))
					i += 2
					continue
				}
			}
			return nil, false
		default:
			if e >= '0' && e <= '7' {
				v := int(e - '0')
				for k := 0; k < 2 && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '7'; k++ {
					i++
					v = v*8 + int(s[i]-'0')
				}
				out = append(out, byte(v))
			} else {
				out = append(out, '\\', e)
			}
		}
	}
	return out, true
}

// rawUnicodeEscape decodes Python's raw-unicode-escape codec (UNICODE).
func rawUnicodeEscape(l []byte) []byte {
	out := make([]byte, 0, len(l))
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c == '\\' && i+1 < len(l) && (l[i+1] == 'u' || l[i+1] == 'U') {
			n := 4
			if l[i+1] == 'U' {
				n = 8
			}
			if i+2+n <= len(l) {
				if v, err := strconv.ParseUint(string(l[i+2:i+2+n]), 16, 32); err == nil {
					out = utf8.AppendRune(out, rune(v))
					i += 1 + n
					continue
				}
			}
		}
		if c < 0x80 {
			out = append(out, c)
		} else {
			out = utf8.AppendRune(out, rune(c))
		}
	}
	return out
}

// markCont notes that a container holds containers, so that release
// only scans items when it has to.
func markCont(c *container, items []Value) {
	if c.hasCont {
		return
	}
	for _, it := range items {
		if it.IsContainer() {
			c.hasCont = true
			return
		}
	}
}
