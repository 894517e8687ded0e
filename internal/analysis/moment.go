// Package analysis answers the questions users open a snapshot with — what
// is live at a moment and who allocated it, which memory category it is,
// how fragmented the cache is, why an OOM happened — from the replay
// engine's timelines, so that every figure agrees with the viewer's.
package analysis

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// Device is one device of a snapshot with the replay data every question
// about it shares: the Active Memory Timeline's allocations and the
// Active Cached Segment Timeline's segments, with their lifetimes.
type Device struct {
	S        *snapshot.Snapshot
	Index    int
	Active   *replay.Lifetimes
	Segments *replay.Lifetimes

	segs     []int32 // the device's dump segments by address
	catsOnce sync.Once
	cats     []Category
	rules    []Rule
	user     *UserRules // SetUserRules
	userIdx  []int16    // per item, the user rule that set its category (-1: none)
	// classified is set once the categories are made.
	classified atomic.Bool
	pause      func() // see NewDevicePaused

	freeOwnOnce sync.Once
	freeOwn     bool // see freesHaveOwnStacks
}

// NewDevice replays device d of s. O(n) for n trace events after the
// element lists (the work memory_viz's peak needs anyway).
func NewDevice(s *snapshot.Snapshot, d int) *Device { return NewDevicePaused(s, d, nil) }

// NewDevicePaused is NewDevice with pause (which may be nil) called now
// and then, by it and by the answers the device computes later, about
// every millisecond of work; pause may block. A viewer computes its
// answers in the background and pauses them while the user waits for
// something else: on two cores, the peak answer of a 1 GB snapshot made
// each state step 1.5 times slower.
func NewDevicePaused(s *snapshot.Snapshot, d int, pause func()) *Device {
	return NewDevicePausedWith(s, d, nil, pause)
}

// NewDevicePausedWith is NewDevicePaused with active, when not nil, the
// Active Memory Timeline's lifetimes of device d made already (a
// viewer's from the timeline it draws: replay.Timeline.Lifetimes).
func NewDevicePausedWith(s *snapshot.Snapshot, d int, active *replay.Lifetimes, pause func()) *Device {
	if active == nil {
		active = replay.NewLifetimesPaused(s, d, replay.KindActive, pause)
	}
	dv := &Device{
		S: s, Index: d, pause: pause,
		Active:   active,
		Segments: replay.NewLifetimesPaused(s, d, replay.KindSegments, pause),
	}
	dv.segs = replay.DeviceSegments(s, d)
	return dv
}

// pauseAt calls the pause function at every 65,536th i.
func (d *Device) pauseAt(i int) {
	if d.pause != nil && i&(1<<16-1) == 0 {
		d.pause()
	}
}

// Events returns the device's raw trace events.
func (d *Device) Events() []snapshot.Event {
	if d.Index < 0 || d.Index >= len(d.S.Traces) {
		return nil
	}
	return d.S.Traces[d.Index].Events
}

// Moment is a point of a device's trace: the state after one event.
type Moment struct {
	// Spec is how the moment was asked for: peak, reserved-peak, end, eN
	// or a time such as 12.5ms.
	Spec string
	// Action is the Active Memory Timeline action after which the moment
	// lies (-1: before the first).
	Action int
	// Event is the raw trace event index (into device_traces[d]) after
	// which the moment lies; -1 before the trace.
	Event int
	// TimeUS is that event's time_us (µs since the Unix epoch) when HasTime.
	TimeUS  int64
	HasTime bool
	// Timestep is memory_viz's timestep of the moment on the Active Memory
	// Timeline with every allocation drawn.
	Timestep int
}

// Resolve turns a moment spec into a Moment: "peak" (the Active Memory
// Timeline's peak, the first time it is reached), "reserved-peak" (the
// Active Cached Segment Timeline's peak), "end" (the dump), "eN" (after raw
// trace event N, 0-based) or a duration from the first event's time_us
// ("12.5ms", "3s", "800us"). A moment outside the trace is an error naming
// the valid range.
func (d *Device) Resolve(spec string) (Moment, error) {
	ev := d.Events()
	m := Moment{Spec: spec}
	switch {
	case spec == "" || spec == "peak":
		m.Spec = "peak"
		m.Action = d.Active.PeakAction
		m.Event = d.eventOfAction(d.Active, m.Action)
	case spec == "reserved-peak":
		m.Event = d.eventOfAction(d.Segments, d.Segments.PeakAction)
		m.Action = d.Active.ActionAtEvent(m.Event)
	case spec == "end":
		m.Event = len(ev) - 1
		m.Action = len(d.Active.Events) - 1
	case len(spec) > 1 && spec[0] == 'e' && spec[1] >= '0' && spec[1] <= '9':
		n, err := strconv.Atoi(spec[1:])
		if err != nil || n >= len(ev) {
			return m, d.rangeError(spec)
		}
		m.Event = n
		m.Action = d.Active.ActionAtEvent(n)
	default:
		us, err := parseDurationUS(spec)
		if err != nil {
			return m, fmt.Errorf("--at %q: want peak, reserved-peak, end, eN (a trace event) or a time from the trace start such as 12.5ms", spec)
		}
		t0, t1, ok := timeSpan(ev)
		if !ok {
			return m, fmt.Errorf("--at %s: device %d's trace has no time_us; use eN (0..%d)", spec, d.Index, len(ev)-1)
		}
		if us < 0 || t0+us > t1 {
			return m, d.rangeError(spec)
		}
		// The last event at or before the time.
		n := sort.Search(len(ev), func(i int) bool {
			return ev[i].Flags&snapshot.FlagHasTime != 0 && ev[i].TimeUS > t0+us
		}) - 1
		m.Event = n
		m.Action = d.Active.ActionAtEvent(n)
	}
	if m.Event >= 0 && m.Event < len(ev) && ev[m.Event].Flags&snapshot.FlagHasTime != 0 {
		m.TimeUS, m.HasTime = ev[m.Event].TimeUS, true
	}
	if m.Action >= 0 && m.Action < len(d.Active.Events) {
		m.Timestep = int(d.Active.Timestep(m.Action))
	}
	return m, nil
}

// MomentAtTimestep is the moment shown at memory_viz timestep t of the
// Active Memory Timeline (the viewer's x axis): after the last action at
// or before t.
func (d *Device) MomentAtTimestep(t float64) Moment {
	lt := d.Active
	k := sort.Search(len(lt.Events), func(k int) bool { return float64(lt.Timestep(k)) > t }) - 1
	m := Moment{Spec: "timestep " + strconv.FormatFloat(math.Floor(max(t, 0)), 'f', -1, 64), Action: k, Event: d.eventOfAction(d.Active, k)}
	ev := d.Events()
	if m.Event >= 0 && ev[m.Event].Flags&snapshot.FlagHasTime != 0 {
		m.TimeUS, m.HasTime = ev[m.Event].TimeUS, true
	}
	if k >= 0 {
		m.Timestep = int(lt.Timestep(k))
	}
	return m
}

// CheckMomentSpec reports whether spec is a moment Resolve understands
// (peak, reserved-peak, end, eN, a time such as 12.5ms) without looking at
// a trace: a malformed one is a usage mistake, one outside the trace is
// only found by Resolve.
func CheckMomentSpec(spec string) error {
	switch {
	case spec == "" || spec == "peak" || spec == "reserved-peak" || spec == "end":
		return nil
	case len(spec) > 1 && spec[0] == 'e' && spec[1] >= '0' && spec[1] <= '9':
		if _, err := strconv.Atoi(spec[1:]); err == nil {
			return nil
		}
		// A number too large is outside every trace, not malformed.
		if strings.Trim(spec[1:], "0123456789") == "" {
			return nil
		}
	default:
		if _, err := parseDurationUS(spec); err == nil {
			return nil
		}
	}
	return fmt.Errorf("--at %q: want peak, reserved-peak, end, eN (a trace event) or a time from the trace start such as 12.5ms", spec)
}

// eventOfAction is the raw event of action k of lt (-1 for k == -1).
func (d *Device) eventOfAction(lt *replay.Lifetimes, k int) int {
	if k < 0 || k >= len(lt.Events) {
		return -1
	}
	return int(lt.Events[k])
}

func (d *Device) rangeError(spec string) error {
	ev := d.Events()
	if len(ev) == 0 {
		return fmt.Errorf("--at %s: device %d has no trace events; only peak, reserved-peak and end are valid", spec, d.Index)
	}
	msg := fmt.Sprintf("--at %s is outside device %d's trace: valid events are e0..e%d", spec, d.Index, len(ev)-1)
	if t0, t1, ok := timeSpan(ev); ok {
		msg += fmt.Sprintf(", valid times 0us..%dus (%s)", t1-t0, FormatDurationUS(t1-t0))
	}
	return fmt.Errorf("%s", msg)
}

// timeSpan is the first and last time_us of the trace.
func timeSpan(ev []snapshot.Event) (t0, t1 int64, ok bool) {
	for i := range ev {
		if ev[i].Flags&snapshot.FlagHasTime != 0 {
			if !ok {
				t0, ok = ev[i].TimeUS, true
			}
			t1 = ev[i].TimeUS
		}
	}
	return t0, t1, ok
}

// parseDurationUS parses "12.5ms", "3s", "800us", "800µs" into µs.
func parseDurationUS(s string) (int64, error) {
	units := []struct {
		suffix string
		us     float64
	}{{"us", 1}, {"µs", 1}, {"ms", 1e3}, {"s", 1e6}, {"min", 60e6}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok && num != "" {
			if strings.HasSuffix(num, "m") || strings.HasSuffix(num, "u") || strings.HasSuffix(num, "µ") {
				continue // "ms" matched by "s"
			}
			v, err := strconv.ParseFloat(num, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, fmt.Errorf("bad time %q", s)
			}
			return int64(math.Round(v * u.us)), nil
		}
	}
	return 0, fmt.Errorf("bad time %q", s)
}

// FormatDurationUS prints µs as "812us", "12.5ms" or "3.20s".
func FormatDurationUS(us int64) string {
	switch {
	case us < 1000:
		return fmt.Sprintf("%dus", us)
	case us < 1000_000:
		return strconv.FormatFloat(float64(us)/1e3, 'f', -1, 64) + "ms"
	}
	return fmt.Sprintf("%.2fs", float64(us)/1e6)
}
