package cli

import (
	"bufio"
	"fmt"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/atomicfile"
	"github.com/gpumem/gpumem/internal/export"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/units"
)

func init() {
	Register(&Command{
		Name:    "export",
		Summary: "write a snapshot for other tools: perfetto (Chrome trace JSON), json (normalised model), pprof",
		Run:     runExport,
	})
}

func runExport(env *Env, args []string) error {
	fs := newFlagSet(env, "export", "perfetto|json|pprof [-o OUT] [--device N] [--demo] FILE", help.About("export"))
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
	if _, err := analysis.OneDevice(s, dev); err != nil { // a device the file lacks is an error, not an empty export
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
		dev, err := analysis.OneDevice(s, dev)
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
