package alloc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/snapshot"
)

// The answer of gpumem sim on a snapshot (and of the viewer's /api/sim):
// SimSnapshot replays each device under the options and returns a
// SimResult, which --json prints as it is and the text renderers
// (report.SimReplay, SimSweep, SimOOMWhatIf) draw from the replays it
// keeps.

// SimOptions is what gpumem sim FILE's flags ask.
type SimOptions struct {
	// Device replays only that device; -1 every device with alloc events.
	Device int
	// Config is the what-if setting; nil replays the recorded settings
	// (a validation).
	Config *Config
	// Capacity bounds the device (0 unlimited); CapacityOOM takes it from
	// the recorded OOM instead (ImpliedCapacity).
	Capacity    uint64
	CapacityOOM bool
	// Sweep compares SweepConfigs.
	Sweep bool
	// FromEmpty replays from an empty allocator; a sweep without
	// FromEmptySet chooses by itself (from empty when the trace starts
	// with segments already reserved).
	FromEmpty, FromEmptySet bool
	// Curve, when above 0, adds each replay's reserved bytes over the
	// trace, and the recorded ones, in at most that many buckets
	// (SimDevice.Curve; at most MaxCurve).
	Curve int
}

// MaxCurve is the most buckets a sim curve has.
const MaxCurve = 4096

// SimResult is the replay of a snapshot's devices.
type SimResult struct {
	File    string
	Devices []SimDevice
}

// MarshalJSON writes one device's answer beside the file name, several
// as a list.
func (r *SimResult) MarshalJSON() ([]byte, error) {
	if len(r.Devices) == 1 {
		return json.Marshal(struct {
			File string `json:"file"`
			SimDevice
		}{r.File, r.Devices[0]})
	}
	return json.Marshal(struct {
		File    string      `json:"file"`
		Devices []SimDevice `json:"devices"`
	}{r.File, r.Devices})
}

// NeedSegments fails, with what is missing and what to record instead,
// when s has no allocator segments (a torch.profiler output): a replay or
// a view of segments (what) would otherwise be empty.
func NeedSegments(s *snapshot.Snapshot, what string) error {
	if msg := s.Unavailable("segments"); msg != "" {
		return fmt.Errorf("%s: %s: %s", s.Source.Name, what, msg)
	}
	return nil
}

// SimSnapshot replays the devices of s (named name in messages and the
// result) under o.
func SimSnapshot(s *snapshot.Snapshot, name string, o SimOptions) (*SimResult, error) {
	// Replay validates against the recorded segments and addresses.
	if err := NeedSegments(s, "sim"); err != nil {
		return nil, err
	}
	devs := Replayable(s)
	if len(devs) == 0 {
		return nil, fmt.Errorf("%s: no device trace with alloc events to replay (record with torch.cuda.memory._record_memory_history())", name)
	}
	if o.Device >= 0 {
		if !slices.Contains(devs, o.Device) {
			parts := make([]string, len(devs))
			for i, d := range devs {
				parts[i] = strconv.Itoa(d)
			}
			return nil, fmt.Errorf("%s: device %d has no alloc events to replay (devices with alloc events: %s)", name, o.Device, strings.Join(parts, ", "))
		}
		devs = []int{o.Device}
	}
	r := &SimResult{File: name}
	for _, d := range devs {
		dj, err := simDevice(s, d, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		r.Devices = append(r.Devices, dj)
	}
	return r, nil
}

func simDevice(s *snapshot.Snapshot, d int, o SimOptions) (SimDevice, error) {
	start, err := StartOf(s, d)
	if err != nil {
		return SimDevice{}, err
	}
	devCap := o.Capacity
	var oomCap *OOMCapacity
	if o.CapacityOOM {
		c, err := ImpliedCapacity(s, d)
		if err != nil {
			return SimDevice{}, fmt.Errorf("--capacity oom: %w", err)
		}
		oomCap = &c
		devCap = c.Capacity
	}
	fromEmpty := o.FromEmpty
	if o.Sweep && !o.FromEmptySet {
		fromEmpty = start.Segments > 0
	}
	curve := min(max(o.Curve, 0), MaxCurve)
	var dj SimDevice
	switch {
	case o.Sweep:
		rows, err := Sweep(s, d, SweepOptions{Capacity: devCap, FromEmpty: fromEmpty, Curve: curve})
		if err != nil {
			return SimDevice{}, err
		}
		dj = newSimDevice(rows[0].Result, devCap)
		for _, row := range rows {
			r := row.Result
			dj.Sweep = append(dj.Sweep, SimSweepRow{row.Name, r.PeakReserved, r.PeakAllocated, row.DeltaReserved,
				r.UnallocatedAtPeak, r.CudaMallocs, r.CudaFrees, r.OOMs()})
		}
		dj.SweepRows = rows
		for _, row := range rows {
			dj.addCurve(row.Name, row.Result)
		}
	case oomCap != nil && o.Config == nil:
		configs := append([]string{"recorded"}, SweepConfigs...)
		res, err := whatIfOOM(s, d, oomCap.Capacity, oomCap.Event, configs, fromEmpty, curve)
		if err != nil {
			return SimDevice{}, err
		}
		dj = newSimDevice(res[0].Result, devCap)
		for _, o := range res {
			dj.OOMWhatIf = append(dj.OOMWhatIf, SimOOMWhatIf{Config: o.Config, StillOOM: o.StillOOM,
				FirstOOMEvent: o.FirstOOM, FirstOOMSize: o.FirstOOMSize, PeakReservedBytes: o.Result.PeakReserved})
		}
		dj.OOMOutcomes = res
		for _, o := range res {
			dj.addCurve(o.Config, o.Result)
		}
	default:
		r, err := Simulate(s, d, ReplayOptions{Config: o.Config, Capacity: devCap, FromEmpty: fromEmpty, Curve: curve})
		if err != nil {
			return SimDevice{}, err
		}
		dj = newSimDevice(r, devCap)
		dj.Replay = r
		dj.addCurve(dj.Config, r)
	}
	dj.FromEmpty = fromEmpty
	if oomCap != nil {
		dj.CapacityOOM = &SimCapacity{Event: oomCap.Event, ReservedBytes: oomCap.Reserved,
			DeviceFreeBytes: oomCap.DeviceFree, CapacityBytes: oomCap.Capacity}
		dj.OOMCapacity = oomCap
	}
	dj.Start = SimStart{Segments: start.Segments, ReservedBytes: start.Reserved, LiveBlocks: start.Blocks}
	dj.Capacity = devCap
	dj.WhatIf = o.Sweep || o.Config != nil || oomCap != nil || fromEmpty
	return dj, nil
}

// SimValidation is how exactly the replay under the recorded settings matched the trace.
type SimValidation struct {
	AllocAddressesMatched int  `json:"alloc_addresses_matched"`
	AllocAddressesTotal   int  `json:"alloc_addresses_total"`
	SegmentEventsMatched  int  `json:"segment_events_matched"`
	SegmentEventsTotal    int  `json:"segment_events_total"`
	ReleasesMatched       int  `json:"segment_releases_matched"`
	ReleasesTotal         int  `json:"segment_releases_total"`
	FinalStateMatches     bool `json:"final_state_matches"`
}

// SimOOM is an out-of-memory of a replay or of the recording.
type SimOOM struct {
	Event    int    `json:"event"`
	Size     uint64 `json:"size"`
	StillOOM *bool  `json:"still_oom,omitempty"`
	// AtStart: from empty, one of the blocks live at trace start did not fit.
	AtStart bool `json:"at_trace_start,omitempty"`
}

// SimPredicted is the replay's figures.
type SimPredicted struct {
	PeakReservedBytes  uint64   `json:"peak_reserved_bytes"`
	PeakAllocatedBytes uint64   `json:"peak_allocated_bytes"`
	CudaMallocs        int64    `json:"cuda_malloc_count"`
	CudaFrees          int64    `json:"cuda_free_count"`
	UnallocatedAtPeak  float64  `json:"unallocated_at_peak"`
	OOMs               []SimOOM `json:"ooms"`
}

// SimRecorded is the recording's figures.
type SimRecorded struct {
	PeakReservedBytes uint64   `json:"peak_reserved_bytes"`
	CudaMallocs       int      `json:"cuda_malloc_count"`
	CudaFrees         int      `json:"cuda_free_count"`
	OOMs              []SimOOM `json:"ooms"`
}

// SimDevice is one device's answer.
type SimDevice struct {
	Device     int            `json:"device"`
	Config     string         `json:"config"`
	Events     int            `json:"events"`
	Validation *SimValidation `json:"validation,omitempty"`
	Mismatches []string       `json:"mismatches,omitempty"`
	Predicted  SimPredicted   `json:"predicted"`
	Recorded   SimRecorded    `json:"recorded"`
	Sweep      []SimSweepRow  `json:"sweep,omitempty"`
	// Start is the allocator at trace start (segments made before recording).
	Start     SimStart `json:"trace_start"`
	FromEmpty bool     `json:"from_empty"`
	// CapacityOOM is the capacity --capacity oom took from the recorded OOM.
	CapacityOOM *SimCapacity   `json:"capacity_from_oom,omitempty"`
	OOMWhatIf   []SimOOMWhatIf `json:"oom_what_if,omitempty"`
	// Curve is the reserved bytes over the trace, recorded and replayed
	// (SimOptions.Curve).
	Curve *SimCurve `json:"curve,omitempty"`

	// What the text renderers read: the replays themselves (one of
	// SweepRows, OOMOutcomes, Replay is set, as the options chose), the
	// capacity the replays ran under, and whether this was a what-if.
	SweepRows   []SweepRow    `json:"-"`
	OOMOutcomes []OOMOutcome  `json:"-"`
	Replay      *ReplayResult `json:"-"`
	OOMCapacity *OOMCapacity  `json:"-"`
	Capacity    uint64        `json:"-"`
	WhatIf      bool          `json:"-"`
}

// SimCurve is the reserved bytes over the trace in buckets of events
// (ReplayCurve): the recording's and each replay's, in the order of the
// answer's rows (the sweep's, the OOM what-if's, or the one replay).
type SimCurve struct {
	FirstEvent  []int32          `json:"first_event"` // each bucket's first event
	RecordedMax []uint64         `json:"recorded_reserved_max"`
	Replayed    []SimCurveReplay `json:"replayed"`
}

// SimCurveReplay is one replay's curve.
type SimCurveReplay struct {
	Config      string   `json:"config"`
	ReservedMax []uint64 `json:"reserved_max"`
}

// addCurve adds replay r's curve, named config, when it kept one.
func (d *SimDevice) addCurve(config string, r *ReplayResult) {
	c := r.Curve
	if c == nil {
		return
	}
	if d.Curve == nil {
		d.Curve = &SimCurve{FirstEvent: c.Bounds[:len(c.Reserved)], RecordedMax: c.Recorded}
	}
	d.Curve.Replayed = append(d.Curve.Replayed, SimCurveReplay{config, c.Reserved})
}

// SimStart is the allocator at trace start (segments made before recording).
type SimStart struct {
	Segments      int    `json:"segments"`
	ReservedBytes uint64 `json:"reserved_bytes"`
	LiveBlocks    int    `json:"live_blocks"`
}

// SimCapacity is the capacity --capacity oom took from the recorded OOM.
type SimCapacity struct {
	Event           int    `json:"event"`
	ReservedBytes   uint64 `json:"reserved_bytes"`
	DeviceFreeBytes uint64 `json:"device_free_bytes"`
	CapacityBytes   uint64 `json:"capacity_bytes"`
}

// SimOOMWhatIf is whether the recorded OOM still happens under one setting.
type SimOOMWhatIf struct {
	Config            string `json:"config"`
	StillOOM          bool   `json:"still_oom"`
	FirstOOMEvent     int    `json:"first_oom_event"`
	FirstOOMSize      uint64 `json:"first_oom_size,omitempty"`
	PeakReservedBytes uint64 `json:"peak_reserved_bytes"`
}

// SimSweepRow is one setting of a sweep.
type SimSweepRow struct {
	Config             string  `json:"config"`
	PeakReservedBytes  uint64  `json:"peak_reserved_bytes"`
	PeakAllocatedBytes uint64  `json:"peak_allocated_bytes"`
	DeltaReservedBytes int64   `json:"delta_reserved_bytes"`
	UnallocatedAtPeak  float64 `json:"unallocated_at_peak"`
	CudaMallocs        int64   `json:"cuda_malloc_count"`
	CudaFrees          int64   `json:"cuda_free_count"`
	OOMs               int     `json:"ooms"`
}

func simOOMs(in []ReplayOOM, withStill bool) []SimOOM {
	out := []SimOOM{}
	for _, o := range in {
		j := SimOOM{Event: o.Event, Size: o.Size, AtStart: o.AtStart}
		if withStill {
			still := o.StillOOM
			j.StillOOM = &still
		}
		out = append(out, j)
	}
	return out
}

func newSimDevice(r *ReplayResult, capacity uint64) SimDevice {
	d := SimDevice{Device: r.Device, Config: r.Config.String(), Events: r.Events,
		Predicted: SimPredicted{
			PeakReservedBytes: r.PeakReserved, PeakAllocatedBytes: r.PeakAllocated,
			CudaMallocs: r.CudaMallocs, CudaFrees: r.CudaFrees, UnallocatedAtPeak: r.UnallocatedAtPeak,
			OOMs: simOOMs(r.ModelOOMs, false),
		},
		Recorded: SimRecorded{PeakReservedBytes: r.RecordedPeakReserved, CudaMallocs: r.RecordedCudaMallocs,
			CudaFrees: r.RecordedCudaFrees, OOMs: simOOMs(r.RecordedOOMs, !r.Validation && capacity > 0)},
	}
	if r.Validation {
		d.Validation = &SimValidation{r.AllocAddrsMatched, r.AllocAddrsTotal, r.SegEventsMatched, r.SegEventsTotal,
			r.ReleasesMatched, r.ReleasesTotal, r.FinalStateMatches}
		d.Mismatches = r.Mismatches
	}
	return d
}
