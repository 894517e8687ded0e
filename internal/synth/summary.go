package synth

import (
	"fmt"
	"io"
	"strconv"

	"github.com/gpumem/gpumem/internal/units"
)

// WriteSummary says what was written (n bytes to out, as JSON or a
// pickle) and what the run did.
func (res *Result) WriteSummary(w io.Writer, out string, n int64, asJSON bool) {
	enc := "pickle (protocol 4)"
	if asJSON {
		enc = "JSON"
	}
	fmt.Fprintf(w, "wrote %s: %s, %s bytes (%.1f MB)\n", out, enc, strconv.FormatInt(n, 10), float64(n)/1e6)
	fmt.Fprintf(w, "workload: %s\n", res.Workload)
	st := res.Stats
	fmt.Fprintf(w, "steps completed: %d of %d; trace entries: %d; cudaMalloc calls: %d\n",
		res.StepsDone, res.Workload.Steps, res.Events, st.NumDeviceAlloc)
	fmt.Fprintf(w, "peak allocated: %s; peak reserved: %s; at dump: %s allocated, %s reserved\n",
		units.PythonBytes(uint64(st.AllocatedBytes[0].Peak)), units.PythonBytes(uint64(st.ReservedBytes[0].Peak)),
		units.PythonBytes(uint64(st.AllocatedBytes[0].Current)), units.PythonBytes(uint64(st.ReservedBytes[0].Current)))
	if res.OOM != nil {
		where := "recorded as the last trace entry"
		if res.Workload.OOMUnwind {
			where = "recorded, then the exception freed the forward pass's tensors"
		}
		fmt.Fprintf(w, "stopped at OOM (%s): %s\n", where, res.OOM.Error())
	}
}
