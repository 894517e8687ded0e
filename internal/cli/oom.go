package cli

import (
	"fmt"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/internal/units"
)

func init() {
	Register(&Command{
		Name:    "oom",
		Summary: "why an OOM happened: shortage, fragmentation or memory outside PyTorch, and what would avoid it",
		Run:     runOOM,
	})
}

const oomAbout = `
For each out-of-memory the trace records: the request as the allocator
rounded it, the free device memory CUDA reported, the reserved-but-unallocated
bytes, the largest free block of the request's stream and pool, and a
verdict with its arithmetic: shortage (all cached free memory plus CUDA's
free memory could not hold the request), fragmentation (the total could, no
block or device range was big enough) or outside_allocator (with a known
capacity: memory neither reserved by PyTorch nor free made the difference);
no_oom when there is none (then the headroom at the peak). Then what was
live by category and site, and suggestions with amounts; allocator settings
are suggested only when a replay through gpumem's allocator model at the
capacity the OOM implies (reserved + CUDA free) avoids the OOM.`

func runOOM(env *Env, args []string) error {
	fs := newFlagSet(env, "oom", "[--capacity SIZE | --gpu NAME] [--no-replay] [--depth K] [--top N] [--device N] [--json] [--demo] FILE...", oomAbout)
	var f answerFlags
	f.register(fs)
	capFlag := fs.String("capacity", "", "the device's total memory (`SIZE`, e.g. 80GiB)")
	gpu := fs.String("gpu", "", "take the capacity from a known GPU (`NAME`, e.g. H100, A100-40GB, T4)")
	noReplay := fs.Bool("no-replay", false, "skip the allocator-settings replays")
	files, err := f.parse(env, fs, args)
	if err != nil {
		return err
	}
	var capacity uint64
	switch {
	case *capFlag != "" && *gpu != "":
		return usageError(fs, env.Stderr, "give --capacity or --gpu, not both")
	case *capFlag != "":
		if capacity, err = units.Parse(*capFlag); err != nil || capacity == 0 {
			return usageError(fs, env.Stderr, fmt.Sprintf("--capacity %q: want a size such as 80GiB", *capFlag))
		}
	case *gpu != "":
		g, err := analysis.LookupGPU(*gpu)
		if err != nil {
			return usageError(fs, env.Stderr, err.Error())
		}
		capacity = g.Bytes
	}
	return runAnswers(env, &f, files, func(name string, d *analysis.Device) (any, func(io.Writer) error, error) {
		a, err := d.OOMAnswer(analysis.OOMOptions{Capacity: capacity, Depth: f.depth, Top: f.top, NoReplay: *noReplay})
		if err != nil {
			return nil, nil, err
		}
		a.File = name
		t0, ok := d.TraceStartUS()
		return a, func(w io.Writer) error { return report.WriteOOM(w, name, a, t0, ok) }, nil
	})
}
