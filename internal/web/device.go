package web

import (
	"encoding/binary"
	"math"
	"sort"
	"sync"

	"github.com/gpumem/gpumem/snapshot"
)

// deviceData is what the server computes once per (file, device) besides the
// timelines: totals curves, markers and state-history checkpoints.
type deviceData struct {
	snap   *snapshot.Snapshot
	device int
	events []snapshot.Event
	viz    []int32 // viz index -> raw event index
	// Totals after each viz event, and before the first one.
	Allocated, Reserved, Active []float64
	Init                        [3]float64
	HasTime                     bool

	stateOnce sync.Once
	history   *stateHistory
}

func newDeviceData(s *snapshot.Snapshot, device int) *deviceData {
	d := &deviceData{snap: s, device: device}
	if device >= 0 && device < len(s.Traces) {
		d.events = s.Traces[device].Events
		d.viz = s.Traces[device].Viz
		if d.viz == nil {
			d.viz = make([]int32, len(d.events))
			for i := range d.viz {
				d.viz[i] = int32(i)
			}
		}
	}
	d.HasTime = len(d.viz) > 0
	for _, r := range d.viz {
		if d.events[r].Flags&snapshot.FlagHasTime == 0 {
			d.HasTime = false
			break
		}
	}
	d.computeCurves()
	return d
}

// deltas returns how one event changes allocated, reserved and active bytes
// (requested sizes, as the trace records them).
func deltas(e *snapshot.Event) (alloc, res, act float64) {
	z := float64(e.Size)
	switch e.VizAction() {
	case snapshot.ActionAlloc:
		return z, 0, z
	case snapshot.ActionFree:
		return -z, 0, -z
	case snapshot.ActionFreeRequested:
		return -z, 0, 0
	case snapshot.ActionFreeCompleted:
		return 0, 0, -z
	case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
		return 0, z, 0
	case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
		return 0, -z, 0
	}
	return 0, 0, 0
}

// computeCurves derives the totals over time: the snapshot gives the values
// at the end, and undoing the trace gives them at its start.
func (d *deviceData) computeCurves() {
	s := d.snap
	var endAlloc, endRes, endAct float64
	for i := range s.Segments {
		sg := &s.Segments[i]
		if int(sg.Device) != d.device {
			continue
		}
		endRes += float64(sg.TotalSize)
		for _, b := range s.SegmentBlocks(i) {
			req := float64(b.RequestedSize)
			if !b.HasRequestedSize {
				req = float64(b.Size)
			}
			switch b.State {
			case snapshot.BlockActiveAllocated:
				endAlloc += req
				endAct += req
			case snapshot.BlockActivePendingFree:
				endAct += req
			}
		}
	}
	var na, nr, nc float64
	for _, r := range d.viz {
		a, rs, c := deltas(&d.events[r])
		na, nr, nc = na+a, nr+rs, nc+c
	}
	a, r, c := endAlloc-na, endRes-nr, endAct-nc
	d.Init = [3]float64{a, r, c}
	d.Allocated = make([]float64, len(d.viz))
	d.Reserved = make([]float64, len(d.viz))
	d.Active = make([]float64, len(d.viz))
	for i, raw := range d.viz {
		da, dr, dc := deltas(&d.events[raw])
		a, r, c = a+da, r+dr, c+dc
		d.Allocated[i], d.Reserved[i], d.Active[i] = a, r, c
	}
}

// eventX returns the x coordinate of viz event i in a mode.
func (d *deviceData) eventX(i int, mode string) float64 {
	if mode == "time" && d.HasTime {
		return float64(d.events[d.viz[i]].TimeUS)
	}
	return float64(i)
}

// curves encodes, per pixel column of [x0,x1), the max of allocated,
// reserved and active: Float32[3*w] (allocated, then reserved, then active),
// carrying the last value forward into columns with no event.
func (d *deviceData) curves(x0, x1 float64, w int, mode string) []byte {
	w = min(max(w, 1), 16384)
	out := make([]float32, 3*w)
	n := len(d.viz)
	if !(x1 > x0) {
		x1 = x0 + 1
	}
	span := x1 - x0
	// first event with x >= x0
	i := sort.Search(n, func(i int) bool { return d.eventX(i, mode) >= x0 })
	cur := d.Init
	if i > 0 {
		cur = [3]float64{d.Allocated[i-1], d.Reserved[i-1], d.Active[i-1]}
	}
	for c := 0; c < w; c++ {
		end := x0 + span*float64(c+1)/float64(w)
		m := cur
		for i < n && d.eventX(i, mode) < end {
			cur = [3]float64{d.Allocated[i], d.Reserved[i], d.Active[i]}
			for k := range m {
				m[k] = max(m[k], cur[k])
			}
			i++
		}
		for k := 0; k < 3; k++ {
			out[k*w+c] = float32(m[k])
		}
	}
	b := make([]byte, 0, 4*len(out))
	for _, v := range out {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// marker is a point of interest on the time axis.
type marker struct {
	Event int     `json:"event"` // viz index (-1 if none)
	Time  float64 `json:"time"`  // time_us (0 if unknown)
	Kind  string  `json:"kind"`  // "oom", "snapshot", "annotation"
	Label string  `json:"label"`
}

func (d *deviceData) markers() []marker {
	var out []marker
	for i, r := range d.viz {
		e := &d.events[r]
		switch e.Action {
		case snapshot.ActionOOM:
			out = append(out, marker{i, float64(e.TimeUS), "oom", "OOM: requested " + formatSize(float64(e.Size), false)})
		case snapshot.ActionSnapshot:
			out = append(out, marker{i, float64(e.TimeUS), "snapshot", "snapshot"})
		}
	}
	for _, a := range d.snap.Annotations {
		if int(a.Device) != d.device {
			continue
		}
		ev := -1
		if d.HasTime {
			ev = sort.Search(len(d.viz), func(i int) bool { return d.events[d.viz[i]].TimeUS >= a.TimeUS })
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
