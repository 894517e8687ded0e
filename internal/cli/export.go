package cli

import (
	"bufio"
	"io"

	"github.com/gpumem/gpumem/internal/atomicfile"
	"github.com/gpumem/gpumem/internal/export"
	"github.com/gpumem/gpumem/internal/help"
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
	var f export.Format
	device := deviceFlag(fs, "export only device")
	fs.StringVar(&f.MinSlice, "min-slice", "1MiB", "perfetto: least `SIZE` of an allocation drawn as its own slice")
	useDemo := fs.Bool("demo", false, "use the embedded demo snapshot")
	fs.BoolVar(&f.KeepInternalFrames, "keep-internal-frames", false, "pprof: keep the allocator's internal C++ frames (caching allocator, stack capture, tensor factories, dispatcher) in the stacks")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError(fs, env.Stderr, "want a format: perfetto, json or pprof")
	}
	f.Name, f.Device = pos[0], *device
	if len(pos[1:])+boolInt(*useDemo) != 1 {
		return usageError(fs, env.Stderr, "want exactly one snapshot")
	}
	if err := f.Check(); err != nil {
		return usageError(fs, env.Stderr, err.Error())
	}
	s, err := loadOne(env, pos[1:], *useDemo)
	if err != nil {
		return err
	}
	write, err := f.Writer(s)
	if err != nil {
		return err
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
