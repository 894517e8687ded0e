package web

import (
	"encoding/binary"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// deviceData is what the server computes once per (file, device) besides
// the timelines: totals curves and the state history, each on first use.
type deviceData struct {
	snap    *snapshot.Snapshot
	device  int
	events  []snapshot.Event
	viz     []int32 // viz index -> raw event index
	HasTime bool

	curves  lazy[*replay.Curves]
	history lazy[*stateHistory]
	dump    lazy[*stateJSON] // dumpState
	// dumpSrc is dumpSource's.
	dumpSrc     *replay.Dump
	dumpSrcOnce sync.Once
	warmed      sync.Once              // warmState started
	an          lazy[*analysis.Device] // categories, peak and OOM answers (answers.go)
	anMade      atomic.Pointer[analysis.Device]
	rules       *analysis.UserRules // serve --categories
	// userBusy pauses the state history's background build (see Store);
	// the analysis pauses too unless answerWaiting.
	userBusy, answerWaiting func() bool
	// userAnswered is the store's: the totals curves' build parks on it
	// while a window or a state step is answered (pauseCurves).
	userAnswered func(wanted func() bool)
	// activeTimeline returns the device's Active Memory Timeline when it
	// is built already, else nil (the store's builtTimeline).
	activeTimeline func() *replay.Timeline
	// curvesCallers counts the calls of totals under way: past the first
	// (the one building), a request waits for the curves. historyWanted
	// counts the requests in stateHist (stateHistFor).
	curvesCallers, historyWanted atomic.Int32
}

func newDeviceData(s *snapshot.Snapshot, device int) *deviceData {
	d := &deviceData{snap: s, device: device}
	if device >= 0 && device < len(s.Traces) {
		d.events = s.Traces[device].Events
		d.viz = s.Traces[device].Viz
	}
	// memory_viz's time axis needs every entry it shows timed: all of them
	// are when the whole trace is (TraceTimed, known after a decode).
	d.HasTime = len(d.viz) > 0
	if d.HasTime && !s.TraceTimed(device) {
		for _, r := range d.viz {
			if d.events[r].Flags&snapshot.FlagHasTime == 0 {
				d.HasTime = false
				break
			}
		}
	}
	return d
}

// analysisDevice returns the device's analysis, built on first use in
// the background at priority later (seconds on a big file).
func (d *deviceData) analysisDevice() (*analysis.Device, error) {
	build := func() (*analysis.Device, error) {
		dv, err := d.an.get(func() *analysis.Device {
			// The lifetimes of the timeline the page draws come from it
			// when it is built (it is, past the first paint): not a
			// second pairing and stack of every allocation.
			var active *replay.Lifetimes
			if d.activeTimeline != nil {
				if tl := d.activeTimeline(); tl != nil {
					active = tl.Lifetimes(d.pauseForUser)
				}
			}
			a := analysis.NewDevicePausedWith(d.snap, d.device, active, d.pauseForUser)
			a.SetUserRules(d.rules)
			return a
		}, "analysing device %d", d.device)
		if err == nil {
			d.anMade.Store(dv)
		}
		return dv, err
	}
	if d.an.done.Load() {
		return build()
	}
	var dv *analysis.Device
	var err error
	inBackground(later, func() { dv, err = build() })
	return dv, err
}

// classifiedDevice is the device's analysis when its categories are made
// already, else nil: a hover does not wait for them.
func (d *deviceData) classifiedDevice() *analysis.Device {
	if dv := d.anMade.Load(); dv != nil && dv.Classified() {
		return dv
	}
	return nil
}

// pauseForUser returns once the user has paused (see userRequests): the
// answers computed from the analysis run in the background, and a state
// step or a zoom meanwhile took half as long again beside them. While an
// answer request is open (the user waits on it too, see Server.answer) it
// does not pause.
func (d *deviceData) pauseForUser() {
	for d.userBusy != nil && d.userBusy() && (d.answerWaiting == nil || !d.answerWaiting()) {
		time.Sleep(2 * time.Millisecond)
	}
}

func (d *deviceData) totals() (*replay.Curves, error) {
	d.curvesCallers.Add(1)
	defer d.curvesCallers.Add(-1)
	return d.curves.get(func() *replay.Curves { return replay.NewCurvesPaused(d.snap, d.device, d.pauseCurves) },
		"computing the totals curves of device %d", d.device)
}

// pauseCurves is the totals curves' pause: their build (half a second
// of CPU on a 1 GB snapshot, requested by the page right after its first
// paint) parks while the server answers a window or a state step, unless
// another request waits for the curves. Parked, it holds no processor:
// running on at low priority it did, and a collection's stop-the-world
// phase, which must preempt it, waited while a loaded machine left its
// thread without a core (bench/RESULTS-web.md, #32 part 32e).
func (d *deviceData) pauseCurves() {
	if d.userAnswered != nil {
		d.userAnswered(func() bool { return d.curvesCallers.Load() > 1 })
	}
}

// curvesWindow encodes the allocated, reserved and active totals over the
// x window [x0, x1] of tl, downsampled to at most w buckets (the max of
// each bucket), as little-endian Float32: n, then x - x0 [n], allocated
// [n], reserved [n], active [n]. The first point is the value at x0.
func (d *deviceData) curvesWindow(tl *timeline, x0, x1 float64, w int, mode string) ([]byte, error) {
	w = min(max(w, 1), MaxWidth)
	c, err := d.totals()
	if err != nil {
		return nil, err
	}
	tl.axes()
	vs := tl.vizStep
	t0, t1 := tl.toStep(x0, mode), tl.toStep(x1, mode)
	v0 := vs.search(func(s int32) bool { return float64(s) >= t0 })
	v1 := vs.search(func(s int32) bool { return float64(s) > t1 })
	var xs []float64
	var vals [3][]float64
	add := func(x float64, t replay.Totals) {
		xs = append(xs, x-x0)
		vals[0] = append(vals[0], float64(t.Allocated))
		vals[1] = append(vals[1], float64(t.Reserved))
		vals[2] = append(vals[2], float64(t.Active))
	}
	before := -1
	if v0 < len(d.viz) {
		before = int(d.viz[v0]) - 1
	} else if len(d.viz) > 0 {
		before = int(d.viz[len(d.viz)-1])
	}
	add(x0, c.At(before))
	if v1 > v0 {
		r0, r1 := int(d.viz[v0]), int(d.viz[v1-1])+1
		ds := c.Downsample(r0, r1, w)
		for b := 0; b < ds.Buckets; b++ {
			raw := ds.Bounds[b]
			vi := sort.Search(len(d.viz), func(i int) bool { return d.viz[i] >= raw })
			vi = min(vi, vs.len()-1)
			x := tl.fromStep(float64(vs.at(vi)), mode)
			add(x, replay.Totals{Allocated: ds.AllocatedMax[b], Reserved: ds.ReservedMax[b], Active: ds.ActiveMax[b]})
		}
	}
	n := len(xs)
	add(x1, replay.Totals{Allocated: uint64(vals[0][n-1]), Reserved: uint64(vals[1][n-1]), Active: uint64(vals[2][n-1])})
	n++
	out := make([]byte, 0, 4*(1+4*n))
	put := func(v float64) { out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v))) }
	put(float64(n))
	for _, v := range xs {
		put(v)
	}
	for k := range vals {
		for _, v := range vals[k] {
			put(v)
		}
	}
	return out, nil
}

// marker is a point of interest on the x axis.
type marker struct {
	Event float64 `json:"event"` // timestep (-1 if none)
	Time  float64 `json:"time"`  // time_us (0 if unknown)
	Kind  string  `json:"kind"`  // "oom", "snapshot", "annotation"
	Label string  `json:"label"`
}

// markers lists OOMs, snapshot events and annotations at tl's timesteps.
func (d *deviceData) markers(tl *timeline) []marker {
	tl.axes()
	out := []marker{}
	for i, r := range d.viz {
		e := &d.events[r]
		switch e.Action {
		case snapshot.ActionOOM:
			out = append(out, marker{float64(tl.vizStep.at(i)), float64(e.TimeUS), "oom", "OOM: requested " + units.VizShort(e.Size)})
		case snapshot.ActionSnapshot:
			out = append(out, marker{float64(tl.vizStep.at(i)), float64(e.TimeUS), "snapshot", "snapshot"})
		}
	}
	for _, a := range d.snap.Annotations {
		if int(a.Device) != d.device {
			continue
		}
		ev := -1.0
		if d.HasTime {
			i := sort.Search(len(d.viz), func(i int) bool { return d.events[d.viz[i]].TimeUS >= a.TimeUS })
			if i < tl.vizStep.len() {
				ev = float64(tl.vizStep.at(i))
			}
		}
		label := a.Name
		if a.Stage != "" {
			label += " " + a.Stage
		}
		out = append(out, marker{ev, float64(a.TimeUS), "annotation", label})
	}
	if len(out) > 5000 {
		out = out[:5000]
	}
	return out
}
