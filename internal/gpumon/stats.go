package gpumon

import (
	"sort"
	"strconv"
	"time"
)

// Interval is one device's memory over one report period: the peak since
// the last report (the reset semantics of a training-side monitor that calls
// torch.cuda.reset_peak_memory_stats after each report), the minimum and the
// mean of the samples taken in the period.
type Interval struct {
	Device   Device // identity and the last sample's figures
	Start    time.Time
	End      time.Time
	Samples  int
	Peak     uint64
	PeakTime time.Time
	Min      uint64
	Mean     uint64
	Procs    []ProcPeak // by peak, largest first
}

// ProcPeak is a process's largest memory over an interval.
type ProcPeak struct {
	PID     int
	Command string
	Peak    int64 // -1 when the driver never gave the process's memory
}

// Stats accumulates samples into the current interval until Report.
type Stats struct {
	start time.Time
	devs  map[string]*devAcc
	order []string // first-seen order, so reports list devices stably
}

type devAcc struct {
	dev      Device
	n        int
	sum      float64
	peak     uint64
	peakTime time.Time
	min      uint64
	procs    map[int]*ProcPeak
}

// NewStats starts the first interval at start.
func NewStats(start time.Time) *Stats {
	return &Stats{start: start, devs: map[string]*devAcc{}}
}

// DeviceKey names a device across samples: its UUID, or index and MIG
// instance when the driver gave no UUID.
func DeviceKey(d Device) string {
	if d.UUID != "" {
		return d.UUID
	}
	return strconv.Itoa(d.Index) + "/" + strconv.Itoa(d.MIG)
}

// Add counts one sample. Devices without memory figures are listed but
// do not move the statistics.
func (s *Stats) Add(smp Sample) {
	for _, d := range smp.Devices {
		k := DeviceKey(d)
		a := s.devs[k]
		if a == nil {
			a = &devAcc{procs: map[int]*ProcPeak{}}
			s.devs[k] = a
			s.order = append(s.order, k)
		}
		a.dev = d
		if !d.MemKnown {
			continue
		}
		if a.n == 0 || d.Used > a.peak {
			a.peak, a.peakTime = d.Used, smp.Time
		}
		if a.n == 0 || d.Used < a.min {
			a.min = d.Used
		}
		a.n++
		a.sum += float64(d.Used)
	}
	for _, p := range smp.Procs {
		a := s.devs[procDeviceKey(smp.Devices, p)]
		if a == nil {
			continue
		}
		pp := a.procs[p.PID]
		if pp == nil {
			pp = &ProcPeak{PID: p.PID, Command: p.Command, Peak: p.Used}
			a.procs[p.PID] = pp
		}
		if p.Used > pp.Peak {
			pp.Peak = p.Used
		}
	}
}

// procDeviceKey finds the device a process runs on: by UUID when the
// process names one (MIG instances share an index), else by index.
func procDeviceKey(devs []Device, p Process) string {
	for _, d := range devs {
		if p.UUID != "" && d.UUID == p.UUID {
			return DeviceKey(d)
		}
	}
	for _, d := range devs {
		if d.Index == p.Device && (p.UUID == "" || d.MIG < 0) {
			return DeviceKey(d)
		}
	}
	return ""
}

// Current returns the statistics of the interval so far, without ending it.
func (s *Stats) Current(now time.Time) []Interval {
	out := make([]Interval, 0, len(s.order))
	for _, k := range s.order {
		a := s.devs[k]
		iv := Interval{Device: a.dev, Start: s.start, End: now, Samples: a.n, Peak: a.peak, PeakTime: a.peakTime, Min: a.min}
		if a.n > 0 {
			iv.Mean = uint64(a.sum/float64(a.n) + 0.5)
		}
		for _, p := range a.procs {
			iv.Procs = append(iv.Procs, *p)
		}
		sort.Slice(iv.Procs, func(i, j int) bool {
			if iv.Procs[i].Peak != iv.Procs[j].Peak {
				return iv.Procs[i].Peak > iv.Procs[j].Peak
			}
			return iv.Procs[i].PID < iv.Procs[j].PID
		})
		out = append(out, iv)
	}
	return out
}

// Report ends the current interval at now, returns its statistics and
// starts the next one: the next report's peak is the peak since this one.
func (s *Stats) Report(now time.Time) []Interval {
	out := s.Current(now)
	for _, k := range s.order {
		old := s.devs[k]
		s.devs[k] = &devAcc{dev: old.dev, procs: map[int]*ProcPeak{}}
	}
	s.start = now
	return out
}
