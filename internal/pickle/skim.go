package pickle

import "encoding/binary"

// Skim walks the opcodes of an in-memory pickle without running them: it
// knows where each opcode ends, counts the memo entries MEMOIZE makes and
// reports the strs memoized right after they are pushed. A second core
// uses it to learn, far faster than the VM can, how many memo entries
// precede an offset, so that it can read what follows that offset (see
// Splitter).
//
// It follows binary opcodes only, and stops at an explicit memo put
// (PUT, BINPUT, LONG_BINPUT: memo indices a count cannot predict), at
// the opcodes of protocols 0 and 1 that end at a newline, at STOP and at
// anything cut short or unknown.
type Skim struct {
	Buf []byte
	Pos int // offset of the next opcode
	// Memo counts the MEMOIZE opcodes before Pos: the memo index the next
	// one gives (when no other opcode put anything in the memo).
	Memo uint64
	// MaxOp is the length of the longest opcode skimmed.
	MaxOp int
	// Last is the last opcode skimmed other than FRAME.
	Last byte
	// OnString, when set, is called with a str's memo index and bytes
	// when MEMOIZE follows the opcode that pushed it.
	OnString func(idx uint64, s []byte)

	str     []byte // the str pushed by the last opcode, if it was one
	haveStr bool
}

// OpLen returns the length of the opcode at buf[p] (with its argument),
// or 0 when Skim does not follow it or it is cut short.
func OpLen(buf []byte, p int) int {
	if p >= len(buf) {
		return 0
	}
	n := 0
	switch buf[p] {
	case opMark, opNone, opNewTrue, opNewFalse, opEmptyDict, opEmptyList, opEmptyTuple, opEmptySet,
		opAppend, opAppends, opSetItem, opSetItems, opAddItems, opBuild, opDict, opList, opTuple,
		opTuple1, opTuple2, opTuple3, opFrozenSet, opReduce, opNewObj, opNewObjEx, opStackGlobal,
		opMemoize, opPop, opPopMark, opDup, opObj, opBinPersID, opNextBuffer, opReadonlyBuffer:
		n = 1
	case opBinInt1, opBinGet, opProto, opExt1:
		n = 2
	case opBinInt2, opExt2:
		n = 3
	case opBinInt, opLongBinGet, opExt4:
		n = 5
	case opBinFloat, opFrame:
		n = 9
	case opShortBinUnicode, opShortBinString, opShortBinBytes, opLong1:
		if p+1 >= len(buf) {
			return 0
		}
		n = 2 + int(buf[p+1])
	case opBinUnicode, opBinString, opBinBytes, opLong4:
		if p+5 > len(buf) {
			return 0
		}
		l := binary.LittleEndian.Uint32(buf[p+1:])
		if int32(l) < 0 {
			return 0
		}
		n = 5 + int(l)
	case opBinUnicode8, opBinBytes8, opByteArray8:
		if p+9 > len(buf) {
			return 0
		}
		l := binary.LittleEndian.Uint64(buf[p+1:])
		if l > uint64(len(buf)) {
			return 0
		}
		n = 9 + int(l)
	default:
		return 0
	}
	if n > len(buf)-p {
		return 0
	}
	return n
}

// Step skims one opcode; false (Pos unchanged) when Skim does not follow
// it.
func (k *Skim) Step() bool {
	p := k.Pos
	n := OpLen(k.Buf, p)
	if n == 0 {
		return false
	}
	op := k.Buf[p]
	switch op {
	case opFrame:
		// A frame's length must fit the input, as the VM checks.
		if binary.LittleEndian.Uint64(k.Buf[p+1:]) > uint64(len(k.Buf)-p-9) {
			return false
		}
		k.Pos = p + n
		return true // transparent: Last and the pending str stay
	case opMemoize:
		if k.haveStr && k.OnString != nil {
			k.OnString(k.Memo, k.str)
		}
		k.Memo++
	}
	k.haveStr = false
	switch op {
	case opShortBinUnicode:
		k.str, k.haveStr = k.Buf[p+2:p+n], true
	case opBinUnicode:
		k.str, k.haveStr = k.Buf[p+5:p+n], true
	case opBinUnicode8:
		k.str, k.haveStr = k.Buf[p+9:p+n], true
	}
	k.MaxOp = max(k.MaxOp, n)
	k.Last = op
	k.Pos = p + n
	return true
}

// A Splitter lets a second core read part of the input: the decoder calls
// Split when it is about to run the MARK at offset SplitAt (read atomically
// by the splitter's own means; -1 when there is none). Split either takes
// over (it has added what the input holds from that MARK up to some later
// offset, moved the decoder there with SkipTo and returns true) or returns
// false, and the decoder runs the MARK as usual.
type Splitter interface {
	SplitAt() int64
	Split(d *Decoder) (bool, error)
}

// SetSplitter installs s (nil: none). Only a decoder over bytes splits.
func (d *Decoder) SetSplitter(s Splitter) {
	if d.r == nil {
		d.split = s
	}
}

// SkipTo moves a bytes decoder to off, an opcode boundary past its
// position that a splitter has read; the window the progress hook sees
// moves with it.
func (d *Decoder) SkipTo(off int) {
	d.pos = off
	if d.end < off {
		d.end = min(d.limit, off+d.every)
		if d.progress != nil {
			d.progress(int64(off))
		}
	}
}

// Input returns the whole input of a bytes decoder.
func (d *Decoder) Input() []byte {
	if d.r != nil {
		return nil
	}
	return d.buf[:max(d.end, d.limit)]
}

// Top returns the value on top of the stack when no MARK is above it.
func (d *Decoder) Top() (Value, bool) {
	n := len(d.stack)
	if n == 0 || (len(d.marks) > 0 && int(d.marks[len(d.marks)-1]) >= n) {
		return Value{}, false
	}
	return d.stack[n-1], true
}

// MemoCount returns the number of memo entries; it is the index the next
// MEMOIZE gives.
func (d *Decoder) MemoCount() int { return d.memoCount }

// Memoize does what MEMOIZE does after pushing v (a typed value a
// splitter read).
func (d *Decoder) Memoize(v Value) {
	d.memoPutFast(uint64(d.memoCount), v)
}

// A MemoRun gives the values of a range of memo entries that a splitter
// read (Decoder.MemoizeRun): its k-th, counted from the range's first.
// The values must be plain (no containers, nothing a release recycles).
type MemoRun interface {
	MemoValue(k uint64) Value
}

type memoRun struct {
	first, n uint64
	r        MemoRun
}

// holePage is the memo page of the runs' pages: all holes, never written
// (ownPage gives a run's page a copy of its own before a write).
var holePage = func() []uint64 {
	p := make([]uint64, 1<<memoPageBits)
	for i := range p {
		p[i] = slotHole
	}
	return p
}()

// MemoizeRun does what n MEMOIZEs would, the k-th memoizing r's k-th
// value, without a slot each: a splitter's part makes a memo entry per
// trace entry (its dict, its frames list) that is seldom referenced, and
// the slots were 8 bytes and a write each (on a 1 GB snapshot 100 MB and
// 80 ms). Lookups of these entries ask r. It reports false, doing
// nothing, when the memo is not a dense run of MEMOIZEs up to here (the
// caller then memoizes one by one). A run that starts where the last
// ended, with the same r, extends it.
func (d *Decoder) MemoizeRun(n uint64, r MemoRun) bool {
	first := uint64(d.memoCount)
	if n == 0 || d.memoMap != nil || d.memoLen != first || first+n < first {
		return false
	}
	end := first + n
	for pg := uint64(len(d.memo)); pg<<memoPageBits < end; pg++ {
		// The last one too: a write gives it a page of its own (ownPage),
		// the run after this one, most often, none.
		d.memo = append(d.memo, holePage)
	}
	d.memoLen, d.memoCount = end, int(end)
	d.sharedEnd = uint64(len(d.memo)) << memoPageBits
	if k := len(d.runs) - 1; k >= 0 && d.runs[k].r == r && d.runs[k].first+d.runs[k].n == first {
		d.runs[k].n += n
	} else {
		d.runs = append(d.runs, memoRun{first: first, n: n, r: r})
	}
	d.runEnd = end
	return true
}

// inRun reports whether memo entry i is one of a run's.
func (d *Decoder) inRun(i uint64) bool {
	_, ok := d.findRun(i)
	return ok
}

func (d *Decoder) findRun(i uint64) (*memoRun, bool) {
	if i >= d.runEnd {
		return nil, false
	}
	lo, hi := 0, len(d.runs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if d.runs[m].first+d.runs[m].n <= i {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(d.runs) || d.runs[lo].first > i {
		return nil, false
	}
	return &d.runs[lo], true
}

// runValue returns run entry i (whose slot is a hole).
func (d *Decoder) runValue(i uint64) (Value, bool) {
	r, ok := d.findRun(i)
	if !ok {
		return Value{}, false
	}
	return r.r.MemoValue(i - r.first), true
}

// ownPage gives the page of memo entry i a copy of its own when it is
// the shared holePage, before a write to it (i below sharedEnd).
func (d *Decoder) ownPage(i uint64) {
	pg := i >> memoPageBits
	if pg < uint64(len(d.memo)) && &d.memo[pg][0] == &holePage[0] {
		d.memo[pg] = append([]uint64(nil), holePage...)
	}
}
