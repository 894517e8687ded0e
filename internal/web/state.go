package web

import (
	"sort"
	"strings"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/rules"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// stateHistory answers "what did the allocator hold after event i" with
// replay's checkpointed history.
type stateHistory struct {
	d *deviceData
	h *replay.History
}

// stateSource is what a state answer reads its event from: a History, or
// a Dump for the state at the end of the trace.
type stateSource interface {
	Len() int
	Event(i int) replay.EventInfo
	EventStack(i int, st *replay.State) string
}

// dumpState is the state at the end of the trace, the view's first: the
// dump itself, laid out from the snapshot's segments and blocks without
// the history (which took 0.1-0.7 s more to open the view on a 1 GB
// snapshot, racing its background build; bench/RESULTS-web.md, #32 part
// 32i). It is what the history gives for that index (corpus_test.go).
//
// Once it is laid out, the state history is started from it
// (startHistory).
func (d *deviceData) dumpState() (*stateJSON, error) {
	st, err := d.dump.get(func() *stateJSON {
		dp := d.dumpSource()
		idx := dp.Len() - 1
		return layoutJSON(dp, idx, dp.StateTop(maxStateSegments))
	}, "the state at the end of device %d's trace", d.device)
	if err == nil {
		d.startHistory()
	}
	return st, err
}

func (d *deviceData) stateHist() (*stateHistory, error) { return d.stateHistFor(true) }

// stateHistFor is stateHist; wanted says that a request waits for the
// history (every caller but warmState): its intake of the dump does not
// pause then, as the request may be the one being answered.
func (d *deviceData) stateHistFor(wanted bool) (*stateHistory, error) {
	if wanted {
		d.historyWanted.Add(1)
		defer d.historyWanted.Add(-1)
	}
	return d.history.get(func() *stateHistory {
		return &stateHistory{d: d, h: d.dumpSource().StartHistory(spawnLater, d.userBusy, d.pauseHistory)}
	},
		"building the state history of device %d", d.device)
}

// startHistory starts the state history in the background, if it is not
// yet, when the view opens: from the dump the open laid out, that is
// O(1), and its checkpoint build (at the lowest priority, paused while the
// user steps or zooms) then has the user's time in the view to reach
// where a jump far back goes, which waits for it.
func (d *deviceData) startHistory() {
	if d.history.done.Load() {
		return
	}
	go func() {
		defer func() { _ = recover() }() // a failure shows at the first step
		_, _ = d.stateHistFor(false)
	}()
}

// pauseHistory is the state history's pause while it takes in the dump's
// state, when it does (a dump whose segments share an address; otherwise
// the history starts from the dump's sorted state, which the view's open
// made: replay.Dump.StartHistory): it parks while the server answers a
// window or a state step, unless a request waits for the history.
func (d *deviceData) pauseHistory() {
	if d.userAnswered != nil {
		d.userAnswered(func() bool { return d.historyWanted.Load() > 0 })
	}
}

// stateJSON is the /api/state answer.
type stateJSON struct {
	Index       int       `json:"index"`
	Event       string    `json:"event"`
	Stack       string    `json:"stack"`
	Allocated   float64   `json:"allocated"` // sum of requested sizes of live blocks
	Reserved    float64   `json:"reserved"`  // sum of segment sizes
	BlockBytes  float64   `json:"blockBytes"`
	Rounding    float64   `json:"rounding"` // size - requested over live blocks
	FreeBytes   float64   `json:"free"`     // reserved - block bytes
	LargestFree float64   `json:"largestFree"`
	Frag        float64   `json:"fragmentation"` // rules.Fragmentation
	Segments    []segJSON `json:"segments"`
	Text        string    `json:"text"` // the totals line as memory_viz prints it
	// Omitted counts the smallest segments left out of Segments.
	Omitted int `json:"omitted,omitempty"`
}

// maxStateSegments bounds what one state answer draws.
const maxStateSegments = 20000

type segJSON struct {
	Addr    string      `json:"addr"`
	Size    float64     `json:"size"`
	Stream  int32       `json:"stream"`
	Pool    []int64     `json:"pool,omitempty"`
	Version int32       `json:"version"`
	Blocks  []blockJSON `json:"blocks"`
}

// dumpSource is the device's replay.Dump, which also gives the events'
// texts (the view's list) without the history.
func (d *deviceData) dumpSource() *replay.Dump {
	d.dumpSrcOnce.Do(func() { d.dumpSrc = replay.NewDump(d.snap, d.device) })
	return d.dumpSrc
}

// warmState prepares in the background, once per device and when the file
// is ready, what opening the Allocator State History needs: the state at
// the end of the trace (the view's first), then the history for the steps
// (whose checkpoints are then built in the background too). The server calls it when the page asks
// for a timeline's markers, which it does after its first paint.
func (f *file) warmState(device int) {
	d := f.device(device)
	d.warmed.Do(func() {
		go func() {
			<-f.ready
			if f.loadErr != nil {
				return
			}
			inBackground(soon, func() {
				defer func() { _ = recover() }() // a failure shows when the view is opened
				if _, err := d.dumpState(); err == nil {
					_, _ = d.stateHistFor(false)
				}
			})
		}()
	})
}

func (h *stateHistory) stateJSON(idx int) *stateJSON {
	if idx == h.h.Len()-1 {
		if st, err := h.d.dumpState(); err == nil {
			return st
		}
	}
	return h.build(idx)
}

// build lays out the state after event idx for the page, from the
// history.
func (h *stateHistory) build(idx int) *stateJSON {
	// Past maxStateSegments only the largest are sent (the totals cover
	// all).
	return layoutJSON(h.h, idx, h.h.StateTop(idx, maxStateSegments))
}

// layoutJSON lays out st, the state after event idx of src, for the page:
// segments by address (the page does memory_viz's packing).
func layoutJSON(src stateSource, idx int, st *replay.State) *stateJSON {
	out := &stateJSON{Index: idx, Segments: make([]segJSON, 0, len(st.Segments)), Omitted: st.Omitted}
	if idx >= 0 && idx < src.Len() {
		e := src.Event(idx)
		out.Event = e.Text
		out.Stack = strings.TrimPrefix(src.EventStack(idx, nil), e.Text+"\n")
	}
	order := make([]int, len(st.Segments))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return st.Segments[order[a]].Addr < st.Segments[order[b]].Addr })
	for _, si := range order {
		s := &st.Segments[si]
		sj := segJSON{Addr: replay.FormatAddr(true, s.Addr, s.Version), Size: float64(s.Size), Stream: int32(s.Stream),
			Version: s.Version, Blocks: make([]blockJSON, 0, s.NumBlocks)}
		if snapshot.IsPrivatePool(s.PoolID) {
			sj.Pool = []int64{s.PoolID[0], s.PoolID[1]}
		}
		for _, b := range st.Blocks[s.FirstBlock : s.FirstBlock+s.NumBlocks] {
			sj.Blocks = append(sj.Blocks, blockJSON{float64(b.Addr - s.Addr), float64(b.Size), float64(b.Requested), b.PendingFree, b.Version})
		}
		out.Segments = append(out.Segments, sj)
	}
	out.Allocated = float64(st.Allocated)
	out.Reserved = float64(st.Reserved)
	out.BlockBytes = float64(st.RealAllocated)
	out.Rounding = float64(st.RoundingWaste)
	out.FreeBytes = float64(st.FreeBytes)
	out.LargestFree = float64(st.LargestFree)
	out.Frag = rules.Fragmentation(st.LargestFree, st.FreeBytes)
	out.Text = "(" + units.Viz(st.Allocated) + " allocated / " + units.Viz(st.Reserved) + " reserved)"
	return out
}
