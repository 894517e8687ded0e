package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// SimScriptJSON is "gpumem sim --script --json": the settings and each
// command's outcome.
type SimScriptJSON struct {
	Config string           `json:"config"`
	Steps  []ScriptStepJSON `json:"steps"`
}

// ScriptStepJSON is one script command's outcome.
type ScriptStepJSON struct {
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

// NewSimScriptJSON is the JSON of a script's run under cfg.
func NewSimScriptJSON(cfg alloc.Config, steps []alloc.Step) SimScriptJSON {
	out := SimScriptJSON{Config: cfg.String(), Steps: []ScriptStepJSON{}}
	for i := range steps {
		st := &steps[i]
		j := ScriptStepJSON{Line: st.Line, Op: st.Op, Error: st.Error, NewSegment: st.NewSegment,
			SegmentSize: st.SegmentSize, MappedBytes: st.MappedBytes, Stats: st.Stats.Map()}
		if strings.HasPrefix(st.Op, "alloc") {
			if st.Addr != 0 {
				j.Addr = fmt.Sprintf("%#x", st.Addr)
			}
			if st.NewSegment || st.MappedBytes > 0 {
				j.Pool = PoolName(st.Small)
			}
		}
		out.Steps = append(out.Steps, j)
	}
	return out
}

// SimSnapshot writes the text of "gpumem sim FILE": per device the replay,
// the what-if, the sweep or the OOM what-if, after a note on segments
// reserved before the recording.
func SimSnapshot(w io.Writer, path string, s *snapshot.Snapshot, r *alloc.SimResult) {
	for _, dj := range r.Devices {
		d := dj.Device
		if dj.WhatIf && dj.Start.Segments > 0 {
			fmt.Fprintf(w, "%s device %d: the trace starts with %s reserved in %d segments made before recording; under the recorded layout no setting can change them.\n",
				filepath.Base(path), d, units.Human(dj.Start.ReservedBytes), dj.Start.Segments)
			if dj.FromEmpty {
				fmt.Fprintf(w, "  Replaying from an empty allocator: the %d blocks live at trace start are allocated first, in address order, under the setting.\n", dj.Start.LiveBlocks)
			} else {
				fmt.Fprintf(w, "  Add --from-empty to allocate the %d blocks live at trace start into an empty allocator under the setting first.\n", dj.Start.LiveBlocks)
			}
		}
		switch {
		case dj.SweepRows != nil:
			SimSweep(w, filepath.Base(path), d, dj.SweepRows, dj.FromEmpty)
		case dj.OOMOutcomes != nil:
			SimOOMWhatIf(w, filepath.Base(path), d, s, *dj.OOMCapacity, dj.OOMOutcomes)
		default:
			SimReplay(w, filepath.Base(path), s, dj.Replay, dj.Capacity)
		}
	}
}
