package web

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// View names, as used in URLs and the --view flag.
const (
	ViewActive   = "active"   // Active Memory Timeline
	ViewPrivate  = "private"  // Allocated Memory (incl. Private Pools)
	ViewSegments = "segments" // Active Cached Segment Timeline
	ViewState    = "state"    // Allocator State History
	ViewSettings = "settings" // Allocator Settings
)

// DefaultDetail is the default cap on polygons per window
// (replay.QueryOptions.MaxPolygons): past it the smallest visible
// allocations are left to the grey total band.
const DefaultDetail = 15000

// kindOf maps a timeline view to replay's kind.
func kindOf(view string) replay.Kind {
	switch view {
	case ViewPrivate:
		return replay.KindActiveWithPools
	case ViewSegments:
		return replay.KindSegments
	}
	return replay.KindActive
}

func isTimeline(view string) bool {
	return view == ViewActive || view == ViewPrivate || view == ViewSegments
}

// timeline is one replay.Timeline plus the x axes the page can use. The
// "event" axis is memory_viz's own x axis, the timestep; the "time" axis
// maps timesteps to time_us. Both are computed on first use: only
// markers, curves and the time axis need them, never the first paint.
type timeline struct {
	snap   *snapshot.Snapshot
	device int
	view   string
	tl     *replay.Timeline

	axisOnce sync.Once
	// vizStep is the timestep at which each memory_viz event happens.
	vizStep  *stepAxis
	timeOnce sync.Once
	// stepTime[t] is time_us at timestep t (len Timesteps()+1), nil when
	// the trace has no times. It is made when the time axis is first
	// used, not with vizStep: a float64 per timestep was 75 MB of the
	// 1 GB tile's server, for a page that shows the event axis.
	stepTime []float64
	// indexPause sets the pause of tl's index build once, and
	// firstAnswered is set once the first window is answered
	// (beforeWindow, afterWindow).
	indexPause    sync.Once
	firstAnswered atomic.Bool
	// drawn is closed once the page has drawn the file's first view
	// (file.markDrawn; nil: no page waits), drawnWait bounds the wait for
	// it (afterWindow).
	drawn     <-chan struct{}
	drawnWait time.Duration
	// slides says the timeline's windows are point-heavy: they are
	// answered as slides where the reader takes them (window).
	slides atomic.Bool
}

// newTimeline builds the timeline of view with build, or when it is nil
// with replay.NewTimelineFed and fed (which may be nil).
func newTimeline(s *snapshot.Snapshot, device int, view string, build timelineBuilder, fed *replay.FedLayout) *timeline {
	if build == nil {
		return &timeline{snap: s, device: device, view: view, tl: replay.NewTimelineFed(s, device, kindOf(view), fed)}
	}
	return &timeline{snap: s, device: device, view: view, tl: build(s, device, kindOf(view))}
}

// steps is the x extent in timesteps (at least 1 so that a window exists).
func (t *timeline) steps() float64 { return float64(max(t.tl.Timesteps(), 1)) }

// axes computes vizStep (with vizSteps, or from the elements for the
// private-pools view).
func (t *timeline) axes() {
	t.axisOnce.Do(func() {
		var viz []int32
		if t.device >= 0 && t.device < len(t.snap.Traces) {
			viz = t.snap.Traces[t.device].Viz
		}
		t.vizStep = nil
		if t.view != ViewPrivate || t.tl.Envelopes() == 0 {
			steps, total, ok := vizSteps(t.snap, t.device, t.view == ViewSegments, t.tl)
			// With no actions memory_viz draws the dump as one timestep
			// of its own, an action with no event.
			if ok && (int(total) == t.tl.Timesteps() || total == 0) {
				t.vizStep = steps
			}
		}
		if t.vizStep == nil {
			t.vizStep = &stepAxis{plain: t.stepsFromElements(viz)}
		}
	})
}

// timeAxis computes stepTime (after vizStep), linear between events.
func (t *timeline) timeAxis() {
	t.axes()
	t.timeOnce.Do(func() {
		var events []snapshot.Event
		var viz []int32
		if t.device >= 0 && t.device < len(t.snap.Traces) {
			events = t.snap.Traces[t.device].Events
			viz = t.snap.Traces[t.device].Viz
		}
		hasTime := len(viz) > 0
		for _, r := range viz {
			if events[r].Flags&snapshot.FlagHasTime == 0 {
				hasTime = false
				break
			}
		}
		if !hasTime {
			return
		}
		// Known points (timestep, time) at events, linear in between.
		n := t.tl.Timesteps() + 1
		st := make([]float64, n)
		known := make([]bool, n)
		for i, r := range viz {
			s := int(t.vizStep.at(i))
			if s < n && !known[s] {
				st[s], known[s] = float64(events[r].TimeUS), true
			}
		}
		last := -1
		for s := 0; s < n; s++ {
			if !known[s] {
				continue
			}
			if last < 0 {
				for k := 0; k < s; k++ {
					st[k] = st[s]
				}
			} else {
				for k := last + 1; k < s; k++ {
					st[k] = st[last] + (st[s]-st[last])*float64(k-last)/float64(s-last)
				}
			}
			if last >= 0 && st[s] < st[last] {
				st[s] = st[last] // keep the axis monotone
			}
			last = s
		}
		if last < 0 {
			return
		}
		for k := last + 1; k < n; k++ {
			st[k] = st[last]
		}
		t.stepTime = st
	})
}

// stepsFromElements derives the event timesteps from the elements'
// lifetimes (slow: it formats every element; used for the private-pools
// view, whose clock also moves for pool envelopes): an element starts at
// its alloc event's timestep and its free event happens one timestep
// before its polygon closes. Other events happen at the timestep of the
// next action.
func (t *timeline) stepsFromElements(viz []int32) []int32 {
	rawStep := make(map[int32]int32, 2*t.tl.Len())
	for i := 0; i < t.tl.Len(); i++ {
		e := t.tl.Element(i)
		if e.AllocEvent >= 0 {
			rawStep[int32(e.AllocEvent)] = int32(e.Start)
		}
		if e.FreeEvent >= 0 {
			rawStep[int32(e.FreeEvent)] = int32(max(e.End-1, e.Start))
		}
	}
	out := make([]int32, len(viz))
	next := int32(t.tl.Timesteps())
	for i := len(viz) - 1; i >= 0; i-- {
		if s, ok := rawStep[viz[i]]; ok {
			next = s
		}
		out[i] = next
	}
	return out
}

// hasTime says whether the time axis exists.
func (t *timeline) hasTime() bool {
	t.timeAxis()
	return t.stepTime != nil
}

// xRange returns the full x extent in a mode.
func (t *timeline) xRange(mode string) (float64, float64) {
	if mode == "time" && t.hasTime() {
		lo, hi := t.stepTime[0], t.stepTime[len(t.stepTime)-1]
		if hi <= lo {
			hi = lo + 1
		}
		return lo, hi
	}
	return 0, t.steps()
}

// toStep converts an x of a mode to a (fractional) timestep.
func (t *timeline) toStep(x float64, mode string) float64 {
	if mode != "time" || !t.hasTime() {
		return x
	}
	st := t.stepTime
	i := sort.SearchFloat64s(st, x) // first st[i] >= x
	if i <= 0 {
		return 0
	}
	if i >= len(st) {
		return float64(len(st) - 1)
	}
	a, b := st[i-1], st[i]
	if b <= a {
		return float64(i)
	}
	return float64(i-1) + (x-a)/(b-a)
}

// fromStep converts a (fractional) timestep to an x of a mode.
func (t *timeline) fromStep(s float64, mode string) float64 {
	if mode != "time" || !t.hasTime() {
		return s
	}
	st := t.stepTime
	if s <= 0 {
		return st[0]
	}
	if s >= float64(len(st)-1) {
		return st[len(st)-1]
	}
	i := int(s)
	return st[i] + (st[i+1]-st[i])*(s-float64(i))
}
