package pickle

import "encoding/binary"

// A DictFinisher is a Finisher that can also type a dict of plain values
// (ints, floats, strings, None, bools and memoized non-container values)
// straight from its key/value pairs, before any container exists. Most of
// a memory snapshot is such dicts (trace entries, blocks, frames), and
// skipping the container saves building and recycling millions of them.
//
// FinishDict returns ok false to keep the dict generic; the decoder then
// builds the container and Finish sees it later as usual. kv is only valid
// during the call.
type DictFinisher interface {
	FinishDict(d *Decoder, kv []Value) (v Value, ok bool, err error)
}

// placeholder fills the memo slot of a dict being read by fastDict; a read
// of that slot inside the dict makes fastDict hand over to the VM first.
var placeholder = Value{Kind: None}

// fastAhead is how many bytes fastDict wants buffered before it starts.
const fastAhead = 16 << 10

// fastDict reads the dict that starts at EMPTY_DICT (d.pos is just past it)
// when it has the shape EMPTY_DICT [memo op] MARK (key value [memo op])*
// SETITEMS with plain values, all in the buffer at hand, and is then added
// to its parent by the next opcode. Anything else makes it hand over: the
// VM then continues from the first opcode fastDict did not execute, with
// the stack, marks and memo exactly as its own loop would have left them.
func (d *Decoder) fastDict() error {
	if d.canFill() && d.end-d.pos < fastAhead {
		// Have the whole dict at hand (dicts are far smaller than this),
		// so that a refill seldom cuts one short.
		want := int64(fastAhead)
		if d.total >= 0 {
			want = min(want, d.total-(d.base+int64(d.pos)))
		}
		if want > 0 {
			_ = d.fill(int(want)) // a read error shows again in the VM
		}
	}
	buf := d.buf[:d.end]
	p := d.pos
	memoIdx := int64(-1)
	hasCont := false
	if p < len(buf) {
		switch buf[p] {
		case opMemoize:
			memoIdx = int64(d.memoCount)
			p++
		case opBinPut:
			if p+1 < len(buf) {
				memoIdx = int64(buf[p+1])
				p += 2
			}
		case opLongBinPut:
			if p+4 < len(buf) {
				memoIdx = int64(binary.LittleEndian.Uint32(buf[p+1 : p+5]))
				p += 5
			}
		}
	}
	if p >= len(buf) || buf[p] != opMark {
		// Not the shape: an ordinary EMPTY_DICT.
		v, _ := d.newCont(Dict, 0)
		return d.push(v)
	}
	if d.entry != nil {
		if v, end, ok := d.entry.ReadEntry(d, buf, p+1, memoIdx); ok {
			d.pos = end
			if memoIdx >= 0 {
				d.memoPutFast(uint64(memoIdx), v)
			}
			return d.push(v)
		}
	}
	if memoIdx >= 0 {
		d.memoPutFast(uint64(memoIdx), placeholder)
	}
	p++ // MARK
	kv := d.kvScratch[:0]
	for {
		if p >= len(buf) {
			return d.handOver(p, memoIdx, kv, true)
		}
		switch op := buf[p]; op {
		case opBinGet, opLongBinGet:
			var i uint64
			n := 2
			if op == opBinGet {
				if p+1 >= len(buf) {
					return d.handOver(p, memoIdx, kv, true)
				}
				i = uint64(buf[p+1])
			} else {
				if p+4 >= len(buf) {
					return d.handOver(p, memoIdx, kv, true)
				}
				i = uint64(binary.LittleEndian.Uint32(buf[p+1 : p+5]))
				n = 5
			}
			if i >= d.memoLen || int64(i) == memoIdx {
				return d.handOver(p, memoIdx, kv, true)
			}
			slot := d.memo[i>>memoPageBits][i&(1<<memoPageBits-1)]
			if k := Kind(slot & 15); k == mark || (k >= List && k <= Object) {
				return d.handOver(p, memoIdx, kv, true)
			}
			kv = append(kv, unpackSlot(slot))
			p += n
		case opShortBinUnicode:
			if p+1 >= len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			e := p + 2 + int(buf[p+1])
			if e > len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			kv = append(kv, d.internBytes(buf[p+2:e]))
			p = e
		case opBinUnicode:
			if p+4 >= len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			n := uint64(binary.LittleEndian.Uint32(buf[p+1 : p+5]))
			if n > uint64(len(buf)-p-5) {
				return d.handOver(p, memoIdx, kv, true)
			}
			e := p + 5 + int(n)
			kv = append(kv, d.internBytes(buf[p+5:e]))
			p = e
		case opBinInt1:
			if p+1 >= len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			kv = append(kv, intValue(int64(buf[p+1])))
			p += 2
		case opBinInt2:
			if p+2 >= len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			kv = append(kv, intValue(int64(binary.LittleEndian.Uint16(buf[p+1:p+3]))))
			p += 3
		case opBinInt:
			if p+4 >= len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			kv = append(kv, intValue(int64(int32(binary.LittleEndian.Uint32(buf[p+1:p+5])))))
			p += 5
		case opLong1:
			if p+1 >= len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			n := int(buf[p+1])
			if n > 8 || p+2+n > len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			var x int64
			if n > 0 && p+10 <= len(buf) {
				// Load 8 bytes and keep the low n, sign-extended.
				sh := uint(64 - 8*n)
				x = int64(binary.LittleEndian.Uint64(buf[p+2:p+10])<<sh) >> sh
			} else if n > 0 {
				var u uint64
				for j := p + 1 + n; j >= p+2; j-- {
					u = u<<8 | uint64(buf[j])
				}
				sh := uint(64 - 8*n)
				x = int64(u<<sh) >> sh
			}
			kv = append(kv, intValue(x))
			p += 2 + n
		case opBinFloat:
			if p+8 >= len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			kv = append(kv, Value{Kind: Float, X: binary.BigEndian.Uint64(buf[p+1 : p+9])})
			p += 9
		case opEmptyList:
			// An empty list value (frames: []) is kept when the opcode
			// after it (and its memo op) can only start the next key or
			// end the dict, so nothing is appended to it.
			q := p + 1
			if q < len(buf) {
				switch buf[q] {
				case opMemoize:
					q++
				case opBinPut:
					q += 2
				case opLongBinPut:
					q += 5
				}
			}
			if q >= len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			switch buf[q] {
			case opBinGet, opLongBinGet, opShortBinUnicode, opBinUnicode, opSetItems:
			default:
				return d.handOver(p, memoIdx, kv, true)
			}
			v, _ := d.newCont(List, 0)
			kv = append(kv, v)
			hasCont = true
			p++
		case opFrame:
			if p+8 >= len(buf) {
				return d.handOver(p, memoIdx, kv, true)
			}
			n := binary.LittleEndian.Uint64(buf[p+1 : p+9])
			if d.total >= 0 && n > uint64(d.total-(d.base+int64(p+9))) {
				return d.handOver(p, memoIdx, kv, true)
			}
			p += 9
		case opNone:
			kv = append(kv, Value{Kind: None})
			p++
		case opNewTrue:
			kv = append(kv, Value{Kind: Bool, X: 1})
			p++
		case opNewFalse:
			kv = append(kv, Value{Kind: Bool})
			p++
		case opMemoize, opBinPut, opLongBinPut:
			var i uint64
			n := 1
			switch op {
			case opMemoize:
				i = uint64(d.memoCount)
			case opBinPut:
				if p+1 >= len(buf) {
					return d.handOver(p, memoIdx, kv, true)
				}
				i = uint64(buf[p+1])
				n = 2
			default:
				if p+4 >= len(buf) {
					return d.handOver(p, memoIdx, kv, true)
				}
				i = uint64(binary.LittleEndian.Uint32(buf[p+1 : p+5]))
				n = 5
			}
			if len(kv) == 0 || int64(i) == memoIdx {
				return d.handOver(p, memoIdx, kv, true)
			}
			if v := kv[len(kv)-1]; v.IsContainer() {
				d.putValue(i, v)
			} else {
				d.memoPutFast(i, v)
			}
			p += n
		case opSetItems:
			if len(kv)%2 != 0 {
				return d.handOver(p, memoIdx, kv, true)
			}
			d.opOff = d.base + int64(p)
			d.op = opSetItems
			if hasCont {
				if err := d.finishAll(kv); err != nil {
					return err
				}
			}
			d.pos = p + 1
			if !d.dictDone(len(kv) / 2) {
				return d.handOver(d.pos, memoIdx, kv, false)
			}
			d.kvScratch = kv[:0]
			v, ok, err := d.dfin.FinishDict(d, kv)
			if err != nil {
				return err
			}
			if !ok {
				return d.handOver(d.pos, memoIdx, kv, false)
			}
			if memoIdx >= 0 {
				d.memoPutFast(uint64(memoIdx), v)
			}
			return d.push(v)
		default:
			return d.handOver(p, memoIdx, kv, true)
		}
	}
}

// handOver builds the dict container fastDict skipped and leaves the VM at
// p: inside the MARK with kv pushed (open), or with kv set as the dict's
// items after SETITEMS.
func (d *Decoder) handOver(p int, memoIdx int64, kv []Value, open bool) error {
	d.kvScratch = kv[:0]
	v, c := d.newCont(Dict, len(kv))
	if memoIdx >= 0 {
		d.memoPut(uint64(memoIdx), v)
		c.memo = memoIdx
	}
	d.pos = p
	if !open {
		c.items = append(c.items, kv...)
		markCont(c, kv)
		return d.push(v)
	}
	if err := d.push(v); err != nil {
		return err
	}
	if len(d.marks)+len(d.stack) >= MaxStack {
		return d.opErr("stack too deep: more than %d entries", MaxStack)
	}
	d.marks = append(d.marks, int32(len(d.stack)))
	for _, x := range kv {
		if err := d.push(x); err != nil {
			return err
		}
	}
	return nil
}

// setItemsBatch is the most pairs Python's pickler writes in one SETITEMS.
const setItemsBatch = 1000

// dictDone reports whether a dict whose SETITEMS (of pairs pairs) has just
// run is complete, so that it can be finished now: the opcode at d.pos
// (past a FRAME) adds it to its parent or starts a sibling, or the batch
// was Python's last (shorter than setItemsBatch) and no MARK follows.
// Finishing dicts as they complete keeps typed entries in file order even
// when some of them went through the VM's generic path.
func (d *Decoder) dictDone(pairs int) bool {
	if d.end-d.pos < 10 && d.canFill() {
		want := int64(10)
		if d.total >= 0 {
			want = min(want, d.total-(d.base+int64(d.pos)))
		}
		if want > 0 {
			_ = d.fill(int(want)) // a read error shows again in the VM
		}
	}
	q := d.pos
	if q < d.end && d.buf[q] == opFrame {
		q += 9
	}
	if q >= d.end {
		return false
	}
	switch d.buf[q] {
	case opEmptyDict, opAppends, opAppend, opSetItems, opSetItem:
		return true
	case opMark:
		return false
	}
	return pairs < setItemsBatch
}

// memoPutFast is memoPut for the common case of a value that packs into a
// dense slot which is in use or the next one; it does not touch container
// bookkeeping (see putValue).
func (d *Decoder) memoPutFast(i uint64, v Value) {
	if v.X <= payloadMax && v.Sub <= 15 && i >= d.sharedEnd {
		if i == d.memoLen && i&(1<<memoPageBits-1) != 0 && i <= uint64(2*d.memoCount+1024) {
			d.memoLen++ // the page is there, its slots are holes
		}
		if i < d.memoLen {
			sp := &d.memo[i>>memoPageBits][i&(1<<memoPageBits-1)]
			if s := *sp; s != slotSpilled && (s != slotHole || d.memoMap == nil) {
				if s == slotHole {
					d.memoCount++
				} else if s&15 == uint64(String) {
					d.strRewrites++
				}
				*sp = uint64(v.Kind) | uint64(v.Sub)<<4 | v.X<<8
				return
			}
		}
	}
	d.memoPut(i, v)
}
