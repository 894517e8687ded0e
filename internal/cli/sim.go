package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/internal/units"
)

func init() {
	Register(&Command{
		Name:    "sim",
		Summary: "simulate PyTorch's caching allocator: scripts, snapshot replay, config what-ifs",
		Run:     runSim,
	})
}

const simAbout = `
Runs a faithful model of PyTorch's CUDA caching allocator.

  gpumem sim --script FILE [--config STR] [--capacity SIZE] [--json]
      Run a script (one command a line, # comments):
        alloc NAME SIZE [stream=N]     free NAME     empty_cache     set CONFIG
        free_requested NAME / free_completed NAME   (record_stream-style frees)
      SIZE is bytes or a number with B, KiB, MiB, GiB (KB, MB, GB = same),
      e.g. 4096, 3MiB or 1.5 GiB.

  gpumem sim FILE [--device N] [--json]
      Replay a snapshot's trace with its own allocator settings and report
      how exactly the model predicts it (a validation).

  gpumem sim FILE --config STR [--capacity SIZE] [--json]
      What-if: replay the recorded requests under other settings.

  gpumem sim FILE --sweep [--capacity SIZE] [--json]
      Compare common settings, best first by peak reserved memory.

  gpumem sim FILE --capacity oom [--config STR | --sweep] [--json]
      Take the capacity the recorded OOM implies (reserved + CUDA free at
      the OOM) and tell, for each setting, whether that OOM still happens.

  gpumem sim FILE --batch-scale S [--capacity SIZE|oom] [--json]
      Batch what-if: replay the trace with every allocation that scales
      with the batch (activations, temporaries and autograd buffers of the
      forward and backward passes, inputs: their categories' rules) scaled
      by S, under the recorded settings, from an empty allocator, at the
      capacity the recorded OOM implies (else --capacity, else unlimited);
      prints the new peaks and whether the recorded OOM still happens.

  --from-empty replays from an empty allocator: the blocks live at trace
  start are allocated first, in address order, under the setting. A sweep
  does so by default when the trace starts with segments already reserved
  (--from-empty=false keeps the recorded layout).

CONFIG uses PYTORCH_CUDA_ALLOC_CONF syntax, e.g.
"expandable_segments:True,max_split_size_mb:128".`

// simFlagSet makes sim's flag set and the flags it fills in.
func simFlagSet(env *Env) (*simFlags, *flag.FlagSet) {
	f := &simFlags{}
	fs := newFlagSet(env, "sim", "[--script FILE | FILE | --demo] [flags]", simAbout)
	fs.StringVar(&f.script, "script", "", "run a script `FILE` (- for stdin)")
	fs.StringVar(&f.config, "config", "", "allocator settings `STR` (PYTORCH_CUDA_ALLOC_CONF syntax)")
	fs.StringVar(&f.capacity, "capacity", "", "device memory `SIZE` (e.g. 80GiB), or oom for what the recorded OOM implies; default unlimited")
	fs.Float64Var(&f.fraction, "fraction", 0, "per-process memory `fraction` of --capacity (enables garbage_collection_threshold)")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	f.devicePtr = deviceFlag(fs, "replay only device")
	fs.BoolVar(&f.sweep, "sweep", false, "compare common settings on the snapshot")
	fs.BoolVar(&f.fromEmpty, "from-empty", false, "what-if from an empty allocator (blocks live at trace start allocated first)")
	fs.BoolVar(&f.demo, "demo", false, "use the embedded demo snapshot")
	fs.Float64Var(&f.batchScale, "batch-scale", 0, "replay with the allocations that scale with the batch multiplied by `S` (e.g. 0.5)")
	return f, fs
}

type simFlags struct {
	devicePtr *int
	demo      bool
	script    string
	config    string
	capacity  string
	fraction  float64
	json      bool
	device    int
	sweep     bool
	// fromEmpty is set by --from-empty; fromEmptySet tells whether the
	// flag was given at all (a sweep chooses by itself otherwise).
	fromEmpty     bool
	fromEmptySet  bool
	capacityOOM   bool    // --capacity oom
	capacityBytes uint64  // --capacity SIZE
	batchScale    float64 // --batch-scale S (simbatch.go)
}

// parseSimArgs parses sim's command line: the flags, with --capacity
// read into bytes, and the positional arguments.
func parseSimArgs(env *Env, args []string) (*simFlags, []string, error) {
	f, fs := simFlagSet(env)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, nil, err
	}
	fs.Visit(func(fl *flag.Flag) { f.fromEmptySet = f.fromEmptySet || fl.Name == "from-empty" })
	f.device = *f.devicePtr
	if f.capacity == "oom" {
		f.capacityOOM = true
	} else if f.capacity != "" {
		c, err := units.Parse(f.capacity)
		if err != nil {
			return nil, nil, usageError(fs, env.Stderr, "--capacity: "+err.Error())
		}
		f.capacityBytes = c
	}
	if f.fraction < 0 || f.fraction > 1 {
		return nil, nil, usageError(fs, env.Stderr, fmt.Sprintf("--fraction must be in [0, 1], got %g", f.fraction))
	}
	if f.fraction > 0 && f.capacity == "" {
		return nil, nil, usageError(fs, env.Stderr, "--fraction needs --capacity")
	}
	if _, err := simConfig(f.config); err != nil {
		return nil, nil, usageError(fs, env.Stderr, "--config: "+err.Error())
	}
	if err := f.checkBatchScale(); err != nil {
		return nil, nil, usageError(fs, env.Stderr, err.Error())
	}
	return f, pos, nil
}

func runSim(env *Env, args []string) error {
	f, pos, err := parseSimArgs(env, args)
	if err != nil {
		return err
	}
	capacity := f.capacityBytes
	switch {
	case f.script != "":
		if len(pos) > 0 || f.demo {
			return usageError(env.flags, env.Stderr, "give either --script FILE or a snapshot FILE, not both")
		}
		if f.capacityOOM {
			return errors.New("--capacity oom needs a snapshot with a recorded OOM, not a script")
		}
		return simScript(env, f, capacity)
	case len(pos)+boolInt(f.demo) == 1 && f.batchScale > 0:
		return simBatch(env, f, pos, capacity)
	case len(pos)+boolInt(f.demo) == 1:
		return simSnapshot(env, f, pos, capacity)
	default:
		return usageError(env.flags, env.Stderr, "need --script FILE or one snapshot FILE (or --demo)")
	}
}

func simConfig(s string) (alloc.Config, error) {
	if s == "" || s == "default" {
		return alloc.DefaultConfig(), nil
	}
	return alloc.ParseConfig(s)
}

// ---- scripts ----

type scriptStepJSON struct {
	Line        int              `json:"line"`
	Op          string           `json:"op"`
	Addr        string           `json:"addr,omitempty"`
	Error       string           `json:"error,omitempty"`
	NewSegment  bool             `json:"new_segment,omitempty"`
	SegmentSize uint64           `json:"segment_size,omitempty"`
	MappedBytes uint64           `json:"mapped_bytes,omitempty"`
	Pool        string           `json:"pool,omitempty"`
	Stats       map[string]int64 `json:"stats"`
}

func simScript(env *Env, f *simFlags, capacity uint64) error {
	var r io.Reader
	name := f.script
	if f.script == "-" {
		r = env.Stdin
	} else {
		fi, err := os.Stat(f.script)
		if err != nil {
			return prefixError(f.script, err) // "PATH: no such file", as every command
		}
		if fi.IsDir() {
			return fmt.Errorf("%s: is a directory, not a script", f.script)
		}
		fh, err := os.Open(f.script)
		if err != nil {
			return prefixError(f.script, err)
		}
		defer fh.Close()
		r = fh
	}
	cmds, err := alloc.ParseScript(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	cfg, err := simConfig(f.config)
	if err != nil {
		return err
	}
	steps, a, runErr := alloc.RunScript(cmds, cfg, alloc.Options{Capacity: capacity, MemoryFraction: f.fraction})
	if runErr != nil {
		runErr = fmt.Errorf("%s: %w", name, runErr)
	}
	if f.json {
		out := struct {
			Config string           `json:"config"`
			Steps  []scriptStepJSON `json:"steps"`
		}{Config: cfg.String(), Steps: []scriptStepJSON{}}
		for i := range steps {
			st := &steps[i]
			j := scriptStepJSON{Line: st.Line, Op: st.Op, Error: st.Error, NewSegment: st.NewSegment,
				SegmentSize: st.SegmentSize, MappedBytes: st.MappedBytes, Stats: st.Stats.Map()}
			if strings.HasPrefix(st.Op, "alloc") {
				if st.Addr != 0 {
					j.Addr = fmt.Sprintf("%#x", st.Addr)
				}
				if st.NewSegment || st.MappedBytes > 0 {
					j.Pool = report.PoolName(st.Small)
				}
			}
			out.Steps = append(out.Steps, j)
		}
		if err := writeJSON(env.Stdout, out); err != nil {
			return err
		}
		return runErr
	}
	report.SimScript(env.Stdout, cfg, capacity, steps, a.Stats())
	return runErr
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// ---- snapshots ----

type validationJSON struct {
	AllocAddressesMatched int  `json:"alloc_addresses_matched"`
	AllocAddressesTotal   int  `json:"alloc_addresses_total"`
	SegmentEventsMatched  int  `json:"segment_events_matched"`
	SegmentEventsTotal    int  `json:"segment_events_total"`
	ReleasesMatched       int  `json:"segment_releases_matched"`
	ReleasesTotal         int  `json:"segment_releases_total"`
	FinalStateMatches     bool `json:"final_state_matches"`
}

type oomJSON struct {
	Event    int    `json:"event"`
	Size     uint64 `json:"size"`
	StillOOM *bool  `json:"still_oom,omitempty"`
	// AtStart: from empty, one of the blocks live at trace start did not fit.
	AtStart bool `json:"at_trace_start,omitempty"`
}

type predictedJSON struct {
	PeakReservedBytes  uint64    `json:"peak_reserved_bytes"`
	PeakAllocatedBytes uint64    `json:"peak_allocated_bytes"`
	CudaMallocs        int64     `json:"cuda_malloc_count"`
	CudaFrees          int64     `json:"cuda_free_count"`
	UnallocatedAtPeak  float64   `json:"unallocated_at_peak"`
	OOMs               []oomJSON `json:"ooms"`
}

type recordedJSON struct {
	PeakReservedBytes uint64    `json:"peak_reserved_bytes"`
	CudaMallocs       int       `json:"cuda_malloc_count"`
	CudaFrees         int       `json:"cuda_free_count"`
	OOMs              []oomJSON `json:"ooms"`
}

type deviceJSON struct {
	Device     int             `json:"device"`
	Config     string          `json:"config"`
	Events     int             `json:"events"`
	Validation *validationJSON `json:"validation,omitempty"`
	Mismatches []string        `json:"mismatches,omitempty"`
	Predicted  predictedJSON   `json:"predicted"`
	Recorded   recordedJSON    `json:"recorded"`
	Sweep      []sweepRowJSON  `json:"sweep,omitempty"`
	// Start is the allocator at trace start (segments made before recording).
	Start     startJSON `json:"trace_start"`
	FromEmpty bool      `json:"from_empty"`
	// CapacityOOM is the capacity --capacity oom took from the recorded OOM.
	CapacityOOM *capacityJSON   `json:"capacity_from_oom,omitempty"`
	OOMWhatIf   []oomWhatIfJSON `json:"oom_what_if,omitempty"`
}

type startJSON struct {
	Segments      int    `json:"segments"`
	ReservedBytes uint64 `json:"reserved_bytes"`
	LiveBlocks    int    `json:"live_blocks"`
}

type capacityJSON struct {
	Event           int    `json:"event"`
	ReservedBytes   uint64 `json:"reserved_bytes"`
	DeviceFreeBytes uint64 `json:"device_free_bytes"`
	CapacityBytes   uint64 `json:"capacity_bytes"`
}

type oomWhatIfJSON struct {
	Config            string `json:"config"`
	StillOOM          bool   `json:"still_oom"`
	FirstOOMEvent     int    `json:"first_oom_event"`
	FirstOOMSize      uint64 `json:"first_oom_size,omitempty"`
	PeakReservedBytes uint64 `json:"peak_reserved_bytes"`
}

type sweepRowJSON struct {
	Config             string  `json:"config"`
	PeakReservedBytes  uint64  `json:"peak_reserved_bytes"`
	PeakAllocatedBytes uint64  `json:"peak_allocated_bytes"`
	DeltaReservedBytes int64   `json:"delta_reserved_bytes"`
	UnallocatedAtPeak  float64 `json:"unallocated_at_peak"`
	CudaMallocs        int64   `json:"cuda_malloc_count"`
	CudaFrees          int64   `json:"cuda_free_count"`
	OOMs               int     `json:"ooms"`
}

func oomsJSON(in []alloc.ReplayOOM, withStill bool) []oomJSON {
	out := []oomJSON{}
	for _, o := range in {
		j := oomJSON{Event: o.Event, Size: o.Size, AtStart: o.AtStart}
		if withStill {
			still := o.StillOOM
			j.StillOOM = &still
		}
		out = append(out, j)
	}
	return out
}

func toDeviceJSON(r *alloc.ReplayResult, capacity uint64) deviceJSON {
	d := deviceJSON{Device: r.Device, Config: r.Config.String(), Events: r.Events,
		Predicted: predictedJSON{
			PeakReservedBytes: r.PeakReserved, PeakAllocatedBytes: r.PeakAllocated,
			CudaMallocs: r.CudaMallocs, CudaFrees: r.CudaFrees, UnallocatedAtPeak: r.UnallocatedAtPeak,
			OOMs: oomsJSON(r.ModelOOMs, false),
		},
		Recorded: recordedJSON{PeakReservedBytes: r.RecordedPeakReserved, CudaMallocs: r.RecordedCudaMallocs,
			CudaFrees: r.RecordedCudaFrees, OOMs: oomsJSON(r.RecordedOOMs, !r.Validation && capacity > 0)},
	}
	if r.Validation {
		d.Validation = &validationJSON{r.AllocAddrsMatched, r.AllocAddrsTotal, r.SegEventsMatched, r.SegEventsTotal,
			r.ReleasesMatched, r.ReleasesTotal, r.FinalStateMatches}
		d.Mismatches = r.Mismatches
	}
	return d
}

func simSnapshot(env *Env, f *simFlags, files []string, capacity uint64) error {
	s, err := loadOne(env, files, f.demo)
	if err != nil {
		return err
	}
	path := "demo"
	if len(files) == 1 {
		path = files[0]
	}
	// Replay validates against the recorded segments and addresses.
	if err := needSegments(s, "sim"); err != nil {
		return err
	}
	if f.device >= 0 {
		if _, err := oneDevice(s, f.device); err != nil {
			return err // every command's "no device N (devices: ...)"
		}
	}
	devs := alloc.Replayable(s)
	if len(devs) == 0 {
		return fmt.Errorf("%s: no device trace with alloc events to replay (record with torch.cuda.memory._record_memory_history())", path)
	}
	if f.device >= 0 {
		if !slices.Contains(devs, f.device) {
			return fmt.Errorf("%s: device %d has no alloc events to replay (devices with alloc events: %s)", path, f.device, joinInts(devs))
		}
		devs = []int{f.device}
	}
	var cfg *alloc.Config
	if f.config != "" {
		c, err := simConfig(f.config)
		if err != nil {
			return err
		}
		if f.fraction > 0 {
			c.MemoryFraction = f.fraction
		}
		cfg = &c
	}
	var out []deviceJSON
	for _, d := range devs {
		start, err := alloc.StartOf(s, d)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		devCap := capacity
		var oomCap *alloc.OOMCapacity
		if f.capacityOOM {
			c, err := alloc.ImpliedCapacity(s, d)
			if err != nil {
				return fmt.Errorf("%s: --capacity oom: %w", path, err)
			}
			oomCap = &c
			devCap = c.Capacity
		}
		fromEmpty := f.fromEmpty
		if f.sweep && !f.fromEmptySet {
			fromEmpty = start.Segments > 0
		}
		whatIf := f.sweep || cfg != nil || oomCap != nil || fromEmpty
		if whatIf && start.Segments > 0 && !f.json {
			fmt.Fprintf(env.Stdout, "%s device %d: the trace starts with %s reserved in %d segments made before recording; under the recorded layout no setting can change them.\n",
				filepath.Base(path), d, units.Human(start.Reserved), start.Segments)
			if fromEmpty {
				fmt.Fprintf(env.Stdout, "  Replaying from an empty allocator: the %d blocks live at trace start are allocated first, in address order, under the setting.\n", start.Blocks)
			} else {
				fmt.Fprintf(env.Stdout, "  Add --from-empty to allocate the %d blocks live at trace start into an empty allocator under the setting first.\n", start.Blocks)
			}
		}
		var dj deviceJSON
		switch {
		case f.sweep:
			rows, err := alloc.Sweep(s, d, alloc.SweepOptions{Capacity: devCap, FromEmpty: fromEmpty})
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if !f.json {
				report.SimSweep(env.Stdout, filepath.Base(path), d, rows, fromEmpty)
				continue
			}
			dj = toDeviceJSON(rows[0].Result, devCap)
			for _, row := range rows {
				r := row.Result
				dj.Sweep = append(dj.Sweep, sweepRowJSON{row.Name, r.PeakReserved, r.PeakAllocated, row.DeltaReserved,
					r.UnallocatedAtPeak, r.CudaMallocs, r.CudaFrees, r.OOMs()})
			}
		case oomCap != nil && cfg == nil:
			configs := append([]string{"recorded"}, alloc.SweepConfigs...)
			res, err := alloc.WhatIfOOM(s, d, oomCap.Capacity, oomCap.Event, configs, fromEmpty)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if !f.json {
				report.SimOOMWhatIf(env.Stdout, filepath.Base(path), d, s, *oomCap, res)
				continue
			}
			dj = toDeviceJSON(res[0].Result, devCap)
			for _, o := range res {
				dj.OOMWhatIf = append(dj.OOMWhatIf, oomWhatIfJSON{Config: o.Config, StillOOM: o.StillOOM,
					FirstOOMEvent: o.FirstOOM, FirstOOMSize: o.FirstOOMSize, PeakReservedBytes: o.Result.PeakReserved})
			}
		default:
			opt := alloc.ReplayOptions{Config: cfg, Capacity: devCap, FromEmpty: fromEmpty}
			r, err := alloc.Simulate(s, d, opt)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if !f.json {
				report.SimReplay(env.Stdout, filepath.Base(path), s, r, devCap)
				continue
			}
			dj = toDeviceJSON(r, devCap)
		}
		dj.FromEmpty = fromEmpty
		if oomCap != nil {
			dj.CapacityOOM = &capacityJSON{Event: oomCap.Event, ReservedBytes: oomCap.Reserved,
				DeviceFreeBytes: oomCap.DeviceFree, CapacityBytes: oomCap.Capacity}
		}
		dj.Start = startJSON{Segments: start.Segments, ReservedBytes: start.Reserved, LiveBlocks: start.Blocks}
		out = append(out, dj)
	}
	if !f.json {
		return nil
	}
	if len(out) == 1 {
		return writeJSON(env.Stdout, struct {
			File string `json:"file"`
			deviceJSON
		}{path, out[0]})
	}
	return writeJSON(env.Stdout, struct {
		File    string       `json:"file"`
		Devices []deviceJSON `json:"devices"`
	}{path, out})
}
