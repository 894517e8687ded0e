package steps

import (
	"fmt"

	"github.com/gpumem/gpumem/internal/analysis"
)

// Result is the answer of gpumem steps for one device, as its --json
// prints it and the viewer's /api/steps returns it: Find's report with
// each step's figures named and the growth between step starts.
type Result struct {
	File          string       `json:"file"`
	Device        int          `json:"device"`
	Source        Source       `json:"source"`
	Steps         []StepRow    `json:"steps"`
	Leak          bool         `json:"leak"`
	GrowthPerStep int64        `json:"growth_per_step_bytes"`
	Sites         []GrowthSite `json:"growing_sites"`

	Report *Report `json:"-"` // what the rows were made from (the text renderer reads HasPhase)
}

// GrowthSite is a site that grew from the start of step 1 to the end.
type GrowthSite struct {
	Frames []string `json:"frames"`
	Bytes  int64    `json:"growth_bytes"`
}

// StepRow is one step of Result.
type StepRow struct {
	Index         int    `json:"index"`
	Name          string `json:"name"`
	FirstEvent    int    `json:"first_event"`
	LastEvent     int    `json:"last_event"`
	StartBytes    uint64 `json:"start_bytes"`
	PeakBytes     uint64 `json:"peak_bytes"`
	PeakEvent     *int   `json:"peak_event"` // null: before the trace's first event
	PeakPhase     string `json:"peak_phase"` // "start": nothing in the step went above its start
	EndBytes      uint64 `json:"end_bytes"`
	ForwardEnd    uint64 `json:"forward_end_bytes"`
	BackwardEnd   uint64 `json:"backward_end_bytes"`
	OptimizerEnd  uint64 `json:"optimizer_end_bytes"`
	TimeUS        int64  `json:"time_us"`
	DurationUS    int64  `json:"duration_us"`
	GrowthToStart int64  `json:"growth_from_previous_start_bytes"`
}

// Answer finds the steps of d's device (Find) and makes the result
// gpumem steps and the viewer show.
func Answer(d *analysis.Device) (*Result, error) {
	// A file that can mark no steps: a memory timeline export has neither
	// ProfilerStep annotations nor stacks, and the repeating-pattern
	// search over its one-frame category stacks would cut the run into
	// meaningless pieces.
	if msg := d.S.Unavailable("stacks"); msg != "" && len(d.S.Annotations) == 0 {
		return nil, fmt.Errorf("%s: steps: no ProfilerStep annotations and %s", d.S.Source.Name, msg)
	}
	r, err := Find(d)
	if err != nil {
		return nil, err
	}
	out := &Result{File: d.S.Source.Name, Device: r.Device, Source: r.Source, Leak: r.Leak, GrowthPerStep: r.GrowthPerStep,
		Steps: []StepRow{}, Sites: []GrowthSite{}, Report: r} // [] not null in JSON
	for _, g := range r.Sites {
		out.Sites = append(out.Sites, GrowthSite{g.Frames, g.Bytes})
	}
	for i, st := range r.Steps {
		j := StepRow{Index: st.Index, Name: st.Name, FirstEvent: st.First, LastEvent: st.Last,
			StartBytes: st.StartBytes, PeakBytes: st.PeakBytes, PeakPhase: st.PeakPhase.String(),
			EndBytes: st.EndBytes, ForwardEnd: st.PhaseEndBytes[Forward], BackwardEnd: st.PhaseEndBytes[Backward],
			OptimizerEnd: st.PhaseEndBytes[Optimizer], TimeUS: st.TimeUS, DurationUS: st.DurationUS}
		if st.PeakEvent >= 0 {
			j.PeakEvent = &st.PeakEvent
		}
		if st.PeakEvent < st.First { // the step's start is its highest point: no phase
			j.PeakPhase = "start"
		}
		if i > 0 {
			j.GrowthToStart = int64(st.StartBytes) - int64(r.Steps[i-1].StartBytes)
		}
		out.Steps = append(out.Steps, j)
	}
	return out, nil
}
