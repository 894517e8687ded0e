package analysis

import (
	"fmt"
	"sort"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/rules"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// The verdicts of an OOM answer.
const (
	VerdictShortage      = "shortage"
	VerdictFragmentation = "fragmentation"
	VerdictOutside       = "outside_allocator"
	VerdictNoOOM         = "no_oom"
	// VerdictNoTrace: the snapshot holds a state but no history; if it
	// was dumped at an OOM (an observer's dump with history off), the
	// state is the OOM's moment, but the failed request is not recorded.
	VerdictNoTrace = "request_unknown"
)

// OOM is the answer for one out-of-memory of a trace (or, with verdict
// no_oom, for the peak of a trace without one).
type OOM struct {
	Verdict string `json:"verdict"`
	// Arithmetic shows how the verdict follows from the figures, one line
	// per step.
	Arithmetic []string `json:"arithmetic"`
	At         At       `json:"at"`
	// RequestedBytes is the failed request as the allocator rounded it
	// (the oom entry's size); SegmentBytes what a new cudaMalloc for it
	// would have needed.
	RequestedBytes uint64 `json:"requested_bytes"`
	SegmentBytes   uint64 `json:"segment_bytes"`
	// DeviceFreeBytes is what cudaMemGetInfo reported free at the OOM.
	DeviceFreeBytes uint64 `json:"device_free_bytes"`
	ReservedBytes   uint64 `json:"reserved_bytes"`
	AllocatedBytes  uint64 `json:"allocated_bytes"`
	// ReservedUnallocatedBytes = ReservedBytes − AllocatedBytes.
	ReservedUnallocatedBytes uint64 `json:"reserved_unallocated_bytes"`
	// LargestFreeBlockBytes is the largest free cached block of the
	// request's stream and pool (small ≤ 1 MiB, large otherwise).
	LargestFreeBlockBytes uint64 `json:"largest_free_block_bytes"`
	Stream                int64  `json:"stream"`
	Pool                  string `json:"pool"`
	// CapacityBytes is the device's memory when known (--capacity,
	// --gpu); OutsideAllocatorBytes = capacity − reserved − CUDA free:
	// the CUDA context, NCCL, cuBLAS workspaces and other processes.
	CapacityBytes         *uint64 `json:"capacity_bytes"`
	OutsideAllocatorBytes *uint64 `json:"outside_allocator_bytes"`
	// ShortBytes is how much more free memory the request needed
	// (0 for fragmentation: the total was enough).
	ShortBytes    uint64            `json:"short_bytes"`
	Categories    map[string]uint64 `json:"categories"`
	Sites         []Site            `json:"sites"`
	Fragmentation Fragmentation     `json:"fragmentation"`
	// Settings are the allocator settings replayed at the capacity the
	// OOM implies (ReservedBytes + DeviceFreeBytes) and whether each
	// avoids it.
	Settings []SettingOutcome `json:"settings"`
	// BatchWhatIf is the trace replayed with its batch-dependent
	// allocations scaled by each of BatchScales, under the recorded
	// settings at the capacity the OOM implies (empty without replays);
	// BatchWhatIfReproduced says whether the same replay at scale 1
	// fails as the run did (else the what-ifs prove nothing).
	BatchWhatIf           []BatchOutcome `json:"batch_whatif"`
	BatchWhatIfReproduced bool           `json:"batch_whatif_reproduced"`
	Suggestions           []Suggestion   `json:"suggestions"`
	// AtDump says that the trace does not record this OOM: it is the one
	// OOMOptions.AtDump describes, at the moment of the dump.
	AtDump bool `json:"at_dump,omitempty"`
}

// SettingOutcome is one allocator setting replayed through internal/alloc.
type SettingOutcome struct {
	Config         string `json:"config"`
	CapacityBytes  uint64 `json:"capacity_bytes"`
	AvoidsOOM      bool   `json:"avoids_oom"`
	PeakReserved   uint64 `json:"peak_reserved_bytes"`
	FirstOOMEvent  int    `json:"first_oom_event"` // -1: the replay never runs out
	ReplayDeclined string `json:"replay_error,omitempty"`
}

// Suggestion is one thing to try, with the amount it needs or frees.
type Suggestion struct {
	// Kind is smaller_batch, activation_checkpointing, free_site,
	// allocator_setting, free_outside_memory or none_avoids.
	Kind  string `json:"kind"`
	Text  string `json:"text"`
	Bytes uint64 `json:"bytes"`
}

// OOMAnswer is `gpumem oom` for one device: the first OOM's fields at the
// top level, every OOM in OOMs.
type OOMAnswer struct {
	File   string `json:"file"`
	Device int    `json:"device"`
	OOM
	OOMs []OOM `json:"ooms"`
	// Headroom is set for no_oom: how far the peak was from the capacity.
	Headroom *Headroom `json:"headroom"`
	// FreeBlocks, for a snapshot without a trace (request_unknown, or
	// --request given), is the largest free cached block of each stream
	// and pool at the dump: a request fits without a new cudaMalloc only
	// when it is at most its pool's.
	FreeBlocks []PoolFree `json:"largest_free_blocks,omitempty"`
}

// PoolFree is the largest free cached block of one stream and pool.
type PoolFree struct {
	Stream int64  `json:"stream"`
	Pool   string `json:"pool"` // small (≤ 1 MiB requests) or large
	// Private is a private pool's id ("" for the default pools).
	Private          string `json:"private_pool,omitempty"`
	LargestFreeBytes uint64 `json:"largest_free_block_bytes"`
	FreeBytes        uint64 `json:"free_bytes"`
}

// Headroom is the margin of a run without OOM.
type Headroom struct {
	PeakAllocatedBytes uint64  `json:"peak_allocated_bytes"`
	PeakReservedBytes  uint64  `json:"peak_reserved_bytes"`
	CapacityBytes      *uint64 `json:"capacity_bytes"`
	// HeadroomBytes = capacity − peak reserved (null without capacity).
	HeadroomBytes *int64 `json:"headroom_bytes"`
}

// OOMOptions tune OOMAnswer.
type OOMOptions struct {
	// Capacity is the device's total memory, 0 when unknown.
	Capacity uint64
	Depth    int // user frames per site (default DefaultDepth)
	Top      int // sites listed (0: all)
	// NoReplay skips the allocator-settings replays.
	NoReplay bool
	// AtDump, for a trace without an oom entry, answers for an OOM at the
	// moment of the dump.
	AtDump *DumpOOM
	// LargeSegmentSize is large_segment_size_mb in bytes, the segment a
	// 1..10 MiB request gets (0: PyTorch's default, rules.LargeBuffer).
	LargeSegmentSize uint64
}

func (o OOMOptions) largeSegment() uint64 {
	if o.LargeSegmentSize == 0 {
		return rules.LargeBuffer
	}
	return o.LargeSegmentSize
}

// hasHistory says whether the device's trace records any allocator
// activity (a dump with history off has none, or only its snapshot
// entry).
func hasHistory(ev []snapshot.Event) bool {
	for i := range ev {
		if ev[i].Action != snapshot.ActionSnapshot {
			return true
		}
	}
	return false
}

// poolFree lists the largest free block and the free bytes of each stream
// and pool of a state.
func (d *Device) poolFree(free []freeRange) []PoolFree {
	type key struct {
		stream snapshot.StreamID
		small  bool
		pool   [2]int64
	}
	idx := map[key]int{}
	var out []PoolFree
	for _, f := range free {
		k := key{f.stream, f.small, f.pool}
		if snapshot.IsPrivatePool(f.pool) == false {
			k.pool = [2]int64{}
		}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			pf := PoolFree{Stream: d.S.RawStream(f.stream), Pool: "large"}
			if f.small {
				pf.Pool = "small"
			}
			if snapshot.IsPrivatePool(f.pool) {
				pf.Private = fmt.Sprintf("(%d, %d)", f.pool[0], f.pool[1])
			}
			out = append(out, pf)
		}
		out[i].LargestFreeBytes = max(out[i].LargestFreeBytes, f.size)
		out[i].FreeBytes += f.size
	}
	sort.Slice(out, func(a, b int) bool {
		x, y := out[a], out[b]
		if x.Stream != y.Stream {
			return x.Stream < y.Stream
		}
		if x.Private != y.Private {
			return x.Private < y.Private
		}
		return x.Pool > y.Pool // small first
	})
	return out
}

// noTraceAnswer is the answer for a snapshot without history: the state
// at the dump as the OOM's moment, the request unknown.
func (d *Device) noTraceAnswer(o OOMOptions) (*OOMAnswer, error) {
	m, err := d.Resolve("end")
	if err != nil {
		return nil, err
	}
	live := d.LiveAnswer(m, LiveOptions{Depth: o.Depth, Top: o.Top})
	frag, free := fragmentationOf(d.StateAt(m))
	ans := &OOMAnswer{Device: d.Index}
	ans.OOM = OOM{Verdict: VerdictNoTrace, At: live.At, Categories: live.Categories, Sites: live.Sites, Fragmentation: frag,
		ReservedBytes: frag.Reserved, AllocatedBytes: frag.Allocated, ReservedUnallocatedBytes: frag.ReservedUnallocated,
		LargestFreeBlockBytes: frag.LargestFreeBlock, Pool: "large",
		Settings: []SettingOutcome{}, Suggestions: []Suggestion{}, BatchWhatIf: []BatchOutcome{}}
	ans.FreeBlocks = d.poolFree(free)
	a := []string{
		"the snapshot has no trace (history was off): if it was dumped at an out-of-memory, this state is that moment, but the request that failed is not recorded",
		fmt.Sprintf("reserved %s, allocated %s: cached free C = %s", sz(frag.Reserved), sz(frag.Allocated), sz(frag.ReservedUnallocated)),
	}
	for _, pf := range ans.FreeBlocks {
		where := fmt.Sprintf("stream %d's %s pool", pf.Stream, pf.Pool)
		if pf.Private != "" {
			where = fmt.Sprintf("stream %d's private pool %s (%s blocks)", pf.Stream, pf.Private, pf.Pool)
		}
		a = append(a, fmt.Sprintf("%s: largest free block %s of %s free", where, sz(pf.LargestFreeBytes), units.Human(pf.FreeBytes)))
	}
	a = append(a, "a request R of a stream's pool fits without a new cudaMalloc only when R <= that pool's largest free block; else it needs a new segment (2 MiB for R <= 1 MiB, 20 MiB for R < 10 MiB, else R rounded up to 2 MiB) from CUDA's free memory",
		`give the request from the error message ("Tried to allocate …") with --request SIZE, and "… of which … is free" with --device-free SIZE, for the verdict`)
	ans.Arithmetic = a
	ans.OOMs = []OOM{}
	if o.Capacity > 0 {
		c := o.Capacity
		ans.CapacityBytes = &c
	}
	return ans, nil
}

// DumpOOM is an out-of-memory that the trace does not record, at the
// moment of the dump: a snapshot dumped by an OOM observer whose trace
// never had the oom entry (recorded without a trace) or lost it (PyTorch
// 2.0 kept one trace entry by default, and the dump's own entry took its
// place). The figures come from the observer's arguments or the error
// message ("Tried to allocate …", "… of which … is free").
type DumpOOM struct {
	RequestedBytes  uint64
	DeviceFreeBytes uint64
	// DeviceFreeUnknown: CUDA's free memory was not given; it is taken as
	// capacity − reserved (nothing outside the allocator) when the
	// capacity is known, else 0, and the arithmetic says so.
	DeviceFreeUnknown bool
	// Stream is the request's stream as PyTorch numbers it (0: the
	// default stream).
	Stream int64
}

// OOMAnswer answers `gpumem oom` for the device.
func (d *Device) OOMAnswer(o OOMOptions) (*OOMAnswer, error) {
	ev := d.Events()
	ans := &OOMAnswer{Device: d.Index}
	ooms := eventsOf(ev, snapshot.ActionOOM)
	if o.AtDump != nil {
		if len(ooms) > 0 {
			return nil, fmt.Errorf("the trace records %d out-of-memory event(s): they are answered without --at-dump, which is for a trace with none", len(ooms))
		}
		m, err := d.Resolve("end")
		if err != nil {
			return nil, err
		}
		a := o.AtDump
		free, note := a.DeviceFreeBytes, "request and CUDA free as given"
		if a.DeviceFreeUnknown {
			reserved := d.StateAt(m).Reserved
			switch {
			case o.Capacity > reserved:
				free = o.Capacity - reserved
				note = fmt.Sprintf("request as given; CUDA free not given: taken as capacity − reserved = %s, as if nothing outside the allocator held memory", sz(free))
			default:
				free = 0
				note = "request as given; CUDA free not given (--device-free, \"… of which … is free\"): taken as 0, so a verdict of shortage may be fragmentation"
			}
		}
		r, live := d.oomAnswerAt(m, a.RequestedBytes, free, a.Stream, o)
		r.AtDump = true
		// The settings replays need the failed request in the trace.
		r.Arithmetic = append([]string{"the trace records no out-of-memory: this is the one given, at the dump (" + note + ")"}, r.Arithmetic...)
		r.suggest(live)
		ans.OOM, ans.OOMs = *r, []OOM{*r}
		if !hasHistory(ev) {
			_, free := fragmentationOf(d.StateAt(m))
			ans.FreeBlocks = d.poolFree(free)
		}
		return ans, nil
	}
	if len(ooms) == 0 && !hasHistory(ev) && len(d.segs) > 0 {
		return d.noTraceAnswer(o)
	}
	if len(ooms) == 0 {
		m, err := d.Resolve("peak")
		if err != nil {
			return nil, err
		}
		live := d.LiveAnswer(m, LiveOptions{Depth: o.Depth, Top: o.Top})
		h := &Headroom{PeakAllocatedBytes: d.Active.PeakBytes, PeakReservedBytes: d.Segments.PeakBytes}
		ans.OOM = OOM{Verdict: VerdictNoOOM, At: live.At, Categories: live.Categories, Sites: live.Sites,
			Fragmentation: live.Fragmentation, ReservedBytes: live.Fragmentation.Reserved,
			AllocatedBytes: live.Fragmentation.Allocated, ReservedUnallocatedBytes: live.Fragmentation.ReservedUnallocated,
			LargestFreeBlockBytes: live.Fragmentation.LargestFreeBlock}
		ans.Arithmetic = []string{"the trace records no out-of-memory"}
		if o.Capacity > 0 {
			c := o.Capacity
			hb := int64(c) - int64(h.PeakReservedBytes)
			h.CapacityBytes, h.HeadroomBytes = &c, &hb
			ans.CapacityBytes = &c
			ans.Arithmetic = append(ans.Arithmetic, fmt.Sprintf("headroom = capacity %s − peak reserved %s = %s",
				sz(c), sz(h.PeakReservedBytes), units.HumanSigned(hb)))
			if hb < 0 {
				ans.Arithmetic = append(ans.Arithmetic, "the run itself reserved more than this capacity, so it could not have run on such a device: check --capacity / --gpu")
			}
		} else {
			ans.Arithmetic = append(ans.Arithmetic, fmt.Sprintf("peak reserved %s, peak active %s; give --capacity or --gpu for the headroom",
				sz(h.PeakReservedBytes), sz(h.PeakAllocatedBytes)))
		}
		ans.Headroom = h
		ans.OOMs = []OOM{}
		ans.Settings, ans.Suggestions, ans.BatchWhatIf = []SettingOutcome{}, []Suggestion{}, []BatchOutcome{}
		return ans, nil
	}
	for _, e := range ooms {
		one, err := d.oomAt(e, o)
		if err != nil {
			return nil, err
		}
		ans.OOMs = append(ans.OOMs, *one)
	}
	ans.OOM = ans.OOMs[0]
	return ans, nil
}

// scalesText lists the scales of outs: "0.75×, 0.5×, 0.25×".
func scalesText(outs []BatchOutcome) string {
	t := ""
	for k, b := range outs {
		if k > 0 {
			t += ", "
		}
		t += fmt.Sprintf("%g×", b.Scale)
	}
	return t
}

// sz prints a size for arithmetic lines: "1.5 GiB (1610612736 B)".
func sz(n uint64) string {
	return fmt.Sprintf("%s (%d B)", units.Human(n), n)
}

func (d *Device) oomAt(raw int, o OOMOptions) (*OOM, error) {
	e := &d.Events()[raw]
	m, err := d.Resolve(fmt.Sprintf("e%d", raw))
	if err != nil {
		return nil, err
	}
	// The oom entry's size is the rounded request, its device_free (read
	// into Addr) what cudaMemGetInfo reported.
	r, live := d.oomAnswerAt(m, e.Size, e.Addr, d.S.RawStream(e.Stream), o)
	if !o.NoReplay {
		r.replaySettings(d, raw)
		r.replayBatch(d)
	}
	r.suggest(live)
	return r, nil
}

// oomAnswerAt is the answer for a request of the given size on the given
// stream failing at moment m with deviceFree bytes free on the device,
// but for the settings replays and the suggestions (which use them), and
// what was live then.
func (d *Device) oomAnswerAt(m Moment, request, deviceFree uint64, stream int64, o OOMOptions) (*OOM, *Live) {
	live := d.LiveAnswer(m, LiveOptions{Depth: o.Depth, Top: o.Top})
	frag, free := fragmentationOf(d.StateAt(m))
	r := &OOM{
		At: live.At, RequestedBytes: request, SegmentBytes: rules.AllocationSize(request, o.largeSegment()), DeviceFreeBytes: deviceFree,
		ReservedBytes: frag.Reserved, AllocatedBytes: frag.Allocated, ReservedUnallocatedBytes: frag.ReservedUnallocated,
		Stream: stream, Pool: "large",
		Categories: live.Categories, Sites: live.Sites, Fragmentation: frag,
	}
	small := rules.SmallPool(request)
	if small {
		r.Pool = "small"
	}
	for _, f := range free {
		if d.S.RawStream(f.stream) == stream && f.small == small && !snapshot.IsPrivatePool(f.pool) {
			r.LargestFreeBlockBytes = max(r.LargestFreeBlockBytes, f.size)
		}
	}
	if o.Capacity > 0 {
		c := o.Capacity
		r.CapacityBytes = &c
		var x uint64
		if c > r.ReservedBytes+r.DeviceFreeBytes {
			x = c - r.ReservedBytes - r.DeviceFreeBytes
		}
		r.OutsideAllocatorBytes = &x
	}
	r.verdict()
	if r.CapacityBytes != nil && *r.CapacityBytes < r.ReservedBytes+r.DeviceFreeBytes {
		r.Arithmetic = append(r.Arithmetic, fmt.Sprintf("the given capacity %s is below reserved + CUDA free = %s, which the run itself had: check --capacity / --gpu (memory outside the allocator is taken as 0)",
			sz(*r.CapacityBytes), sz(r.ReservedBytes+r.DeviceFreeBytes)))
	}
	r.Settings = []SettingOutcome{}
	r.BatchWhatIf = []BatchOutcome{}
	return r, live
}

// verdict decides and explains: with R the request, C the free cached
// bytes (reserved − allocated), F CUDA's free memory and X the memory
// outside the allocator (known capacity only): R > C + F is a shortage,
// or outside_allocator when R <= C + F + X; otherwise no free block or
// device range was big enough: fragmentation.
func (r *OOM) verdict() {
	R, C, F := r.RequestedBytes, r.ReservedUnallocatedBytes, r.DeviceFreeBytes
	r.Arithmetic = append(r.Arithmetic, fmt.Sprintf("request R = %s; cached free C = reserved %s − allocated %s = %s; CUDA free F = %s",
		sz(R), sz(r.ReservedBytes), sz(r.AllocatedBytes), sz(C), sz(F)))
	if R <= C+F {
		r.Verdict = VerdictFragmentation
		r.Arithmetic = append(r.Arithmetic,
			fmt.Sprintf("R <= C + F = %s: the total would have held it", sz(C+F)),
			fmt.Sprintf("but the largest free block of stream %d's %s pool is %s < R, and F < %s, the segment a new cudaMalloc needs",
				r.Stream, r.Pool, sz(r.LargestFreeBlockBytes), sz(r.SegmentBytes)))
		if r.LargestFreeBlockBytes >= R || F >= r.SegmentBytes {
			r.Arithmetic[len(r.Arithmetic)-1] = fmt.Sprintf("largest free block of stream %d's %s pool %s, F %s: by these figures a block or range was big enough; the request was likely limited by a memory fraction or another pool",
				r.Stream, r.Pool, sz(r.LargestFreeBlockBytes), sz(F))
		}
		return
	}
	r.ShortBytes = R - (C + F)
	r.Arithmetic = append(r.Arithmetic, fmt.Sprintf("R > C + F = %s: short by %s", sz(C+F), sz(r.ShortBytes)))
	if r.OutsideAllocatorBytes != nil {
		x := *r.OutsideAllocatorBytes
		line := fmt.Sprintf("outside the allocator X = capacity %s − reserved %s − F = %s", sz(*r.CapacityBytes), sz(r.ReservedBytes), sz(x))
		if R <= C+F+x {
			r.Verdict = VerdictOutside
			r.Arithmetic = append(r.Arithmetic, line, fmt.Sprintf("R <= C + F + X = %s: the memory held outside PyTorch's allocator made the difference", sz(C+F+x)))
			return
		}
		r.Arithmetic = append(r.Arithmetic, line, fmt.Sprintf("R > C + F + X = %s: even that would not have been enough", sz(C+F+x)))
	}
	r.Verdict = VerdictShortage
}

// replaySettings replays the trace through internal/alloc at the capacity
// the OOM implies under each sweep setting.
func (r *OOM) replaySettings(d *Device, raw int) {
	capacity := r.ReservedBytes + r.DeviceFreeBytes
	configs := append([]string{"recorded"}, alloc.SweepConfigs...)
	outs, err := alloc.WhatIfOOM(d.S, d.Index, capacity, raw, configs, false)
	if err != nil {
		r.Settings = []SettingOutcome{{Config: "all", CapacityBytes: capacity, FirstOOMEvent: -1, ReplayDeclined: err.Error()}}
		return
	}
	for _, o := range outs {
		so := SettingOutcome{Config: o.Config, CapacityBytes: capacity, AvoidsOOM: !o.StillOOM, FirstOOMEvent: o.FirstOOM}
		if o.Result != nil {
			so.PeakReserved = o.Result.PeakReserved
		}
		r.Settings = append(r.Settings, so)
	}
}

// replayBatch replays the trace at each of BatchScales (and at scale 1,
// the control) under the recorded settings at the capacity the OOM
// implies.
func (r *OOM) replayBatch(d *Device) {
	if !d.scalesWithBatch() {
		return // nothing to scale: every replay would be the recorded run
	}
	capacity := r.ReservedBytes + r.DeviceFreeBytes
	outs, err := d.BatchWhatIf(append([]float64{1}, BatchScales...), capacity)
	if err != nil {
		return
	}
	r.BatchWhatIfReproduced = !outs[0].AvoidsOOM && outs[0].RecordedOOM
	r.BatchWhatIf = outs[1:]
}

// suggest lists what would avoid the OOM, with amounts: what a replay
// shows, or the arithmetic.
func (r *OOM) suggest(live *Live) {
	r.Suggestions = []Suggestion{}
	need := r.ShortBytes
	act := live.Categories[Activation.String()]
	if r.OutsideAllocatorBytes != nil && r.Verdict == VerdictOutside {
		r.Suggestions = append(r.Suggestions, Suggestion{Kind: "free_outside_memory", Bytes: need,
			Text: fmt.Sprintf("free at least %s of the %s held outside PyTorch's allocator (other processes, NCCL buffers, cuBLAS/cuDNN workspaces)", units.Human(need), units.Human(*r.OutsideAllocatorBytes))})
	}
	switch {
	case len(r.BatchWhatIf) > 0 && !r.BatchWhatIfReproduced:
		r.Suggestions = append(r.Suggestions, Suggestion{Kind: "none_avoids", Bytes: r.ReservedBytes + r.DeviceFreeBytes,
			Text: "the allocator model, started empty, does not reproduce this OOM at the recorded batch, so no batch size is suggested"})
	case len(r.BatchWhatIf) > 0:
		best := -1
		for k, b := range r.BatchWhatIf {
			if b.AvoidsOOM && (best < 0 || b.Scale > r.BatchWhatIf[best].Scale) {
				best = k
			}
		}
		capacity := r.ReservedBytes + r.DeviceFreeBytes
		if best >= 0 {
			b := r.BatchWhatIf[best]
			r.Suggestions = append(r.Suggestions, Suggestion{Kind: "smaller_batch", Bytes: b.PeakReservedBytes,
				Text: fmt.Sprintf("a batch %g× the recorded one gets past this OOM in a replay at %s (peak reserved %s; the trace ends at the OOM, so later steps are not replayed)",
					b.Scale, units.Human(capacity), units.Human(b.PeakReservedBytes))})
		} else {
			r.Suggestions = append(r.Suggestions, Suggestion{Kind: "smaller_batch", Bytes: 0,
				Text: fmt.Sprintf("no batch scale replayed (%s) avoids this OOM at %s: what does not scale with the batch is short too", scalesText(r.BatchWhatIf), units.Human(capacity))})
		}
	case need > 0 && live.batchBytes > 0 && live.batchBytes >= need:
		r.Suggestions = append(r.Suggestions, Suggestion{Kind: "smaller_batch", Bytes: need,
			Text: fmt.Sprintf("the allocations that scale with the batch hold %s at the OOM: a batch that shrinks them by at least %s (%.0f%%) is needed (arithmetic, not replayed)",
				units.Human(live.batchBytes), units.Human(need), 100*float64(need)/float64(live.batchBytes))})
	case need > 0 && live.batchBytes > 0:
		r.Suggestions = append(r.Suggestions, Suggestion{Kind: "smaller_batch", Bytes: need,
			Text: fmt.Sprintf("the allocations that scale with the batch hold %s at the OOM, less than the %s needed: a smaller batch alone does not avoid it (arithmetic)",
				units.Human(live.batchBytes), units.Human(need))})
	}
	if need > 0 && act >= need {
		r.Suggestions = append(r.Suggestions, Suggestion{Kind: "activation_checkpointing", Bytes: act,
			Text: fmt.Sprintf("activation checkpointing frees up to %s of activations (%s needed)", units.Human(act), units.Human(need))})
	}
	if need > 0 {
		for _, st := range live.Sites {
			if st.Category == Parameter.String() || st.Bytes < need {
				continue
			}
			where := "allocations without a stack"
			if len(st.Frames) > 0 {
				where = SiteString(st.Frames[:1])
			}
			r.Suggestions = append(r.Suggestions, Suggestion{Kind: "free_site", Bytes: st.Bytes,
				Text: fmt.Sprintf("free or shrink %s (%s, %d allocations, %s live) before this point", where, st.Category, st.Count, units.Human(st.Bytes))})
			break
		}
	}
	if len(r.Settings) == 0 && r.Verdict == VerdictFragmentation {
		r.Suggestions = append(r.Suggestions, Suggestion{Kind: "none_avoids", Bytes: r.RequestedBytes,
			Text: "allocator settings were not replayed (--no-replay); without that gpumem does not guess which would help"})
	}
	if len(r.Settings) > 0 && r.Settings[0].Config == "recorded" && r.Settings[0].AvoidsOOM {
		// The model serves the request with the run's own settings: it
		// disagrees with the recording, so its what-ifs prove nothing.
		r.Suggestions = append(r.Suggestions, Suggestion{Kind: "none_avoids", Bytes: r.Settings[0].CapacityBytes,
			Text: "the allocator model does not reproduce this OOM with the run's own settings, so no setting is suggested"})
		return
	}
	var avoid []string
	for _, s := range r.Settings {
		if s.AvoidsOOM && s.Config != "recorded" {
			avoid = append(avoid, s.Config)
			r.Suggestions = append(r.Suggestions, Suggestion{Kind: "allocator_setting", Bytes: s.CapacityBytes,
				Text: fmt.Sprintf("PYTORCH_CUDA_ALLOC_CONF=%s avoids this OOM in a replay at %s (peak reserved %s)", s.Config, units.Human(s.CapacityBytes), units.Human(s.PeakReserved))})
		}
	}
	if len(r.Settings) > 0 && len(avoid) == 0 && r.Settings[0].ReplayDeclined == "" {
		r.Suggestions = append(r.Suggestions, Suggestion{Kind: "none_avoids", Bytes: r.Settings[0].CapacityBytes,
			Text: fmt.Sprintf("none of the %d allocator settings replayed at %s avoids this OOM", len(r.Settings)-1, units.Human(r.Settings[0].CapacityBytes))})
	}
}
