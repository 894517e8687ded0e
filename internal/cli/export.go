package cli

import (
	"bufio"
	"fmt"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/atomicfile"
	"github.com/gpumem/gpumem/internal/export"
	"github.com/gpumem/gpumem/internal/units"
)

func init() {
	Register(&Command{
		Name:    "export",
		Summary: "write a snapshot for other tools: perfetto (Chrome trace JSON), json (normalised model), pprof",
		Run:     runExport,
	})
}

const exportAbout = `
Writes the snapshot in another tool's format:
  perfetto  Chrome trace-event JSON for ui.perfetto.dev and chrome://tracing:
            per device counter tracks of allocated, reserved, active and
            requested bytes and per memory category, allocations of at least
            --min-slice as slices on per-stream lanes (the rest in one
            counter), instants for OOMs, snapshot events and annotations;
            time from time_us.
  json      the normalised model (segments, blocks, events, frames and
            stacks interned) of any snapshot generation; schema in README.
  pprof     a gzipped pprof profile of one device (go tool pprof reads it):
            inuse_space/objects (live at the dump), alloc_space/objects
            (every alloc of the trace), peak_space/objects (live at the
            Active Memory Timeline's peak). The allocator's internal C++
            frames are left out of the stacks (--keep-internal-frames keeps
            them); blocks allocated before recording whose trace holds only
            the stack that freed them are one frame, "<allocated before
            recording>", with that stack as the label freed_at.
Without -o the output goes to standard output; with -o it is written
atomically (temporary file, then rename).`

func runExport(env *Env, args []string) error {
	fs := newFlagSet(env, "export", "perfetto|json|pprof [-o OUT] [--device N] [--demo] FILE", exportAbout)
	out := fs.String("o", "", "write to `FILE` (default standard output)")
	device := deviceFlag(fs, "export only device")
	minSlice := fs.String("min-slice", "1MiB", "perfetto: least `SIZE` of an allocation drawn as its own slice")
	useDemo := fs.Bool("demo", false, "use the embedded demo snapshot")
	keepInternal := fs.Bool("keep-internal-frames", false, "pprof: keep the allocator's internal C++ frames (caching allocator, stack capture, tensor factories, dispatcher) in the stacks")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError(fs, env.Stderr, "want a format: perfetto, json or pprof")
	}
	format, files := pos[0], pos[1:]
	if len(files)+boolInt(*useDemo) != 1 {
		return usageError(fs, env.Stderr, "want exactly one snapshot")
	}
	dev := *device
	var write func(w io.Writer) error
	s, err := loadOne(env, files, *useDemo)
	if err != nil {
		return err
	}
	if _, err := oneDevice(s, dev); err != nil { // a device the file lacks is an error, not an empty export
		return err
	}
	switch format {
	case "perfetto":
		n, err := units.Parse(*minSlice)
		if err != nil {
			return usageError(fs, env.Stderr, fmt.Sprintf("--min-slice: %v", err))
		}
		write = func(w io.Writer) error {
			return export.WritePerfetto(w, s, export.PerfettoOptions{Device: dev, MinSliceBytes: max(n, 1)})
		}
	case "json":
		write = func(w io.Writer) error { return export.WriteJSON(w, s, dev) }
	case "pprof":
		dev, err := oneDevice(s, dev)
		if err != nil {
			return err
		}
		d := analysis.NewDevice(s, dev)
		write = func(w io.Writer) error {
			return export.WritePprof(w, d, export.PprofOptions{KeepInternalFrames: *keepInternal})
		}
	default:
		return usageError(fs, env.Stderr, fmt.Sprintf("unknown format %q: want perfetto, json or pprof", format))
	}
	return writeOutput(env, *out, write)
}

// writeOutput runs write on standard output when path is "" or "-", else
// on a file written atomically.
func writeOutput(env *Env, path string, write func(w io.Writer) error) error {
	if path == "" || path == "-" {
		return writeStdout(env, write)
	}
	return atomicfile.Write(path, func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	})
}
