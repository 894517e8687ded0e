package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
)

// torch.profiler's memory timeline export (prof.export_memory_timeline,
// torch/profiler/_memory_profiler.py) comes in three forms, chosen by the
// path's suffix:
//
//   - .raw.json.gz: export_memory_timeline_raw, a list of
//     [time_ns, action, signed bytes, category index] per tensor event:
//     action 1 PREEXISTING (time -1: alive before profiling began),
//     2 CREATE, 3 INCREMENT_VERSION (written twice: -bytes under the old
//     version's category, +bytes under the new one's), 4 DESTROY;
//     categories indexed as in timelineCategories.
//   - .json(.gz): [times_us, sizes], sizes[k] the bytes per category after
//     timestamp k (index 0 unused, then category index + 1), -1 times
//     replaced by the earliest time.
//   - .html: a PNG of the plot; no data.
//
// Neither data form records the device (the caller chose it), addresses or
// stacks. The raw form pairs a destroy with the latest live tensor of its
// size and category; the JSON form has totals only, so its allocations are
// each category's changes.

// categoryStack is the one-frame stack ("[activation]") that names an
// allocation's category where the file has no stacks, so that flame
// graphs and sites group by it.
func (b *profBuild) categoryStack(cat int) StackID {
	return b.stack([]FrameID{b.frame(Frame{Name: "[" + timelineCategories[cat] + "]"})})
}

// decodeTimeline reads either data form of export_memory_timeline.
func decodeTimeline(r io.Reader) (*Snapshot, error) {
	cr := &countReader{r: r}
	dec := json.NewDecoder(cr)
	dec.UseNumber()
	fail := func(err error) error {
		var se *json.SyntaxError
		var je *jsonError
		switch {
		case errors.As(err, &je):
			return err
		case errors.As(err, &se):
			return &jsonError{off: se.Offset, msg: "memory timeline: " + se.Error()}
		case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
			return &jsonError{off: cr.n, msg: "memory timeline: the input ends early"}
		}
		return &jsonError{off: dec.InputOffset(), msg: "memory timeline: " + err.Error()}
	}
	if err := expectDelim(dec, '['); err != nil {
		return nil, fail(err)
	}
	var rows [][]json.Number
	var sizes json.RawMessage
	for i := 0; dec.More(); i++ {
		var el json.RawMessage
		if err := dec.Decode(&el); err != nil {
			return nil, fail(fmt.Errorf("event %d: %v", i, err))
		}
		// The JSON form is two lists; its second holds lists, not numbers.
		if i == 1 && isTimelineHead(el) && len(rows) == 1 {
			sizes = el
			if dec.More() {
				return nil, fail(errors.New("a memory timeline [times, sizes] with more than two lists"))
			}
			break
		}
		var row []json.Number
		if err := json.Unmarshal(el, &row); err != nil {
			return nil, fail(fmt.Errorf("event %d: not a list of numbers", i))
		}
		rows = append(rows, row)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fail(err)
	}
	if err := drain(dec, cr); err != nil {
		return nil, fail(err)
	}
	// [] (raw) or [[], []] (JSON form): the device had no memory events.
	if sizes == nil && (len(rows) == 0 || len(rows) == 2 && len(rows[0]) == 0 && len(rows[1]) == 0) {
		return nil, errors.New("an empty memory timeline: torch.profiler recorded no tensor on the exported device (check export_memory_timeline's device argument)")
	}
	var s *Snapshot
	var err error
	if sizes != nil {
		s, err = timelineTotals(rows[0], sizes)
	} else {
		s, err = timelineRaw(rows)
	}
	if err != nil {
		return nil, fail(err)
	}
	s.Source.Size = cr.n
	return s, nil
}

// rawEvent is one event of the raw export.
type rawEvent struct {
	t      int64
	action int64
	bytes  int64
	cat    int
}

func parseInt(n json.Number) (int64, error) {
	return strconv.ParseInt(string(n), 10, 64)
}

// timelineRaw builds the model of a raw export. Events at one timestamp
// happen at once for the profiler (its plot has one point per
// timestamp): the model writes a timestamp's frees before its
// allocations, so that no moment between them counts both, and leaves out
// a tensor created and destroyed within one timestamp.
func timelineRaw(rows [][]json.Number) (*Snapshot, error) {
	ev := make([]rawEvent, len(rows))
	tMin := int64(-1)
	for i, r := range rows {
		if len(r) != 4 {
			return nil, fmt.Errorf("event %d has %d values, not [time_ns, action, bytes, category]", i, len(r))
		}
		var vals [4]int64
		for j, n := range r {
			v, err := parseInt(n)
			if err != nil {
				return nil, fmt.Errorf("event %d: %q is not an integer", i, string(n))
			}
			vals[j] = v
		}
		e := rawEvent{t: vals[0], action: vals[1], bytes: vals[2], cat: int(vals[3])}
		if e.action < 1 || e.action > 4 {
			return nil, fmt.Errorf("event %d: action %d is not one of torch.profiler's (1 preexisting, 2 create, 3 increment_version, 4 destroy)", i, e.action)
		}
		if vals[3] < 0 || vals[3] >= int64(len(timelineCategories)) {
			return nil, fmt.Errorf("event %d: category %d is not one of torch.profiler's (0-%d)", i, vals[3], len(timelineCategories)-1)
		}
		if e.t < -1 {
			return nil, fmt.Errorf("event %d: time %d ns", i, e.t)
		}
		if e.bytes == 0 || e.bytes < -(1<<62) || e.bytes > 1<<62 {
			if e.bytes == 0 {
				ev[i] = e
				continue
			}
			return nil, fmt.Errorf("event %d: %d bytes", i, e.bytes)
		}
		if e.t >= 0 && (tMin < 0 || e.t < tMin) {
			tMin = e.t
		}
		ev[i] = e
	}
	// PyTorch writes the events in time order; -1 (before profiling)
	// first.
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].t < ev[j].t })

	b := newProfBuild(GenTimelineRaw, false)
	l := b.ledger(0)
	p := b.s.Profiler
	p.Preexisting = []int{0}
	usOf := func(t int64) int64 {
		if t < 0 {
			t = tMin
		}
		if t < 0 {
			return 0
		}
		return t / 1000
	}
	type pend struct {
		size uint64
		cat  int
		key  [2]uint64
	}
	for i := 0; i < len(ev); {
		j := i
		for j < len(ev) && ev[j].t == ev[i].t {
			j++
		}
		us := usOf(ev[i].t)
		// This timestamp's allocations, written after its frees; a free
		// that pairs with one of them drops both.
		var allocs []pend
		pending := map[[2]uint64]int{}
		for k := i; k < j; k++ {
			e := ev[k]
			if e.bytes == 0 {
				continue
			}
			extra := b.category(timelineCategories[e.cat])
			size := uint64(e.bytes)
			if e.bytes < 0 {
				size = uint64(-e.bytes)
			}
			key := [2]uint64{size, uint64(extra)}
			// A version bump that keeps the category changes nothing.
			if e.action == 3 && e.bytes < 0 && k+1 < j {
				n := ev[k+1]
				if n.action == 3 && n.bytes == -e.bytes && n.cat == e.cat {
					k++
					continue
				}
			}
			if e.bytes > 0 {
				if e.t < 0 {
					p.Preexisting[0]++
				}
				allocs = append(allocs, pend{size, e.cat, key})
				pending[key]++
				continue
			}
			if pending[key] > 0 {
				// Created and destroyed within this timestamp.
				pending[key]--
				for a := len(allocs) - 1; a >= 0; a-- {
					if allocs[a].key == key {
						allocs = append(allocs[:a], allocs[a+1:]...)
						break
					}
				}
				p.Transient++
				continue
			}
			l.free(0, size, us, b.categoryStack(e.cat), extra)
		}
		for _, a := range allocs {
			l.alloc(0, a.size, us, b.categoryStack(a.cat), ExtraID(a.key[1]))
		}
		i = j
	}
	s := b.finish([]string{"exported device"})
	p.Notes = append(p.Notes,
		"no allocator segments, addresses or stacks: export_memory_timeline records tensors by category only; the segment, state and pool views need a memory snapshot",
		"the file does not record its device (export_memory_timeline's device argument); it is shown as one device",
		"each destroy was paired with the latest live tensor of its size and category: memory totals and categories are exact, lifetimes are a guess")
	if p.Transient > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d tensors created and destroyed within one timestamp are not shown (PyTorch's plot does not show them either)", p.Transient))
	}
	if p.Preexisting[0] > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d tensors existed before profiling began (time -1); they are shown allocated at the first timestamp, as PyTorch plots them", p.Preexisting[0]))
	}
	return s, nil
}

// timelineTotals builds the model of the JSON form, whose per-category
// totals after each timestamp are all it has: each rise of a category is
// an allocation, each fall frees its latest ones (splitting the last when
// the fall ends inside it).
func timelineTotals(times []json.Number, raw json.RawMessage) (*Snapshot, error) {
	var sizes [][]json.Number
	dec := json.NewDecoder(bytesReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&sizes); err != nil {
		return nil, fmt.Errorf("sizes: %v", err)
	}
	if len(sizes) != len(times) {
		return nil, fmt.Errorf("%d times but %d rows of sizes", len(times), len(sizes))
	}
	b := newProfBuild(GenTimeline, false)
	l := b.ledger(0)
	ncat := len(timelineCategories)
	prev := make([]int64, ncat)
	liveBy := make([][]uint64, ncat) // sizes of each category's live allocations
	lastT := int64(-1 << 62)
	for k := range times {
		t, err := parseInt(times[k])
		if err != nil {
			return nil, fmt.Errorf("time %d: %q is not an integer", k, string(times[k]))
		}
		if t < lastT {
			return nil, fmt.Errorf("time %d (%d µs) is before the one before it", k, t)
		}
		lastT = t
		row := sizes[k]
		if len(row) != ncat+1 {
			return nil, fmt.Errorf("sizes row %d has %d values, not %d (0, then one per category)", k, len(row), ncat+1)
		}
		var grow [][2]uint64 // (category, bytes) allocated after the frees
		for c := 0; c < ncat; c++ {
			v, err := parseInt(row[c+1])
			if err != nil {
				return nil, fmt.Errorf("sizes row %d: %q is not an integer", k, string(row[c+1]))
			}
			if v < 0 || v > 1<<62 {
				return nil, fmt.Errorf("sizes row %d: %d bytes of %s", k, v, timelineCategories[c])
			}
			delta := v - prev[c]
			prev[c] = v
			extra := b.category(timelineCategories[c])
			st := b.categoryStack(c)
			if delta > 0 {
				grow = append(grow, [2]uint64{uint64(c), uint64(delta)})
				continue
			}
			for need := uint64(-delta); need > 0; {
				ls := liveBy[c]
				if len(ls) == 0 {
					// Totals start at their first row's values, so a fall
					// always has allocations under it; keep going on bad input.
					l.free(0, need, t, st, extra)
					break
				}
				top := ls[len(ls)-1]
				liveBy[c] = ls[:len(ls)-1]
				l.free(0, top, t, st, extra)
				if top > need {
					grow = append(grow, [2]uint64{uint64(c), top - need})
					need = 0
				} else {
					need -= top
				}
			}
		}
		for _, g := range grow {
			c := int(g[0])
			liveBy[c] = append(liveBy[c], g[1])
			l.alloc(0, g[1], t, b.categoryStack(c), b.category(timelineCategories[c]))
		}
	}
	s := b.finish([]string{"exported device"})
	s.Profiler.Notes = append(s.Profiler.Notes,
		"per-category totals only: export_memory_timeline's JSON form records each category's bytes per timestamp, not tensors; its allocations are the totals' rises (export with a .raw.json.gz path for tensors)",
		"no allocator segments, addresses or stacks; the segment, state and pool views need a memory snapshot",
		"the file does not record its device (export_memory_timeline's device argument); it is shown as one device")
	return s, nil
}

func bytesReader(b []byte) io.Reader { return &sliceReader{b: b} }

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// isTimelineHead says whether JSON input starts like a memory timeline
// export: a list whose first element is a list of numbers (a snapshot
// that is a list holds dicts).
func isTimelineHead(head []byte) bool {
	i := 0
	skip := func() {
		for i < len(head) && (head[i] == ' ' || head[i] == '\t' || head[i] == '\r' || head[i] == '\n') {
			i++
		}
	}
	skip()
	if i >= len(head) || head[i] != '[' {
		return false
	}
	i++
	skip()
	if i >= len(head) || head[i] != '[' {
		return false
	}
	i++
	skip()
	return i < len(head) && (head[i] == '-' || head[i] >= '0' && head[i] <= '9' || head[i] == ']')
}
