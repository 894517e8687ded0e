package cli

import (
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
)

func init() {
	Register(&Command{
		Name:    "trace",
		Summary: "list the allocator trace as Python-like lines, as _memory_viz trace",
		Run:     runTrace,
	})
}

func runTrace(env *Env, args []string) error {
	fs := newFlagSet(env, "trace", "[--device N] [--demo] FILE", help.About("trace"))
	device := deviceFlag(fs, "list only device")
	useDemo := fs.Bool("demo", false, "use the embedded demo snapshot")
	files, err := parseOneSnapshot(env, fs, args, useDemo)
	if err != nil {
		return err
	}
	s, err := loadOne(env, files, *useDemo)
	if err != nil {
		return err
	}
	if s.Traces != nil { // a bare segment list says it has no trace, whatever the device
		if _, err := analysis.OneDevice(s, *device); err != nil {
			return err
		}
	}
	return writeStdout(env, func(w io.Writer) error {
		return report.Trace(w, s, report.TraceOptions{Device: *device})
	})
}
