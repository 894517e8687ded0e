package alloc

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/gpumem/gpumem/snapshot"
)

// OOMCapacity is the device memory a recorded out-of-memory implies.
type OOMCapacity struct {
	// Event is the trace index of the device's first recorded OOM.
	Event int
	// Size is the request that failed (rounded, as the OOM entry has it).
	Size uint64
	// Reserved is what the trace shows reserved just before the OOM.
	Reserved uint64
	// DeviceFree is what cudaMemGetInfo reported free at the OOM (the
	// entry's address field).
	DeviceFree uint64
	// Capacity = Reserved + DeviceFree: the memory PyTorch could have
	// used; the CUDA context and other processes are already left out.
	Capacity uint64
}

// ImpliedCapacity finds the first recorded OOM of device dev and the
// capacity it implies. It fails when the device's trace has no OOM.
func ImpliedCapacity(s *snapshot.Snapshot, dev int) (OOMCapacity, error) {
	if dev < 0 || dev >= len(s.Traces) {
		return OOMCapacity{}, fmt.Errorf("device %d has no trace", dev)
	}
	ev := s.Traces[dev].Events
	oom := -1
	for i := range ev {
		if ev[i].Action == snapshot.ActionOOM {
			oom = i
			break
		}
	}
	if oom < 0 {
		return OOMCapacity{}, fmt.Errorf("device %d: the trace records no out-of-memory", dev)
	}
	start, err := StartOf(s, dev)
	if err != nil {
		return OOMCapacity{}, err
	}
	reserved := start.Reserved
	for _, e := range ev[:oom] {
		switch e.Action {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			reserved += e.Size
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			reserved -= min(reserved, e.Size)
		}
	}
	c := OOMCapacity{Event: oom, Size: ev[oom].Size, Reserved: reserved, DeviceFree: ev[oom].Addr}
	c.Capacity = c.Reserved + c.DeviceFree
	return c, nil
}

// OOMOutcome is one setting's answer to "would the recorded OOM still
// happen?".
type OOMOutcome struct {
	Config string // the setting as given
	// StillOOM: the request of the recorded OOM fails under this setting.
	StillOOM bool
	// FirstOOM is the trace index of the first request the model cannot
	// serve (an alloc, or the recorded OOM's request), -1 if none.
	FirstOOM     int
	FirstOOMSize uint64
	// OOMAtStart: from empty, the blocks live at trace start do not fit
	// (FirstOOM is then 0).
	OOMAtStart bool
	Result     *ReplayResult
}

// WhatIfOOM replays device dev of s on a device of capacity bytes under
// each of configs (PYTORCH_CUDA_ALLOC_CONF syntax; "" or "default" is
// PyTorch's default, "recorded" the snapshot's own allocator_settings) and
// tells for each whether the recorded OOM at trace index oomEvent still
// happens and where the model first runs out. Capacity usually comes from
// ImpliedCapacity. With fromEmpty the replay starts from an empty
// allocator (see ReplayOptions.FromEmpty). The settings run in parallel.
// `gpumem sim --capacity oom` and `gpumem oom` use it.
func WhatIfOOM(s *snapshot.Snapshot, dev int, capacity uint64, oomEvent int, configs []string, fromEmpty bool) ([]OOMOutcome, error) {
	return whatIfOOM(s, dev, capacity, oomEvent, configs, fromEmpty, 0)
}

// whatIfOOM is WhatIfOOM keeping each replay's reserved curve in at most
// curve buckets (ReplayOptions.Curve).
func whatIfOOM(s *snapshot.Snapshot, dev int, capacity uint64, oomEvent int, configs []string, fromEmpty bool, curve int) ([]OOMOutcome, error) {
	opts := make([]ReplayOptions, len(configs))
	for k, name := range configs {
		var cfg Config
		switch name {
		case "recorded":
			cfg = ConfigFromSettings(s.AllocatorSettings)
		case "", "default":
			cfg = DefaultConfig()
		default:
			c, err := ParseConfig(name)
			if err != nil {
				return nil, fmt.Errorf("config %q: %v", name, err)
			}
			cfg = c
		}
		opts[k] = ReplayOptions{Config: &cfg, Capacity: capacity, FromEmpty: fromEmpty, Curve: curve}
	}
	res, err := replayEach(s, dev, opts)
	if err != nil {
		return nil, err
	}
	out := make([]OOMOutcome, len(configs))
	for k, r := range res {
		o := OOMOutcome{Config: configs[k], FirstOOM: -1, Result: r}
		for _, ro := range r.RecordedOOMs {
			if ro.Event == oomEvent {
				o.StillOOM = ro.StillOOM
			}
			if ro.StillOOM && o.FirstOOM < 0 {
				o.FirstOOM, o.FirstOOMSize = ro.Event, ro.Size
			}
		}
		if m := r.ModelOOMs; len(m) > 0 && (o.FirstOOM < 0 || m[0].Event < o.FirstOOM) {
			o.FirstOOM, o.FirstOOMSize, o.OOMAtStart = m[0].Event, m[0].Size, m[0].AtStart
		}
		out[k] = o
	}
	return out, nil
}

// replayEach replays device dev of s once per options, on all cores,
// rebuilding the trace start once for all.
func replayEach(s *snapshot.Snapshot, dev int, opts []ReplayOptions) ([]*ReplayResult, error) {
	if len(opts) > 0 && opts[0].start == nil {
		start, err := rebuildStart(s, dev)
		if err != nil {
			return nil, err
		}
		for k := range opts {
			opts[k].start = start
		}
	}
	res := make([]*ReplayResult, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for k := range opts {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// A bug in one setting's replay is that setting's error, not
			// the end of the process (no caller can recover a panic on
			// this goroutine).
			defer func() {
				if p := recover(); p != nil {
					setting := "the recorded settings"
					if opts[k].Config != nil {
						setting = opts[k].Config.String()
					}
					errs[k] = fmt.Errorf("replay under %s: internal error: %v", setting, p)
				}
			}()
			if replayWorkerHook != nil {
				replayWorkerHook(k)
			}
			res[k], errs[k] = Simulate(s, dev, opts[k])
		}(k)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// replayWorkerHook, when set (by tests), runs in each replay worker of
// replayEach before it replays: a test makes it panic for one.
var replayWorkerHook func(k int)
