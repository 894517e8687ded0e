package snapshot

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gpumem/gpumem/internal/pickle"
)

// Decoding on two cores. A big snapshot is mostly its trace entries, one
// after another in lists that the pickler writes in batches (MARK, up to
// a thousand entry dicts, APPENDS). The VM cannot start in the middle:
// entries refer to keys, action names and stacks through the memo, whose
// indices count every MEMOIZE before them. So a second goroutine, the
// splitter, skims the input from the start (opcode lengths only, several
// times faster than decoding), counting memo entries and noting which
// memoized strs are entry keys and action names, until it reaches a batch
// of entries past splitFrac of the input with no frame first written in
// the splitQuiet bytes before (the splitter reads entries far faster than
// the decoder, so the part starts as early as it can). It offers that
// batch to the decoder, which accepts while it has fewer entries than the
// skim counted before it (it then never writes past that index). From
// there the splitter reads whole batches of entries into the events
// array, at the index the skim predicted: the shape ReadEntry reads, and
// the one PyTorch writes (each entry's own frames list and
// compile-context str), keeping the memo references it cannot resolve as
// indices, and it publishes each batch. When the decoder reaches the offered MARK it
// checks that everything is as the splitter assumed (the list on top is
// the trace being read, the memo count and the event count are the
// predicted ones) and merges the batches as they come, each once its
// memo references are what ReadEntry accepts: for each entry what
// commitEntry (or, for a list or str of its own, the generic path) would
// have done, in the same order, and its MEMOIZEs (as runs the memo
// resolves when asked, not a slot each). Then it jumps past them.
// Anything unusual ends the splitter's part (the decoder reads on from
// there) or drops it, so the result is the one-core decode's, always
// (TestSplitMatchesSequential, TestSplitSynthetic, TestSplitSharedStacks,
// FuzzSplit).

// splitMin is the smallest pickle the splitter reads a part of, in a
// command's decode and in a viewer's alike. A viewer once split only
// from 128 MB, since on two cores the page's own load took the second
// core during an 80 MB tile's decode. Measured again (#32, stop 32: 18
// first paints each, alternating), splitting that tile too ends its
// decode 30 ms sooner and paints in 0.23-0.29 s against 0.23-0.33 s
// (median 0.25 against 0.26 s). With no browser beside it (a machine
// with cores to spare), its server answers the first window in 122-132
// ms against 137-147 (bench/RESULTS-web.md, "A page that draws nothing").
var splitMin = 48 << 20

// splitFrac is where in the input, at the earliest, the splitter starts
// reading entries: 0, as early as it can. Per MB of a tiled snapshot, in
// thread CPU time, the decoder decodes entries in 2.1 ms, where the
// splitter reads them in 0.8 ms and the decoder merges them in 0.3 ms:
// every MB the splitter reads instead of the decoder saves about 1 ms of
// CPU, and the skim of what comes before (1 ms per MB) is pure overhead.
// The machine's two cores are busy with more than the decode (the
// garbage collector, the viewer's pairing and page), so the total CPU
// decides the wall time: the part starts at the first batch of entries
// that follows splitQuiet bytes of the trace without a new frame. On the
// 1 GB tile that is 7 MB into the trace instead of 22% into the file
// (bench/RESULTS.md, #32 part 32v).
var splitFrac = 0.0

// splitQuiet is how many bytes of the trace with no new frame (a dict in
// an entry: the splitter cannot read that entry, and its part would end
// there) the skim passes before it offers a part (at most a 16th of the
// input). PyTorch writes the frames of a program's stacks as it first
// meets them, in its first steps; the later ones repeat them. A 64th was
// too short a stretch on the 80 MB tile: a new frame came 549 entries into
// the part, so the decoder read the whole trace alone (stats: 125-130 ms
// against 98 ms with the part; bench/RESULTS.md, "The lead's figures at
// the end of stop 30").
var splitQuiet = 4 << 20

// debugSplit (GPUMEM_DEBUG_SPLIT set) prints what the splitter did and
// when (splitdebug_linux.go).
var debugSplit = os.Getenv("GPUMEM_DEBUG_SPLIT") != ""

// splitMerged counts the entries splitters gave (tests check that they
// compared something).
var splitMerged atomic.Int64

// splitSkimFirst makes the decoder wait for the skim before it starts, so
// that tests see a part offered before the decoder gets there on inputs
// of any size.
var splitSkimFirst = false

// splitAcceptEarly lets the splitter answer its own offer while the
// decoder is in the dump (acceptEarly); tests turn it off to check the
// decoder's answer (accept) as well.
var splitAcceptEarly = true

// flagStackRef marks an event the splitter read whose Stack is still the
// memo index of its frames.
const flagStackRef EventFlag = 1 << 7

// flagOwnStack marks an event the splitter read whose Stack indexes
// spans, its own frames list.
const flagOwnStack EventFlag = 1 << 6

// flagMeta marks an event the splitter read that has a regionMeta: the
// last one in metas up to it; flagNewMeta, one that differs from the
// last (it is the next in metas). Consecutive entries mostly have the
// same (PyTorch 2.6+ writes compile_context "N/A" in each): a regionMeta
// per entry, 56 bytes, was more memory than the entries themselves.
const (
	flagMeta    EventFlag = 1 << 5
	flagNewMeta EventFlag = 1 << 4
)

// codeAction+a is the code of a memoized str naming action a; codes below
// it are the kw* of entry keys.
const codeAction = 32

// regionMeta is what an entry the splitter read had of compile_context
// and user_metadata: memo index+1 of a memoized str (0: None), or, when
// lit, a str written in the entry, at off in the input, n bytes.
type regionMeta struct {
	cc, um                  strRef
	ccSeen, umSeen, umFirst bool
}

type strRef struct {
	memo   uint64
	off, n int32
	lit    bool
}

// same reports whether r and o give the same value: the same memo entry,
// or literals of the same bytes (which the merge interns as one).
func (r strRef) same(o strRef, buf []byte) bool {
	if r.lit != o.lit {
		return false
	}
	if !r.lit {
		return r.memo == o.memo
	}
	return r.n == o.n && string(buf[r.off:r.off+r.n]) == string(buf[o.off:o.off+o.n])
}

// same reports whether m and o give an entry the same compile_context
// and user_metadata, in the same order.
func (m *regionMeta) same(o *regionMeta, buf []byte) bool {
	return m.ccSeen == o.ccSeen && m.umSeen == o.umSeen && m.umFirst == o.umFirst &&
		m.cc.same(o.cc, buf) && m.um.same(o.um, buf)
}

// stackSpan is an entry's own frames list: n memo indices of frames from
// off in the splitter's frameRefs.
type stackSpan struct{ off, n int32 }

// The memo entries an entry the splitter read gives after its dict's own,
// in file order: its script, 2 bits each, the count in bits 6-7 (each
// kind at most once: a key seen twice ends the part). The splitter keeps
// the scripts as runs (scriptRun) until the merge: PyTorch's entries all
// have the same one (their frames list, and in 2.6+ their
// compile_context), so that they cost no memory per entry.
const (
	memoCC     = 1 // its compile_context str
	memoUM     = 2 // its user_metadata str
	memoFrames = 3 // its frames list
)

// scriptFrames is the script of an entry whose only memo entry past its
// dict's is its frames list.
const scriptFrames = 1<<6 | memoFrames

func addMemo(script *uint8, kind uint8) {
	n := *script >> 6
	*script = (*script &^ (3 << 6)) | kind<<(2*n) | (n+1)<<6
}

// scriptRun gives its script to the entries of the splitter's part from
// first (counted from the part's start) up to the next run's first.
type scriptRun struct {
	first  int
	script uint8
}

type stackCacheEntry struct {
	idx uint64 // memo index+1
	id  StackID
}

type codeCacheEntry struct {
	idx  uint64 // memo index+1
	code uint8
}

// splitter reads a part of the trace entries on another goroutine.
type splitter struct {
	b       *builder
	buf     []byte
	release func(lo, hi int) // gives back mapped pages passed (nil: none)

	// offerMu orders acceptEarly (the splitter's goroutine) with the
	// decoder's first entry (beginTrace), after which only the decoder
	// touches its events array.
	offerMu    sync.Mutex
	traceBegun bool

	codes map[uint64]uint8 // memo index -> key kw or codeAction+action
	cache [4096]codeCacheEntry

	// The dump's size as the skim counts it (dumpHint): dicts whose
	// first key is the memoized "device" (segments) or "address"
	// (blocks), by memo index+1 of those keys; published in dump, segments
	// in the high half, once the skim reaches the first trace entry.
	devKey, addressKey   uint64
	segsSeen, blocksSeen int
	dump                 atomic.Uint64

	// Set before at: the offer.
	pred int    // events before at, as the skim counts them
	base uint64 // memo entries before at
	at   atomic.Int64
	// acked: 0 while the decoder has not answered the offer, 1 accepted
	// (arr is then the events array and the decoder writes below pred),
	// 2 refused.
	acked atomic.Int32
	arr   []Event
	stop  atomic.Bool
	done  chan struct{}

	// What the splitter has read, published batch by batch under mu (the
	// decoder merges batches as they come): the end offset and entry
	// count after each whole batch, the metas (of the entries with
	// flagNewMeta, in order), scripts and streams of those entries;
	// finished once it reads no more.
	mu       sync.Mutex
	batches  []batchEnd
	metas    []regionMeta
	scripts  []scriptRun
	raw      []int64
	spans    []stackSpan
	frames   []uint32 // memo indices of the frames of spans
	finished bool
	more     chan struct{} // a batch was published, or the splitter finished

	rawIndex  map[int64]int
	rawOwn    []int64 // the splitter's raw (a stream once seen stays)
	spansOwn  []stackSpan
	framesOwn []uint32
	// The memo entries the splitter's part makes: the next index, and
	// what the frames lists and strs among them are (spans index, str).
	memo       uint64
	localStack map[uint64]int32
	localStr   map[uint64]strRef
	lastRaw    int64 // the last stream read, and its index in rawOwn
	lastStream int
	released   int // mapped pages below are given back
}

// wakeEvery is how many batches the splitter publishes between two
// wake-ups of the decoder (see read).
const wakeEvery = 8

// batchEnd is the input offset past a batch the splitter read and the
// number of entries read up to there.
type batchEnd struct{ end, n int }

// startSplit starts a splitter on buf when it is big enough and a
// protocol 4+ pickle (MEMOIZE numbers memo entries by count).
func startSplit(b *builder, d *pickle.Decoder, buf []byte, release func(lo, hi int)) {
	if len(buf) < splitMin || len(buf) < 2 || buf[0] != 0x80 || buf[1] < 4 || cap(b.events) == 0 {
		return
	}
	sp := &splitter{b: b, buf: buf, release: release, codes: map[uint64]uint8{},
		done: make(chan struct{}), more: make(chan struct{}, 1), rawIndex: map[int64]int{}}
	sp.at.Store(-1)
	b.split = sp
	d.SetSplitter(sp)
	x := -1
	if splitSkimFirst {
		if x = sp.skim(); x < 0 {
			x = -2 // no part: the goroutine ends at once
		} else {
			sp.at.Store(int64(x))
			sp.acceptEarly() // before the decoder starts: always early
		}
	}
	go sp.run(x)
}

// SplitAt implements pickle.Splitter.
func (sp *splitter) SplitAt() int64 { return sp.at.Load() }

// finish stops the splitter and waits for it (nil: none).
func (sp *splitter) finish() {
	if sp == nil {
		return
	}
	sp.stop.Store(true)
	<-sp.done
}

func (sp *splitter) onString(idx uint64, s []byte) {
	var c uint8
	switch string(s) {
	case "action":
		c = kwAction
	case "addr":
		c = kwAddr
	case "size":
		c = kwSize
	case "stream":
		c = kwStream
	case "time_us":
		c = kwTimeUS
	case "frames":
		c = kwFrames
	case "compile_context":
		c = kwCompileContext
	case "user_metadata":
		c = kwUserMetadata
	case "device":
		if sp.devKey == 0 {
			sp.devKey = idx + 1
		}
		return
	case "address":
		if sp.addressKey == 0 {
			sp.addressKey = idx + 1
		}
		return
	default:
		if len(s) > 32 {
			return
		}
		a := ParseAction(string(s))
		if a == ActionUnknown {
			return
		}
		c = codeAction + uint8(a)
	}
	sp.codes[idx] = c
}

// code returns the code of memo entry j (0: none). The cache is large
// for the few memo entries it holds so that two seldom share a slot: on
// the 1 GB tile, with 64 slots, the "action" key and an action name did,
// and a million lookups a read went to the map.
func (sp *splitter) code(j uint64) uint8 {
	c := &sp.cache[j%uint64(len(sp.cache))]
	if c.idx == j+1 {
		return c.code
	}
	code := sp.codes[j]
	*c = codeCacheEntry{idx: j + 1, code: code}
	return code
}

// dictStart returns the offset of the first key of the dict whose
// EMPTY_DICT is at buf[q] when it goes on with MEMOIZE and MARK (FRAME
// opcodes may come between any two), or -1.
func dictStart(buf []byte, q int) int {
	if q = skipFrames(buf, q+1); q < 0 || buf[q] != 0x94 {
		return -1
	}
	if q = skipFrames(buf, q+1); q < 0 || buf[q] != '(' {
		return -1
	}
	return skipFrames(buf, q+1)
}

// actionKey reports whether the dict key at buf[q] is "action".
func (sp *splitter) actionKey(buf []byte, q int) bool {
	if q < 0 || q >= len(buf) {
		return false
	}
	if j, next := memoRef(buf, q); next != 0 {
		return sp.code(j) == kwAction
	}
	return buf[q] == 0x8c && q+8 <= len(buf) && buf[q+1] == 6 && string(buf[q+2:q+8]) == "action"
}

// releaseEvery is how far the splitter reads between two hand-backs of
// mapped pages it has passed (pages read stay resident until then).
const releaseEvery = 1 << 20

// run is the splitter's goroutine: the skim (unless done, x >= 0), the
// offer, and the part.
func (sp *splitter) run(x int) {
	defer close(sp.done)
	defer func() {
		sp.mu.Lock()
		sp.finished = true
		sp.mu.Unlock()
	}()
	// The file may be truncated under the mapping: the splitter's part
	// then ends, and the decoder reports the fault when it gets there.
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			// A fault (the file truncated under the mapping): the batches
			// published before are whole; the decoder reads on after them.
			if debugSplit {
				println("split: the splitter failed:", fmt.Sprint(r))
			}
		}
	}()
	if debugSplit {
		debugLock()
	}
	if x == -1 {
		x = sp.skim()
	}
	if debugSplit {
		debugMark("splitter skimmed")
		defer debugMark("splitter done")
	}
	if x < 0 {
		return
	}
	// Offer the part from x on; the decoder answers as it appends entries,
	// or, while it is still in the dump, the splitter answers itself.
	sp.at.Store(int64(x))
	sp.acceptEarly()
	for sp.acked.Load() == 0 {
		if sp.stop.Load() {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
	if sp.acked.Load() != 1 {
		return
	}
	sp.read(x)
}

// countDump counts the dict whose first key is at buf[q] as a segment or
// a block when that key is the memoized "device" or "address".
func (sp *splitter) countDump(buf []byte, q int) {
	j, next := memoRef(buf, q)
	switch {
	case next == 0:
	case j+1 == sp.devKey:
		sp.segsSeen++
	case j+1 == sp.addressKey:
		sp.blocksSeen++
	}
}

// publishDump publishes the segments and blocks counted, as the skim
// reaches the trace: PyTorch writes the dump's segments first.
func (sp *splitter) publishDump() {
	segs, blocks := min(sp.segsSeen, math.MaxInt32), min(sp.blocksSeen, math.MaxInt32)
	sp.dump.Store(uint64(segs)<<32 | uint64(blocks))
}

// dumpHint returns how many segments and blocks the skim counted in the
// dump before the trace (0 when it has not got there): a capacity for
// the decoder's segments and blocks, bounded by what the input could
// hold, so that they are allocated once, not doubled from small (the
// copies left 190 MiB of garbage resident at the end of a 1 GB tile's
// decode, and their pages were faulted in for nothing).
func (sp *splitter) dumpHint() (segs, blocks int) {
	if sp == nil {
		return 0, 0
	}
	d := sp.dump.Load()
	segs, blocks = int(d>>32), int(d&math.MaxUint32)
	// A segment dict takes at least 12 keys, a block dict 5: a count
	// past these bounds is not PyTorch's dump, and is not trusted.
	if segs > len(sp.buf)/64 {
		segs = 0
	}
	if blocks > len(sp.buf)/32 {
		blocks = 0
	}
	return segs, blocks
}

// give hands back the mapped pages well behind pos.
func (sp *splitter) give(pos int) {
	if end := pos&^(releaseEvery-1) - releaseEvery; sp.release != nil && end > sp.released {
		sp.release(sp.released, end)
		sp.released = end
	}
}

// skimFixed holds the lengths of the fixed-length opcodes the skim steps
// over without a closer look (0: the others).
var skimFixed = func() (t [256]uint8) {
	for _, op := range []byte("N\x88\x89])\x8faesu\x90bdlt\x85\x86\x87\x91R\x81\x92\x93012oQ\x97\x98") {
		t[op] = 1
	}
	for _, op := range []byte("Kh\x80\x82") {
		t[op] = 2
	}
	t['M'], t[0x83] = 3, 3
	t['J'], t['j'], t[0x84] = 5, 5, 5
	t['G'] = 9
	return t
}()

// skim finds where the part starts, the first MARK of a batch of entry
// dicts past splitFrac of the input, and sets pred and base; -1 when
// there is none or the skim cannot follow the input. It is
// pickle.Skim's walk with the commonest opcodes inlined: it is all the
// splitter does before its part, so its speed decides how early the part
// can start.
func (sp *splitter) skim() int {
	buf := sp.buf
	target := int(float64(len(buf)) * splitFrac)
	events := 0
	// odd is the offset of the last dict in the trace that is not an
	// entry: a frame written for the first time, which ends the part
	// (entry). A part starts after quiet bytes without one, or, in a
	// trace that never goes that long without, half-way.
	odd, quiet := 0, min(splitQuiet, len(buf)/16)
	var memo uint64
	var last byte
	next := 1 << 20
	for p := 0; p < len(buf); {
		if p >= next {
			if sp.stop.Load() {
				return -1
			}
			next = p + 1<<20
		}
		op := buf[p]
		if op == 'h' { // BINGET: most opcodes of a dump
			p += 2
			last = op
			continue
		}
		if op == 'J' { // BININT: most of the rest
			p += 5
			last = op
			continue
		}
		if n := skimFixed[op]; n != 0 {
			p += int(n)
			last = op
			continue
		}
		switch op {
		case 0x94: // MEMOIZE of anything but a str
			memo++
			p++
		case 0x8c: // SHORT_BINUNICODE, memoized or not
			if p+1 >= len(buf) {
				return -1
			}
			e := p + 2 + int(buf[p+1])
			if e < len(buf) && buf[e] == 0x94 {
				if e-p-2 <= 16 {
					sp.onString(memo, buf[p+2:e])
				}
				memo++
				e++
			}
			p = e
		case 0x8a: // LONG1
			if p+1 >= len(buf) {
				return -1
			}
			p += 2 + int(buf[p+1])
		case '}':
			q := dictStart(buf, p)
			if sp.actionKey(buf, q) {
				if events == 0 {
					sp.publishDump()
				}
				events++
			} else if events == 0 {
				if q >= 0 {
					sp.countDump(buf, q)
				}
			} else {
				odd = p // a frame first written here, most likely
			}
			p++
		case '(':
			if p >= target && last == 'e' && events > 0 && (p-odd >= quiet || p >= len(buf)/2) && p+1 < len(buf) && buf[p+1] == '}' &&
				sp.actionKey(buf, dictStart(buf, p+1)) {
				sp.pred, sp.base = events, memo
				return p
			}
			p++
		case 0x95: // FRAME: transparent
			if p = skipFrames(buf, p); p < 0 {
				return -1
			}
			continue
		default:
			n := pickle.OpLen(buf, p)
			if n == 0 {
				return -1 // an explicit memo put, a text opcode, STOP...
			}
			p += n
		}
		last = op
	}
	return -1
}

// read reads whole batches of entries from x into arr[pred:],
// publishing each.
func (sp *splitter) read(x int) {
	buf, arr := sp.buf, sp.arr
	// The pages before x stay mapped for the decoder, which gives them
	// back as it passes them: given back by the skim, they were faulted
	// in again (the skim now covers the dump and a few MB of the trace).
	sp.released = max(sp.released, x&^(releaseEvery-1))
	room := cap(arr) - sp.pred
	sp.memo, sp.localStack, sp.localStr = sp.base, map[uint64]int32{}, map[uint64]strRef{}
	pos, n := x, 0
	var metas []regionMeta
	var scripts []scriptRun
	lastScript := uint8(0)
	for !sp.stop.Load() {
		q := skipFrames(buf, pos)
		if q < 0 || buf[q] != '(' {
			break
		}
		q++
		cnt, nmeta, nscript, nspan, nframe := n, len(metas), len(scripts), len(sp.spansOwn), len(sp.framesOwn)
		complete := false
		for {
			if q = skipFrames(buf, q); q < 0 {
				break
			}
			if buf[q] == 'e' {
				q++
				complete = true
				break
			}
			if buf[q] != '}' || cnt >= room || cnt-n >= 1<<16 {
				break
			}
			next, script, ok := sp.entry(buf, q, &arr[sp.pred+cnt], &metas)
			if !ok {
				break
			}
			if script != lastScript {
				scripts = append(scripts, scriptRun{cnt, script})
				lastScript = script
			}
			q = next
			cnt++
		}
		if !complete {
			if debugSplit && q >= 0 {
				println("split: the splitter stops at byte", q, "(an entry it leaves to the decoder)")
			}
			metas, scripts = metas[:nmeta], scripts[:nscript] // those of the batch cut short
			sp.spansOwn, sp.framesOwn = sp.spansOwn[:nspan], sp.framesOwn[:nframe]
			break
		}
		pos, n = q, cnt
		sp.mu.Lock()
		sp.batches = append(sp.batches, batchEnd{pos, n})
		sp.metas, sp.scripts, sp.raw = metas, scripts, sp.rawOwn
		sp.spans, sp.frames = sp.spansOwn, sp.framesOwn
		sp.mu.Unlock()
		// The decoder, waiting, is woken every wakeEvery batches (and
		// when the splitter ends): each wake-up took some 10 µs of CPU,
		// and the merge caught up with the splitter every fifth batch.
		if len(sp.batches)%wakeEvery == 0 {
			select {
			case sp.more <- struct{}{}:
			default:
			}
		}
		sp.give(pos)
	}
}

// skipFrames returns q past any FRAME opcodes at buf[q] (whose lengths
// fit the input, as the VM checks), or -1 at the end of buf. It inlines
// for the common case, no FRAME.
func skipFrames(buf []byte, q int) int {
	if q < len(buf) && buf[q] != 0x95 {
		return q
	}
	return skipFramesAt(buf, q)
}

func skipFramesAt(buf []byte, q int) int {
	for q < len(buf) && buf[q] == 0x95 {
		if q+9 > len(buf) {
			return -1
		}
		l := uint64(buf[q+1]) | uint64(buf[q+2])<<8 | uint64(buf[q+3])<<16 | uint64(buf[q+4])<<24 |
			uint64(buf[q+5])<<32 | uint64(buf[q+6])<<40 | uint64(buf[q+7])<<48 | uint64(buf[q+8])<<56
		if l > uint64(len(buf)-q-9) {
			return -1
		}
		q += 9
	}
	if q >= len(buf) {
		return -1
	}
	return q
}

// entry reads the entry dict at buf[q] (EMPTY_DICT MEMOIZE MARK ...
// SETITEMS) as ReadEntry would, into e, and returns the position past it
// and its script: false for anything ReadEntry leaves to the ordinary
// path, or that needs the decoder's memo to read (a key or action not
// known from the skim, a reference past the splitter's start).
func (sp *splitter) entry(buf []byte, q int, e *Event, metas *[]regionMeta) (int, uint8, bool) {
	if q+2 < len(buf) && buf[q+1] == 0x94 && buf[q+2] == '(' {
		q += 3 // dictStart's commonest case, without the call
	} else if q = dictStart(buf, q); q < 0 {
		return 0, 0, false
	}
	memo := sp.memo + 1 // the dict's own entry is sp.memo
	*e = Event{}
	var script uint8
	var seen uint16
	var m regionMeta
	var stream int64
	for {
		if q = skipFrames(buf, q); q < 0 {
			return 0, 0, false
		}
		if buf[q] == opSetItems {
			q++
			break
		}
		j, next := memoRef(buf, q)
		if next == 0 || j >= sp.base {
			return 0, 0, false
		}
		kw := sp.code(j)
		if kw == 0 || kw >= codeAction {
			return 0, 0, false
		}
		bit := uint16(1) << kw
		if seen&bit != 0 {
			return 0, 0, false
		}
		seen |= bit
		if q = skipFrames(buf, next); q < 0 {
			return 0, 0, false
		}
		var x int64
		switch buf[q] {
		case opBinGet, opLongBinGet:
			j, next := memoRef(buf, q)
			if next == 0 || j >= memo {
				return 0, 0, false
			}
			q = next
			if j >= sp.base {
				// What an entry of the part made: a frames list or a str.
				switch kw {
				case kwFrames:
					i, ok := sp.localStack[j]
					if !ok {
						return 0, 0, false
					}
					e.Stack = StackID(i)
					e.Flags |= FlagHasFrames | flagOwnStack
				case kwCompileContext, kwUserMetadata:
					r, ok := sp.localStr[j]
					if !ok {
						return 0, 0, false
					}
					if kw == kwCompileContext {
						m.cc, m.ccSeen = r, true
					} else {
						m.um, m.umSeen, m.umFirst = r, true, seen&(1<<kwCompileContext) == 0
					}
				default:
					return 0, 0, false
				}
				continue
			}
			switch kw {
			case kwAction:
				c := sp.code(j)
				if c < codeAction || Action(c-codeAction) == ActionUnknown {
					return 0, 0, false
				}
				e.Action = Action(c - codeAction)
			case kwFrames:
				if j > math.MaxInt32 {
					return 0, 0, false
				}
				e.Stack = StackID(j)
				e.Flags |= FlagHasFrames | flagStackRef
			case kwCompileContext:
				m.cc, m.ccSeen = strRef{memo: j + 1}, true
			case kwUserMetadata:
				m.um, m.umSeen, m.umFirst = strRef{memo: j + 1}, true, seen&(1<<kwCompileContext) == 0
			default:
				return 0, 0, false
			}
			continue
		case 0x8c:
			// A str of its own (compile_context "N/A" in every entry of
			// PyTorch's files), memoized or not.
			if kw != kwCompileContext && kw != kwUserMetadata || q+1 >= len(buf) {
				return 0, 0, false
			}
			end := q + 2 + int(buf[q+1])
			if end > len(buf) {
				return 0, 0, false
			}
			r := strRef{off: int32(q + 2), n: int32(end - q - 2), lit: true}
			memoized := end < len(buf) && buf[end] == 0x94
			if memoized {
				end++
			}
			if kw == kwCompileContext {
				m.cc, m.ccSeen = r, true
				if memoized {
					addMemo(&script, memoCC)
				}
			} else {
				m.um, m.umSeen, m.umFirst = r, true, seen&(1<<kwCompileContext) == 0
				if memoized {
					addMemo(&script, memoUM)
				}
			}
			if memoized {
				sp.localStr[memo] = r
				memo++
			}
			q = end
			continue
		case ']':
			// A frames list of its own (as PyTorch writes every entry's),
			// memoized or not: its items are memoized frames, in batches
			// (MARK ... APPENDS) or one (item APPEND).
			if kw != kwFrames || script>>6 == 3 {
				return 0, 0, false
			}
			q++
			listMemo := uint64(0) // its memo index+1
			if q < len(buf) && buf[q] == 0x94 {
				q++
				addMemo(&script, memoFrames)
				listMemo = memo + 1
				memo++
			}
			off := len(sp.framesOwn)
			for {
				r := skipFrames(buf, q)
				if r < 0 {
					return 0, 0, false
				}
				if buf[r] == '(' {
					for r++; ; {
						if r = skipFrames(buf, r); r < 0 {
							return 0, 0, false
						}
						if buf[r] == 'e' {
							r++
							break
						}
						j, next := memoRef(buf, r)
						if next == 0 || j >= sp.base || len(sp.framesOwn)-off >= 1<<16 {
							return 0, 0, false
						}
						sp.framesOwn = append(sp.framesOwn, uint32(j))
						r = next
					}
					q = r
					continue
				}
				if j, next := memoRef(buf, r); next != 0 {
					if a := skipFrames(buf, next); a >= 0 && buf[a] == 'a' {
						if j >= sp.base {
							return 0, 0, false
						}
						sp.framesOwn = append(sp.framesOwn, uint32(j))
						q = a + 1
						continue
					}
				}
				break // the next key, or SETITEMS
			}
			if len(sp.spansOwn) >= math.MaxInt32 {
				return 0, 0, false
			}
			e.Stack = StackID(len(sp.spansOwn))
			if listMemo > 0 {
				sp.localStack[listMemo-1] = int32(e.Stack)
			}
			sp.spansOwn = append(sp.spansOwn, stackSpan{int32(off), int32(len(sp.framesOwn) - off)})
			e.Flags |= FlagHasFrames | flagOwnStack
			continue
		case opNone:
			q++
			switch kw {
			case kwAddr:
			case kwFrames:
				e.Stack = NoStack
				e.Flags |= FlagHasFrames
			case kwCompileContext:
				m.cc, m.ccSeen = strRef{}, true
			case kwUserMetadata:
				m.um, m.umSeen, m.umFirst = strRef{}, true, seen&(1<<kwCompileContext) == 0
			default:
				return 0, 0, false
			}
			continue
		case opBinInt1:
			if q+2 > len(buf) {
				return 0, 0, false
			}
			x = int64(buf[q+1])
			q += 2
		case opBinInt2:
			if q+3 > len(buf) {
				return 0, 0, false
			}
			x = int64(uint16(buf[q+1]) | uint16(buf[q+2])<<8)
			q += 3
		case opBinInt:
			if q+5 > len(buf) {
				return 0, 0, false
			}
			x = int64(int32(uint32(buf[q+1]) | uint32(buf[q+2])<<8 | uint32(buf[q+3])<<16 | uint32(buf[q+4])<<24))
			q += 5
		case opLong1:
			v, next := long1At(buf, q)
			if next == 0 {
				return 0, 0, false
			}
			x, q = v, next
		default:
			return 0, 0, false
		}
		switch kw {
		case kwAddr:
			if x < 0 {
				return 0, 0, false
			}
			e.Addr = uint64(x)
		case kwSize:
			if x < 0 {
				return 0, 0, false
			}
			e.Size = uint64(x)
		case kwStream:
			stream = x
		case kwTimeUS:
			e.TimeUS = x
			e.Flags |= FlagHasTime
		default:
			return 0, 0, false
		}
	}
	// As commitEntry: an action, and the dict complete here (DictEndsAt).
	if seen&(1<<kwAction) == 0 || q+10 > len(buf) {
		return 0, 0, false
	}
	if r := q; buf[r] == 0x95 {
		if r += 9; buf[r] == '(' {
			return 0, 0, false
		}
	} else if buf[r] == '(' {
		return 0, 0, false
	}
	if seen&(1<<kwStream) != 0 {
		i, ok := sp.lastStream, sp.lastRaw == stream && len(sp.rawOwn) > 0
		if !ok {
			i, ok = sp.rawIndex[stream]
		}
		if !ok {
			if len(sp.rawOwn) >= MaxStreams {
				return 0, 0, false
			}
			i = len(sp.rawOwn)
			sp.rawOwn = append(sp.rawOwn, stream)
			sp.rawIndex[stream] = i
		}
		e.Stream = StreamID(i + 1)
		sp.lastRaw, sp.lastStream = stream, i
	}
	if m.ccSeen || m.umSeen {
		if n := len(*metas); n == 0 || !m.same(&(*metas)[n-1], buf) {
			*metas = append(*metas, m)
			e.Flags |= flagNewMeta
		}
		e.Flags |= flagMeta
	}
	sp.memo = memo
	return q, script, true
}

// acceptEarly answers the offer from the splitter's goroutine when the
// decoder has appended no entry yet: it is still in the dump, which
// PyTorch writes before the traces, and cannot be past the offer (pred
// entries come before it). The splitter then reads its part beside the
// dump's decode: waiting for the trace's first entries left the second
// core idle for 0.35 s of the 1 GB tile's decode (the skim of the dump
// ends at 0.09 s, the dump's decode at 0.45 s). It does what accept does
// when the events array has the room; otherwise accept answers.
func (sp *splitter) acceptEarly() {
	b := sp.b
	if !splitAcceptEarly {
		return
	}
	sp.offerMu.Lock()
	defer sp.offerMu.Unlock()
	if sp.traceBegun || sp.acked.Load() != 0 || len(b.events) != 0 {
		return
	}
	at := sp.at.Load()
	want := int(float64(sp.pred)*float64(len(sp.buf))/float64(max(at, 1))*1.1) + 1024
	if at < 0 || want > cap(b.events) {
		return
	}
	sp.arr = b.events[:cap(b.events)]
	b.events = b.events[:0:sp.pred]
	sp.acked.Store(1)
}

// beginTrace is called by the decoder before it appends its first entry:
// from then on only accept answers the offer.
func (sp *splitter) beginTrace() {
	sp.offerMu.Lock()
	sp.traceBegun = true
	sp.offerMu.Unlock()
}

// accept answers the splitter's offer as the decoder appends entries:
// it writes below pred from now on, or refuses when it is past the offer
// already.
// atX says the decoder is at the MARK where the part starts (Split).
func (b *builder) accept(sp *splitter, atX bool) {
	at := sp.at.Load()
	if at < 0 || sp.acked.Load() != 0 {
		return
	}
	n, off := len(b.events), b.d.Offset()
	if n > sp.pred || n == sp.pred && !atX || off > at || off == at && !atX {
		sp.acked.Store(2)
		return
	}
	// The entries expected, at the rate per byte seen before the part, but
	// no more than the next doubling would reserve (an input dense with
	// tiny entries at first must not reserve for more than it can hold).
	want := int(float64(sp.pred)*float64(len(sp.buf))/float64(max(at, 1))*1.1) + 1024
	if want = min(want, 2*cap(b.events)+1024); want > cap(b.events) {
		// The reserve was short (entries smaller than guessed).
		b.moveEvents(func(old []Event) []Event {
			to := make([]Event, len(old), want)
			copyInPieces(to, old)
			return to
		})
	}
	sp.arr = b.events[:cap(b.events)]
	// Its capacity ends at pred: an entry more than predicted moves the
	// array (appendEvent), leaving the splitter's part to the old one.
	b.events = b.events[:n:sp.pred]
	sp.acked.Store(1)
}

// resolveStackRef gives e, whose Stack is the memo index of its frames
// (flagStackRef), the stack that memo entry holds: what ReadEntry would
// have read. False when it holds anything else.
func resolveStackRef(d *pickle.Decoder, e *Event) bool {
	v, ok := d.MemoPlain(uint64(e.Stack))
	switch {
	case !ok:
		return false
	case v.Kind == pickle.Handle && v.Sub == hStack:
		e.Stack = StackID(v.X)
	case v.Kind == pickle.Handle && v.Sub == hEmpty, v.Kind == pickle.None:
		e.Stack = NoStack
	default:
		return false
	}
	e.Flags &^= flagStackRef
	return true
}

// sameArray reports whether b.events is still the array handed over.
func (sp *splitter) sameArray() bool {
	if cap(sp.arr) == 0 || cap(sp.b.events) == 0 {
		return false
	}
	return unsafe.SliceData(sp.arr) == unsafe.SliceData(sp.b.events)
}

// Split implements pickle.Splitter: at the MARK where the splitter's part
// starts, it takes the batches the splitter reads, as they come, while
// everything is as the splitter assumed.
func (sp *splitter) Split(d *pickle.Decoder) (bool, error) {
	b := sp.b
	if debugSplit {
		debugMark("decoder at the part")
		defer debugMark("decoder merged")
	}
	if sp.acked.Load() == 0 {
		b.accept(sp, true) // a part offered since the last entries appended
	}
	sp.at.Store(-1)
	b.split = nil
	took, err := sp.merge(d)
	sp.finish()
	if sp.sameArray() {
		b.events = sp.arr[:len(b.events)] // the whole capacity again
	}
	sp.arr, sp.metas, sp.scripts, sp.batches = nil, nil, nil, nil
	return took, err
}

// merge does the work of Split; the splitter may still be running.
func (sp *splitter) merge(d *pickle.Decoder) (bool, error) {
	b := sp.b
	if sp.acked.Load() != 1 || !sp.sameArray() {
		return false, nil
	}
	m := len(b.events)
	if m != sp.pred || uint64(d.MemoCount()) != sp.base {
		return false, nil
	}
	list, ok := d.Top()
	if !ok || list.Kind != pickle.List {
		return false, nil
	}
	run := b.openRuns[list]
	if run != nil && run.first+run.n != uint64(m) || run == nil && d.Len(list) != 0 {
		return false, nil
	}
	b.events = sp.arr[:m] // the whole capacity again
	strs := map[uint64]pickle.Value{}
	none := pickle.Value{Kind: pickle.None}
	// valid resolves the memo references of an entry, as ReadEntry would
	// see them; rm is its regionMeta when it has one (flagMeta).
	valid := func(e *Event, rm *regionMeta, spans []stackSpan, frames []uint32) bool {
		if e.Flags&flagStackRef != 0 && !resolveStackRef(d, e) {
			return false
		}
		if e.Flags&flagOwnStack != 0 {
			// Its own list: interned in the merge, in order; here only
			// checked to hold frames (else the list stays generic and
			// event refuses it).
			sp := spans[e.Stack]
			for _, j := range frames[sp.off : sp.off+sp.n] {
				if v, ok := d.MemoPlain(uint64(j)); !ok || v.Kind != pickle.Handle || v.Sub != hFrame {
					return false
				}
			}
		}
		if rm != nil {
			for _, ref := range [2]strRef{rm.cc, rm.um} {
				if ref.memo == 0 {
					continue
				}
				if _, ok := strs[ref.memo-1]; !ok {
					v, ok := d.MemoPlain(ref.memo - 1)
					if !ok || v.Kind != pickle.String && v.Kind != pickle.None {
						return false
					}
					strs[ref.memo-1] = v
				}
			}
		}
		return true
	}
	// str gives the value of a str an entry holds, interning one of its
	// own as the decoder does when it reads it.
	str := func(ref strRef) pickle.Value {
		switch {
		case ref.lit:
			return d.MakeStringBytes(sp.buf[ref.off : ref.off+ref.n])
		case ref.memo == 0:
			return none
		}
		return strs[ref.memo-1]
	}
	var items []pickle.Value
	// The memo entries of the entries merged: rm is the run they extend,
	// with pending of its entries not yet given to the decoder (flush).
	var rm *runMemo
	var pending uint64
	memoRuns := true
	flush := func() {
		if pending == 0 {
			return
		}
		if memoRuns && !d.MemoizeRun(pending, rm) {
			memoRuns = false // not a dense memo: one by one from now on
		}
		if !memoRuns {
			for k := rm.n - pending; k < rm.n; k++ {
				d.Memoize(rm.MemoValue(k))
			}
			rm = nil
		}
		pending = 0
	}
	// inRun adds the memo entries of entry n (its dict's, and its frames
	// list's when script says so) to the run, a new one when n does not
	// follow it or holds another number of entries per trace entry.
	inRun := func(n int, script uint8) {
		per := uint64(1 + script>>6)
		if rm == nil || rm.per != per || rm.end != n {
			flush()
			rm = &runMemo{b: b, first: n, end: n, per: per}
		}
		rm.n += per
		rm.end++
		pending += per
	}
	// The strs and MetaID of the last meta merged, metas[lastMetaAt-1].
	var cc, um pickle.Value
	var metaID MetaID
	lastMetaAt := 0
	// The stacks of the frames lists entries refer to, by memo index+1
	// (memo entries before the part: they stay what they are; 65,536
	// slots: the 1 GB tile's entries cycle through 12,427 frames lists,
	// of which 256 slots held 37%, 65,536 95%); the script of the entry
	// merged, and where the next run of scripts starts; the last stream
	// remapped.
	stackCache := make([]stackCacheEntry, 1<<16)
	script, nextScript := uint8(0), 0
	lastStream, lastTmp := StreamID(-1), StreamID(0)
	sawTime := false
	waits := 0
	merged, end := 0, -1
	// metaAt: the metas of the entries merged (the last is theirs); sk:
	// the scripts' runs that start at or before the entry merged.
	metaAt, sk := 0, 0
	for next := 0; ; {
		sp.mu.Lock()
		batches, metas, scripts, raw, spans, frames, finished := sp.batches, sp.metas, sp.scripts, sp.raw, sp.spans, sp.frames, sp.finished
		sp.mu.Unlock()
		if next >= len(batches) {
			if finished {
				break
			}
			waits++
			select {
			case <-sp.more:
			case <-sp.done:
			}
			continue
		}
		for ; next < len(batches); next++ {
			be := batches[next]
			evs := sp.arr[sp.pred+merged : sp.pred+be.n]
			for i, k := 0, metaAt; i < len(evs); i++ {
				e := &evs[i]
				if e.Flags&(flagStackRef|flagOwnStack|flagMeta|flagNewMeta) == 0 {
					continue
				}
				if e.Flags&(flagStackRef|flagOwnStack|flagMeta|flagNewMeta) == flagStackRef {
					// Most entries: a stack that earlier entries had.
					c := &stackCache[uint64(e.Stack)%uint64(len(stackCache))]
					if c.idx == uint64(e.Stack)+1 {
						e.Stack = c.id
						e.Flags &^= flagStackRef
						continue
					}
					j := uint64(e.Stack)
					if !resolveStackRef(d, e) {
						goto done
					}
					*c = stackCacheEntry{idx: j + 1, id: e.Stack}
					continue
				}
				var rm *regionMeta
				if e.Flags&flagNewMeta != 0 {
					k++
				}
				if e.Flags&flagMeta != 0 {
					rm = &metas[k-1]
				}
				if !valid(e, rm, spans, frames) {
					goto done
				}
			}
			// What commitEntry does for each entry, in order, on the
			// entry in place (appendEvent would copy it onto itself);
			// b.events holds the batch meanwhile (noteEvent looks back).
			b.events = b.events[:m+be.n]
			nextScript = min(nextScript, merged) // scripts published since
			for i := range evs {
				n := m + merged + i // len(b.events) after the entries before
				e := &evs[i]
				if merged+i >= nextScript {
					for sk < len(scripts) && scripts[sk].first <= merged+i {
						sk++
					}
					if sk > 0 {
						script = scripts[sk-1].script
					}
					nextScript = math.MaxInt
					if sk < len(scripts) {
						nextScript = scripts[sk].first
					}
				}
				if e.Stream != 0 {
					if k := e.Stream - 1; k != lastStream {
						lastStream, lastTmp = k, b.tmpStream(raw[k])
					}
					e.Stream = lastTmp
				}
				sawTime = sawTime || e.Flags&FlagHasTime != 0
				if e.Flags&(flagOwnStack|flagMeta|flagNewMeta) == 0 && (script == 0 || script == scriptFrames) && memoRuns {
					// Most entries: no frames list of their own, no
					// metadata, memo entries in a run.
					if n&(feedEvery-1) == 0 {
						b.events = b.events[:n]
						b.makeRoom(n)
						b.events = b.events[:m+be.n]
					}
					b.noteEvent(e, n, 0)
					inRun(n, script)
					continue
				}
				var own pickle.Value // its frames list, finished
				if e.Flags&flagOwnStack != 0 {
					e.Flags &^= flagOwnStack
					span := spans[e.Stack]
					own, e.Stack = pickle.MakeHandle(hEmpty, 0), NoStack
					if span.n > 0 {
						items = items[:0]
						for _, j := range frames[span.off : span.off+span.n] {
							v, _ := d.MemoPlain(uint64(j))
							items = append(items, v)
						}
						e.Stack = b.internStack(items)
						own = pickle.MakeHandle(hStack, uint64(e.Stack))
					}
				}
				var id MetaID
				if e.Flags&flagNewMeta != 0 {
					metaAt++
				}
				if e.Flags&flagMeta != 0 {
					e.Flags &^= flagMeta | flagNewMeta
					if metaAt != lastMetaAt {
						// The strs and MetaID of a meta the entry before
						// had are the same: interned again, they would be.
						rmeta := &metas[metaAt-1]
						var meta EventMeta
						cc, um = pickle.Value{}, pickle.Value{}
						if rmeta.umSeen && rmeta.umFirst {
							um = str(rmeta.um)
							meta.UserMetadata, _ = b.stringValue(um, "user_metadata")
							b.sawUserMeta = true
						}
						if rmeta.ccSeen {
							cc = str(rmeta.cc)
							meta.CompileContext, _ = b.stringValue(cc, "compile_context")
							b.sawCompile = true
						}
						if rmeta.umSeen && !rmeta.umFirst {
							um = str(rmeta.um)
							meta.UserMetadata, _ = b.stringValue(um, "user_metadata")
							b.sawUserMeta = true
						}
						metaID, lastMetaAt = b.s.AddMeta(meta), metaAt
					}
					id = metaID
				}
				b.events = b.events[:n]
				b.makeRoom(n)
				b.events = b.events[:m+be.n]
				b.noteEvent(e, n, id)
				// The memo entries its dict and what it holds got, in the
				// order MEMOIZE gave them: a run of them (runMemo) while
				// they are the dict's and frames lists'.
				if (script == 0 || script == scriptFrames) && memoRuns {
					inRun(n, script)
					continue
				}
				flush()
				d.Memoize(pickle.MakeHandle(hEvent, uint64(n)))
				for k := range script >> 6 {
					switch script >> (2 * k) & 3 {
					case memoCC:
						d.Memoize(cc)
					case memoUM:
						d.Memoize(um)
					case memoFrames:
						d.Memoize(own)
					}
				}
			}
			flush()
			b.events = b.events[:m+be.n]
			b.sawTime = b.sawTime || sawTime
			merged, end = be.n, be.end
		}
	}
done:
	if debugSplit {
		println("split: part from the batch predicted after", sp.pred, "entries:", merged, "entries merged, up to byte", end, "waits", waits)
	}
	if merged == 0 {
		return false, nil
	}
	if run == nil {
		b.openRuns[list] = &eventRun{first: uint64(m), n: uint64(merged)}
	} else {
		run.n += uint64(merged)
	}
	splitMerged.Add(int64(merged))
	d.SkipTo(end)
	return true, nil
}

// runMemo is a run of memo entries that merged entries got, per entries
// each (their dict's, and their frames list's when per is 2), events from
// first on: what pickle.Decoder.MemoizeRun keeps of them.
type runMemo struct {
	b          *builder
	first, end int // its events
	per        uint64
	n          uint64 // memo entries in the run
}

// MemoValue implements pickle.MemoRun: the handle of the entry's event,
// or of its frames list (the empty one, or its interned stack).
func (r *runMemo) MemoValue(k uint64) pickle.Value {
	n := r.first + int(k/r.per)
	if k%r.per == 0 {
		return pickle.MakeHandle(hEvent, uint64(n))
	}
	if st := r.b.events[n].Stack; st != NoStack {
		return pickle.MakeHandle(hStack, uint64(st))
	}
	return pickle.MakeHandle(hEmpty, 0)
}
