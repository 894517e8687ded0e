// Package steps splits a device's trace into training steps and reports
// each step's peak, the phase it happens in, and live memory that keeps
// growing from step to step (a leak).
package steps

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/snapshot"
)

// Phase is the part of a training step an allocation belongs to.
type Phase uint8

// The phases, in step order.
const (
	Forward Phase = iota
	Backward
	Optimizer
)

func (p Phase) String() string {
	return [...]string{"forward", "backward", "optimizer"}[p]
}

// Source says how the steps were found.
type Source string

// The ways steps are found, best first.
const (
	FromProfilerStep Source = "ProfilerStep annotations"
	FromOptimizer    Source = "optimizer.step annotations"
	FromPattern      Source = "repeating allocation pattern"
	// FromWholeTrace: no annotations and no repeating pattern of steps
	// (one pass, such as a single forward): the trace is one step.
	FromWholeTrace Source = "whole trace (no repeating step found)"
)

// Step is one training step: raw trace events [First, Last].
type Step struct {
	Index       int
	Name        string // the annotation's name, or "step N"
	First, Last int
	// StartBytes is what is live just before the step's first event, and
	// EndBytes after its last (requested bytes, the Active Memory
	// Timeline's total).
	StartBytes, EndBytes uint64
	// PeakBytes is the highest live total inside the step, first reached
	// after raw event PeakEvent, in phase PeakPhase.
	PeakBytes uint64
	PeakEvent int
	PeakPhase Phase
	// PhaseEndBytes is what is live when each phase of the step ends
	// (after its last allocation); zero for a phase the step lacks.
	PhaseEndBytes [3]uint64
	HasPhase      [3]bool
	TimeUS        int64 // time_us of the first event (0 without time)
	DurationUS    int64
}

// Growth is a site whose live bytes grew between two steps.
type Growth struct {
	Frames []string // innermost first, "file:line:function"
	Bytes  int64    // growth over the compared steps
}

// Report is the steps of one device.
type Report struct {
	Device int
	Source Source
	Steps  []Step
	// Leak is set when live memory at step starts grew at every step
	// after the first (the warm-up, where optimizer state is created), and
	// to the end of the last; it needs at least three steps.
	Leak bool
	// GrowthPerStep is the mean growth of live bytes from one step's
	// start to the next over the steps compared (steps 1.. and the end).
	GrowthPerStep int64
	// Sites are the allocation sites that grew over those steps, largest
	// growth first.
	Sites []Growth
}

// Find splits device d's trace into steps and measures them.
func Find(d *analysis.Device) (*Report, error) {
	ev := d.Events()
	r := &Report{Device: d.Index}
	if len(ev) == 0 {
		return r, nil
	}
	bounds, names, src := annotated(d.S, d.Index, ev, "ProfilerStep#")
	if len(bounds) == 0 {
		bounds, names, src = optimizerSteps(d.S, d.Index, ev)
	}
	live := liveTotals(d)
	if len(bounds) == 0 {
		bounds, src = pattern(ev, func(b [][2]int) bool { return returnsToBaseline(d, live, b) })
	}
	r.Source = src
	phase := phases(d.S, ev)
	for i, b := range bounds {
		st := Step{Index: i, Name: fmt.Sprintf("step %d", i), First: b[0], Last: b[1], PeakEvent: -1}
		if names != nil {
			st.Name = names[i]
		}
		st.StartBytes = live.at(d, b[0]-1)
		st.EndBytes = live.at(d, b[1])
		st.PeakBytes, st.PeakEvent = st.StartBytes, b[0]-1
		cur := Forward
		st.PeakPhase = cur
		for k := b[0]; k <= b[1]; k++ {
			if ev[k].Action == snapshot.ActionAlloc {
				cur = max(cur, phase[k])
			}
			v := live.at(d, k)
			if v > st.PeakBytes {
				st.PeakBytes, st.PeakEvent, st.PeakPhase = v, k, cur
			}
			if ev[k].Action == snapshot.ActionAlloc {
				st.PhaseEndBytes[cur], st.HasPhase[cur] = v, true
			}
		}
		if ev[b[0]].Flags&snapshot.FlagHasTime != 0 {
			st.TimeUS = ev[b[0]].TimeUS
			st.DurationUS = ev[b[1]].TimeUS - ev[b[0]].TimeUS
		}
		r.Steps = append(r.Steps, st)
	}
	r.findLeak(d, live)
	return r, nil
}

// annotated returns the event ranges of START/END annotations whose name
// starts with prefix on device d.
func annotated(s *snapshot.Snapshot, d int, ev []snapshot.Event, prefix string) (bounds [][2]int, names []string, src Source) {
	rs := s.AnnotationSpans(d, prefix)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].StartUS < rs[j].StartUS })
	for _, r := range rs {
		first := sort.Search(len(ev), func(i int) bool { return ev[i].TimeUS >= r.StartUS })
		last := sort.Search(len(ev), func(i int) bool { return ev[i].TimeUS > r.EndUS }) - 1
		if first <= last {
			bounds = append(bounds, [2]int{first, last})
			names = append(names, r.Name)
		}
	}
	return bounds, names, FromProfilerStep
}

// optimizerSteps ends a step at the end of every optimizer.step
// annotation (Optimizer.step#AdamW.step); the first starts at the trace's
// start.
func optimizerSteps(s *snapshot.Snapshot, d int, ev []snapshot.Event) (bounds [][2]int, names []string, src Source) {
	var ends []int
	for _, a := range s.Annotations {
		if int(a.Device) == d && strings.HasPrefix(a.Name, "Optimizer.step#") && a.Stage == "END" {
			last := sort.Search(len(ev), func(i int) bool { return ev[i].TimeUS > a.TimeUS }) - 1
			if last >= 0 && (len(ends) == 0 || last > ends[len(ends)-1]) {
				ends = append(ends, last)
			}
		}
	}
	first := 0
	for i, e := range ends {
		bounds = append(bounds, [2]int{first, e})
		names = append(names, fmt.Sprintf("step %d (to optimizer.step end)", i))
		first = e + 1
	}
	return bounds, names, FromOptimizer
}

// pattern finds steps without annotations: a training loop allocates at
// the same sites every step. For each candidate step count c (how often
// some stack is allocated), the stack allocated first among those
// allocated c times marks step starts; candidates are tried by how many
// allocations they explain — stacks allocated a multiple of c times, the
// same number of times in every step (per-layer sites also fit the true
// count, once-per-step sites do not fit a per-layer count) — and the
// first that ok accepts wins. Without one, the whole trace is one step.
func pattern(ev []snapshot.Event, ok func([][2]int) bool) ([][2]int, Source) {
	count := map[snapshot.StackID]int{}
	first := map[snapshot.StackID]int{}
	for i := range ev {
		if ev[i].Action == snapshot.ActionAlloc && ev[i].Stack != snapshot.NoStack {
			if count[ev[i].Stack] == 0 {
				first[ev[i].Stack] = i
			}
			count[ev[i].Stack]++
		}
	}
	// Candidates: the counts shared by the most stacks.
	sites := map[int]int{}
	for _, c := range count {
		if c >= 2 {
			sites[c]++
		}
	}
	var cands []int
	for c := range sites {
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b int) int {
		if sites[a] != sites[b] {
			return sites[b] - sites[a]
		}
		return a - b
	})
	cands = cands[:min(len(cands), 16)]
	type split struct {
		bounds [][2]int
		score  int
	}
	var splits []split
	for _, c := range cands {
		marker, at := snapshot.NoStack, len(ev)
		for st, n := range count {
			if n == c && first[st] < at {
				marker, at = st, first[st]
			}
		}
		var starts []int
		for i := range ev {
			if ev[i].Action == snapshot.ActionAlloc && ev[i].Stack == marker {
				starts = append(starts, i)
			}
		}
		var bounds [][2]int
		for i, s := range starts {
			end := len(ev) - 1
			if i+1 < len(starts) {
				end = starts[i+1] - 1
			}
			bounds = append(bounds, [2]int{s, end})
		}
		splits = append(splits, split{bounds, fit(ev, count, starts)})
	}
	slices.SortStableFunc(splits, func(a, b split) int { return b.score - a.score })
	for _, sp := range splits {
		if sp.score > 0 && ok(sp.bounds) {
			return sp.bounds, FromPattern
		}
	}
	return [][2]int{{0, len(ev) - 1}}, FromWholeTrace
}

// returnsToBaseline tells training steps from repeated blocks inside one
// pass (the layers of a forward): between the starts of consecutive steps
// after the first, live memory grows, in the median, by less than half of what a step
// allocates and frees (its peak over its start). A leak grows by far less
// than that; the layers of a forward keep most of what they allocate.
func returnsToBaseline(d *analysis.Device, live *totals, bounds [][2]int) bool {
	if len(bounds) < 2 {
		return false
	}
	var growth, transient []int64
	for i, b := range bounds {
		start := int64(live.at(d, b[0]-1))
		peak := start
		for k := b[0]; k <= b[1]; k++ {
			peak = max(peak, int64(live.at(d, k)))
		}
		transient = append(transient, peak-start)
		if i > 0 && i+1 < len(bounds) { // step 0 is warm-up (optimizer state)
			growth = append(growth, int64(live.at(d, bounds[i+1][0]-1))-start)
		}
	}
	if len(growth) == 0 {
		return true // two steps: nothing to compare after the warm-up
	}
	slices.Sort(growth)
	slices.Sort(transient)
	return 2*growth[len(growth)/2] < transient[len(transient)/2]
}

// fit counts the allocations whose stack occurs the same number of times
// in every step when steps start at starts.
func fit(ev []snapshot.Event, count map[snapshot.StackID]int, starts []int) int {
	c := len(starts)
	per := map[snapshot.StackID][]int{}
	step := -1
	for i := range ev {
		for step+1 < c && starts[step+1] <= i {
			step++
		}
		st := ev[i].Stack
		if step < 0 || ev[i].Action != snapshot.ActionAlloc || count[st]%c != 0 {
			continue
		}
		if per[st] == nil {
			per[st] = make([]int, c)
		}
		per[st][step]++
	}
	score := 0
	for st, n := range per {
		even := true
		for _, k := range n {
			even = even && k == count[st]/c
		}
		if even {
			score += count[st]
		}
	}
	return score
}

// phases classifies each alloc event by its stack: optimizer code
// (torch/optim), autograd's backward, else forward.
func phases(s *snapshot.Snapshot, ev []snapshot.Event) []Phase {
	byStack := map[snapshot.StackID]Phase{}
	out := make([]Phase, len(ev))
	for i := range ev {
		if ev[i].Action != snapshot.ActionAlloc {
			continue
		}
		p, ok := byStack[ev[i].Stack]
		if !ok {
			p = stackPhase(s, ev[i].Stack)
			byStack[ev[i].Stack] = p
		}
		out[i] = p
	}
	return out
}

func stackPhase(s *snapshot.Snapshot, st snapshot.StackID) Phase {
	backward := false
	for _, id := range s.StackFrames(st) {
		if id < 0 || int(id) >= len(s.Frames) {
			continue
		}
		f := &s.Frames[id]
		fn := strings.ReplaceAll(f.Filename, `\`, "/")
		switch {
		case strings.Contains(fn, "torch/optim/") || strings.HasPrefix(f.Name, "Optimizer.step") || strings.Contains(f.Name, "optimizer_step"):
			return Optimizer
		case strings.Contains(fn, "torch/autograd/") || f.Name == "backward" && strings.HasSuffix(fn, "_tensor.py") ||
			strings.Contains(f.Name, "autograd::Engine") || strings.Contains(f.Name, "Backward0"):
			backward = true
		}
	}
	if backward {
		return Backward
	}
	return Forward
}

// totals is the Active Memory Timeline's live total after every action.
type totals struct {
	init  uint64
	after []uint64
}

func liveTotals(d *analysis.Device) *totals {
	lt := d.Active
	n := len(lt.Events)
	delta := make([]int64, n+1)
	t := &totals{after: make([]uint64, n)}
	for i := range lt.Len() {
		it := lt.Item(i)
		if it.Born < 0 {
			t.init += it.Size
		} else {
			delta[it.Born] += int64(it.Size)
		}
		if int(it.Died) < n {
			delta[it.Died] -= int64(it.Size)
		}
	}
	cur := int64(t.init)
	for k := range n {
		cur += delta[k]
		t.after[k] = uint64(max(cur, 0))
	}
	return t
}

// at is the live total after raw event i (-1: before the trace).
func (t *totals) at(d *analysis.Device, i int) uint64 {
	k := d.Active.ActionAtEvent(i)
	if k < 0 {
		return t.init
	}
	return t.after[k]
}

// findLeak compares live memory at the start of steps 1.. (and after the
// last step): growth at every step is a leak; the sites are those whose
// live bytes grew between the first and last compared moments.
func (r *Report) findLeak(d *analysis.Device, live *totals) {
	if len(r.Steps) < 2 {
		return
	}
	var points []int // raw events after which to compare
	var vals []uint64
	for _, st := range r.Steps[1:] {
		points = append(points, st.First-1)
		vals = append(vals, st.StartBytes)
	}
	last := r.Steps[len(r.Steps)-1]
	points = append(points, last.Last)
	vals = append(vals, last.EndBytes)
	if len(vals) < 3 {
		return
	}
	grew := true
	for i := 1; i < len(vals); i++ {
		grew = grew && vals[i] > vals[i-1]
	}
	r.GrowthPerStep = (int64(vals[len(vals)-1]) - int64(vals[0])) / int64(len(vals)-1)
	r.Leak = grew
	if !grew {
		return
	}
	a, err := d.Resolve(fmt.Sprintf("e%d", max(points[0], 0)))
	if err != nil {
		return
	}
	b, err := d.Resolve(fmt.Sprintf("e%d", points[len(points)-1]))
	if err != nil {
		return
	}
	pa, pb := d.LiveProfile(a).Fold(2, 0), d.LiveProfile(b).Fold(2, 0)
	bytes := map[string]int64{}
	frames := map[string][]string{}
	for _, x := range []struct {
		p    *analysis.Profile
		sign int64
	}{{pa, -1}, {pb, 1}} {
		for i := range x.p.Samples {
			smp := &x.p.Samples[i]
			k := x.p.Key(smp)
			bytes[k] += x.sign * int64(smp.Bytes)
			if frames[k] == nil {
				frames[k] = x.p.FrameStrings(smp)
			}
		}
	}
	for k, v := range bytes {
		if v > 0 {
			r.Sites = append(r.Sites, Growth{Frames: frames[k], Bytes: v})
		}
	}
	slices.SortFunc(r.Sites, func(x, y Growth) int {
		if x.Bytes != y.Bytes {
			return int(sign(y.Bytes - x.Bytes))
		}
		return strings.Compare(strings.Join(x.Frames, ";"), strings.Join(y.Frames, ";"))
	})
}

func sign(v int64) int64 {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}
