package mcp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/check"
)

// The tools' inputs. Each field is one flag of the subcommand of the
// tool's name (tag flag), or its positional snapshot files (tag pos);
// fields tagged path name files, which must lie under the server's roots.
// Optional fields are pointers: absent is not the same as 0 (device 0,
// top 0 = all).

type infoIn struct {
	Files  []string `json:"files" pos:"" path:"" jsonschema:"snapshot files (paths under the server's roots; relative paths are relative to the first root)"`
	Device *int     `json:"device,omitempty" flag:"device" jsonschema:"describe only this device (0, 1, ...)"`
}

type peakIn struct {
	Files  []string `json:"files" pos:"" path:"" jsonschema:"snapshot files (paths under the server's roots)"`
	At     *string  `json:"at,omitempty" flag:"at" jsonschema:"the moment: peak (default), reserved-peak, end, eN (after trace event N) or a time from the first event such as 12.5ms"`
	Depth  *int     `json:"depth,omitempty" flag:"depth" jsonschema:"user frames that identify a site (default 3)"`
	Top    *int     `json:"top,omitempty" flag:"top" jsonschema:"sites listed (default 20; 0 = all)"`
	Device *int     `json:"device,omitempty" flag:"device" jsonschema:"only this device (default: every device)"`
}

type oomIn struct {
	Files      []string `json:"files" pos:"" path:"" jsonschema:"snapshot files (paths under the server's roots)"`
	Capacity   *string  `json:"capacity,omitempty" flag:"capacity" jsonschema:"the device's total memory, e.g. 80GiB"`
	GPU        *string  `json:"gpu,omitempty" flag:"gpu" jsonschema:"take the capacity from a known GPU, e.g. H100, A100-40GB, T4"`
	NoReplay   *bool    `json:"no_replay,omitempty" flag:"no-replay" jsonschema:"skip the allocator-settings replays (faster)"`
	AtDump     *bool    `json:"at_dump,omitempty" flag:"at-dump" jsonschema:"the trace records no OOM: answer for one at the moment of the dump (needs request and device_free)"`
	Request    *string  `json:"request,omitempty" flag:"request" jsonschema:"with at_dump: the failed request, e.g. 2GiB"`
	DeviceFree *string  `json:"device_free,omitempty" flag:"device-free" jsonschema:"with at_dump: CUDA's free memory at the OOM, e.g. 1.1GiB"`
	Stream     *int64   `json:"stream,omitempty" flag:"stream" jsonschema:"with at_dump: the request's stream (0: the default stream)"`
	Depth      *int     `json:"depth,omitempty" flag:"depth" jsonschema:"user frames that identify a site (default 3)"`
	Top        *int     `json:"top,omitempty" flag:"top" jsonschema:"sites listed (default 20; 0 = all)"`
	Device     *int     `json:"device,omitempty" flag:"device" jsonschema:"only this device (default: every device)"`
}

type diffIn struct {
	A       string  `json:"a" pos:"" path:"" jsonschema:"the first run's snapshot (A)"`
	B       string  `json:"b" pos:"" path:"" jsonschema:"the second run's snapshot (B), compared against A"`
	At      *string `json:"at,omitempty" flag:"at" jsonschema:"compare at: peak (default), reserved-peak, end, eN or a time such as 12.5ms"`
	Depth   *int    `json:"depth,omitempty" flag:"depth" jsonschema:"frames per allocation site (default 2)"`
	Device  *int    `json:"device,omitempty" flag:"device" jsonschema:"device of A and B"`
	DeviceA *int    `json:"device_a,omitempty" flag:"device-a" jsonschema:"device of A"`
	DeviceB *int    `json:"device_b,omitempty" flag:"device-b" jsonschema:"device of B"`
}

type stepsIn struct {
	File   string `json:"file" pos:"" path:"" jsonschema:"a snapshot file"`
	Device *int   `json:"device,omitempty" flag:"device" jsonschema:"device (default: the one with the longest trace)"`
}

type ranksIn struct {
	Files  []string `json:"files" pos:"" path:"" jsonschema:"one snapshot per rank of one job (rank N from the file name, else the position)"`
	Device *int     `json:"device,omitempty" flag:"device" jsonschema:"device of every file (default each file's own)"`
}

type simIn struct {
	File      *string  `json:"file,omitempty" pos:"" path:"" jsonschema:"a snapshot whose trace is replayed (give file or script)"`
	Script    *string  `json:"script,omitempty" flag:"script" path:"" jsonschema:"a script file of allocator commands (alloc NAME SIZE, free NAME, empty_cache, set CONFIG)"`
	Config    *string  `json:"config,omitempty" flag:"config" jsonschema:"allocator settings in PYTORCH_CUDA_ALLOC_CONF syntax, e.g. expandable_segments:True"`
	Capacity  *string  `json:"capacity,omitempty" flag:"capacity" jsonschema:"device memory, e.g. 80GiB, or oom for what the recorded OOM implies"`
	Fraction  *float64 `json:"fraction,omitempty" flag:"fraction" jsonschema:"per-process memory fraction of capacity"`
	Sweep     *bool    `json:"sweep,omitempty" flag:"sweep" jsonschema:"compare common settings on the snapshot"`
	FromEmpty *bool    `json:"from_empty,omitempty" flag:"from-empty" jsonschema:"replay from an empty allocator"`
	Device    *int     `json:"device,omitempty" flag:"device" jsonschema:"replay only this device"`
}

type estimateIn struct {
	Config            *string  `json:"config,omitempty" flag:"config" path:"" jsonschema:"a Hugging Face config.json of the model"`
	Params            *string  `json:"params,omitempty" flag:"params" jsonschema:"parameter count when no architecture is given, e.g. 7B"`
	Layers            *int     `json:"layers,omitempty" flag:"layers" jsonschema:"transformer blocks"`
	Hidden            *int     `json:"hidden,omitempty" flag:"hidden" jsonschema:"hidden size"`
	Heads             *int     `json:"heads,omitempty" flag:"heads" jsonschema:"attention heads"`
	KVHeads           *int     `json:"kv_heads,omitempty" flag:"kv-heads" jsonschema:"key/value heads"`
	HeadDim           *int     `json:"head_dim,omitempty" flag:"head-dim" jsonschema:"head dimension"`
	Intermediate      *int     `json:"intermediate,omitempty" flag:"intermediate" jsonschema:"MLP width"`
	Vocab             *int     `json:"vocab,omitempty" flag:"vocab" jsonschema:"vocabulary size"`
	Tied              *bool    `json:"tied,omitempty" flag:"tied" jsonschema:"the LM head shares the embedding"`
	PlainMLP          *bool    `json:"plain_mlp,omitempty" flag:"plain-mlp" jsonschema:"two-matrix MLP instead of gated"`
	Dtype             *string  `json:"dtype,omitempty" flag:"dtype" jsonschema:"fp32, bf16 (default) or fp16"`
	MixedPrecision    *bool    `json:"mixed_precision,omitempty" flag:"mixed-precision" jsonschema:"16-bit weights and gradients with fp32 master weights"`
	Optimizer         *string  `json:"optimizer,omitempty" flag:"optimizer" jsonschema:"optimizer (default adamw)"`
	OptimizerLoop     *bool    `json:"optimizer_loop,omitempty" flag:"optimizer-loop" jsonschema:"the optimizer updates one parameter at a time"`
	FirstStep         *bool    `json:"first_step,omitempty" flag:"first-step" jsonschema:"the first training step"`
	KeepGrads         *bool    `json:"keep_grads,omitempty" flag:"keep-grads" jsonschema:"gradients stay allocated through the forward"`
	Batch             *int     `json:"batch,omitempty" flag:"batch" jsonschema:"micro-batch per GPU (default 1)"`
	Seq               *int     `json:"seq,omitempty" flag:"seq" jsonschema:"sequence length (default 2048)"`
	GradCheckpointing *bool    `json:"grad_checkpointing,omitempty" flag:"grad-checkpointing" jsonschema:"recompute each block in backward"`
	FlashAttention    *bool    `json:"flash_attention,omitempty" flag:"flash-attention" jsonschema:"fused attention"`
	ZeRO              *int     `json:"zero,omitempty" flag:"zero" jsonschema:"ZeRO stage 0-3 over gpus"`
	FSDP              *bool    `json:"fsdp,omitempty" flag:"fsdp" jsonschema:"FSDP full sharding over gpus"`
	GPUs              *int     `json:"gpus,omitempty" flag:"gpus" jsonschema:"data-parallel GPUs"`
	LoRARank          *int     `json:"lora_rank,omitempty" flag:"lora-rank" jsonschema:"train only rank-R LoRA adapters"`
	Inference         *bool    `json:"inference,omitempty" flag:"inference" jsonschema:"inference: weights + KV cache + one forward"`
	GPU               *string  `json:"gpu,omitempty" flag:"gpu" jsonschema:"GPU name (H100, A100-40GB, ...) or total memory: does it fit, and the largest batch"`
	MaxBatch          *bool    `json:"max_batch,omitempty" flag:"max-batch" jsonschema:"only the largest batch that fits on gpu"`
	CUDAContext       *string  `json:"cuda_context,omitempty" flag:"cuda-context" jsonschema:"memory of the CUDA context (default 512MiB)"`
	AllocatorOverhead *float64 `json:"allocator_overhead,omitempty" flag:"allocator-overhead" jsonschema:"reserved-but-free memory as a fraction of the peak"`
	Check             *string  `json:"check,omitempty" flag:"check" path:"" jsonschema:"compare with what this snapshot of the same run measured"`
	Device            *int     `json:"device,omitempty" flag:"device" jsonschema:"with check: the device measured"`
}

type checkIn struct {
	Files            []string          `json:"files" pos:"" path:"" jsonschema:"snapshot files to hold to the budgets"`
	MaxPeak          *string           `json:"max_peak,omitempty" flag:"max-peak" jsonschema:"largest peak active, e.g. 20GiB"`
	MaxReserved      *string           `json:"max_reserved,omitempty" flag:"max-reserved" jsonschema:"largest peak reserved"`
	MaxCategory      map[string]string `json:"max_category,omitempty" flag:"max-category" jsonschema:"largest bytes of a category at the peak, by category name (parameter, optimizer_state, gradient, activation, temporary, input, autograd_detail, unknown)"`
	MaxFragmentation *float64          `json:"max_fragmentation,omitempty" flag:"max-fragmentation" jsonschema:"largest fragmentation at the peak (0..1)"`
	MinHeadroom      *string           `json:"min_headroom,omitempty" flag:"min-headroom" jsonschema:"least capacity minus peak reserved (needs gpu or capacity)"`
	GPU              *string           `json:"gpu,omitempty" flag:"gpu" jsonschema:"the capacity of a known GPU for min_headroom"`
	Capacity         *string           `json:"capacity,omitempty" flag:"capacity" jsonschema:"the device's total memory for min_headroom"`
	MaxGrowthPerStep *string           `json:"max_growth_per_step,omitempty" flag:"max-growth-per-step" jsonschema:"largest growth of live memory per training step"`
	Baseline         *string           `json:"baseline,omitempty" flag:"baseline" path:"" jsonschema:"an earlier run's snapshot, for max_increase"`
	MaxIncrease      *string           `json:"max_increase,omitempty" flag:"max-increase" jsonschema:"largest growth over the baseline of the peak and of each category: a size or a percentage such as 5%"`
	Budgets          json.RawMessage   `json:"budgets,omitempty" jsonschema:"budgets as in a budgets file (docs/check.md): the fields above with sizes as strings, per device (devices) and per rank (ranks)"`
	Device           *int              `json:"device,omitempty" flag:"device" jsonschema:"check only this device"`
	Depth            *int              `json:"depth,omitempty" flag:"depth" jsonschema:"user frames that identify a site (default 3)"`
}

// tool is one tool: its name (the subcommand's), description and input.
type tool struct {
	name, about string
	input       reflect.Type
}

var tools = []tool{
	{"info", "What a snapshot holds: format, devices with memory at dump time, timeline peaks, pools, trace, allocator settings, warnings. Structured output = `gpumem info --json`.", reflect.TypeFor[infoIn]()},
	{"peak", "What is live at the peak (or another moment) and who allocated it: sites, categories, size classes, fragmentation. Structured output = `gpumem peak --json`.", reflect.TypeFor[peakIn]()},
	{"oom", "Why an out-of-memory happened (shortage, fragmentation or memory outside PyTorch), what was live, and what would avoid it; the headroom when there is no OOM. Structured output = `gpumem oom --json`.", reflect.TypeFor[oomIn]()},
	{"diff", "Compare two runs (B against A): peaks, live bytes by category and by allocation site, allocator settings. Structured output = `gpumem diff --json`.", reflect.TypeFor[diffIn]()},
	{"steps", "Per training step: peak, its phase, live memory growing from step to step (leaks) and the sites that grew. Structured output = `gpumem steps --json`.", reflect.TypeFor[stepsIn]()},
	{"ranks", "One row per rank's snapshot of a distributed job: peaks, time of peak, fragmentation, top site; spread and outlier. Structured output = `gpumem ranks --json`.", reflect.TypeFor[ranksIn]()},
	{"sim", "Simulate PyTorch's caching allocator: replay a snapshot under other settings (what-if), sweep settings, or run a script. Structured output = `gpumem sim --json`.", reflect.TypeFor[simIn]()},
	{"estimate", "Estimate a model's training or inference memory before running it, and whether it fits a GPU. Structured output = `gpumem estimate --json`.", reflect.TypeFor[estimateIn]()},
	{"check", "Hold snapshots to memory budgets (peak, reserved, categories, fragmentation, headroom, growth per step, increase over a baseline); failed budgets name the site behind them. Structured output = `gpumem check --json` (ok: false when a budget fails).", reflect.TypeFor[checkIn]()},
}

// goTypeName is the Go type in encoding/json's messages ("Go struct field
// peakIn.files"), which means nothing to a client.
var goTypeName = regexp.MustCompile(`Go struct field \w+\.`)

// argError is a tool argument that cannot be run: the call's error.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func argErrorf(format string, a ...any) error { return &argError{fmt.Sprintf(format, a...)} }

// command decodes a call's arguments for tool t and builds the
// subcommand's arguments (always with --json) and its standard input.
// Unknown fields, wrong types and paths outside the roots are errors.
func (s *Server) command(t *tool, raw json.RawMessage) (args []string, stdin []byte, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	in := reflect.New(t.input)
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(in.Interface()); err != nil {
		return nil, nil, argErrorf("arguments: %s", goTypeName.ReplaceAllString(err.Error(), "field "))
	}
	if dec.More() {
		return nil, nil, argErrorf("arguments: more than one JSON value")
	}
	args = []string{t.name, "--json"}
	var pos []string
	v := in.Elem()
	for i := 0; i < v.NumField(); i++ {
		f, fv := t.input.Field(i), v.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		_, isPath := f.Tag.Lookup("path")
		_, isPos := f.Tag.Lookup("pos")
		flagName, isFlag := f.Tag.Lookup("flag")
		if fv.Kind() == reflect.Pointer {
			if fv.IsNil() {
				continue
			}
			fv = fv.Elem()
		}
		if f.Type == reflect.TypeFor[json.RawMessage]() { // check's inline budgets
			if fv.Len() == 0 {
				continue
			}
			budgets, err := s.budgets(fv.Bytes())
			if err != nil {
				return nil, nil, err
			}
			args, stdin = append(args, "--budgets=-"), budgets
			continue
		}
		var vals []string
		switch fv.Kind() {
		case reflect.String:
			vals = []string{fv.String()}
		case reflect.Slice:
			for j := 0; j < fv.Len(); j++ {
				vals = append(vals, fv.Index(j).String())
			}
		case reflect.Map:
			keys := fv.MapKeys()
			ks := make([]string, len(keys))
			for j, k := range keys {
				ks[j] = k.String()
			}
			slices.Sort(ks)
			for _, k := range ks {
				if k == "" || strings.Contains(k, "=") {
					return nil, nil, argErrorf("%s: bad category name %q", name, k)
				}
				vals = append(vals, k+"="+fv.MapIndex(reflect.ValueOf(k)).String())
			}
		case reflect.Bool:
			vals = []string{strconv.FormatBool(fv.Bool())}
		case reflect.Int, reflect.Int64:
			vals = []string{strconv.FormatInt(fv.Int(), 10)}
		case reflect.Float64:
			vals = []string{strconv.FormatFloat(fv.Float(), 'g', -1, 64)}
		default:
			panic("mcp: unhandled field type " + f.Type.String())
		}
		if isPos && len(vals) == 0 && fv.Kind() == reflect.Slice {
			return nil, nil, argErrorf("%s: give at least one file", name)
		}
		for _, val := range vals {
			if isPath {
				p, err := s.resolve(val)
				if err != nil {
					return nil, nil, argErrorf("%s: %v", name, err)
				}
				val = p
			}
			switch {
			case isPos:
				pos = append(pos, val)
			case isFlag:
				args = append(args, "--"+flagName+"="+val)
			}
		}
	}
	// Required positional strings (diff's a and b, steps' file) decode to
	// "" when absent; resolve rejects "", so a missing one is an error above.
	args = append(args, "--")
	return append(args, pos...), stdin, nil
}

// budgets checks an inline budgets object and returns it for check's
// standard input, its baselines resolved under the roots.
func (s *Server) budgets(raw []byte) ([]byte, error) {
	f, err := check.ParseFile(raw)
	if err != nil {
		return nil, argErrorf("budgets: %v", err)
	}
	fix := func(b *check.Budgets) error {
		if b.Baseline == "" {
			return nil
		}
		p, err := s.resolve(b.Baseline)
		if err != nil {
			return argErrorf("budgets: baseline: %v", err)
		}
		b.Baseline = p
		return nil
	}
	if err := fix(&f.Budgets); err != nil {
		return nil, err
	}
	for _, m := range []map[string]check.Budgets{f.Devices, f.Ranks} {
		for k, b := range m {
			if err := fix(&b); err != nil {
				return nil, err
			}
			m[k] = b
		}
	}
	return json.Marshal(f)
}
