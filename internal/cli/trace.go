package cli

import (
	"io"

	"github.com/gpumem/gpumem/internal/report"
)

func init() {
	Register(&Command{
		Name:    "trace",
		Summary: "list the allocator trace as Python-like lines, as _memory_viz trace",
		Run:     runTrace,
	})
}

const traceAbout = `
Lists every trace entry as a line of pseudo-Python, device by device, like
PyTorch's "_memory_viz trace":
  a = cudaMalloc(ADDR, SIZE)     segment_alloc: a new segment named a
  b = a[OFFSET:SIZE]             alloc of SIZE requested bytes at OFFSET in a
  del b # SIZE                   free_requested
  # free completed for b SIZE    free_completed
  cudaFree(a) # SIZE             segment_free
  c = cuMemMap(ADDR, SIZE)       segment_map (expandable segments)
  cuMemUnmap(ADDR, SIZE)         segment_unmap
  raise OutOfMemoryError # ...   oom
Names are never reused. An allocation outside the trace's segments is shown
in seg_I (the I-th segment of the dump) or MEM (absolute address). Frees of
memory allocated before the trace began show the raw address. TOTAL MEM is
the memory allocated on the device at dump time.`

func runTrace(env *Env, args []string) error {
	fs := newFlagSet(env, "trace", "[--device N] [--demo] FILE", traceAbout)
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
		if _, err := oneDevice(s, *device); err != nil {
			return err
		}
	}
	return writeStdout(env, func(w io.Writer) error {
		return report.Trace(w, s, report.TraceOptions{Device: *device})
	})
}
