package web

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/gpumem/gpumem/internal/gpumon"
)

// A gpumem watch log (JSONL) is drawn by its own page, static/watch.html,
// from GET /api/watch: memory over time per device and per process, report
// peaks and alerts. It shares nothing with the snapshot views but the
// server.

// maxWatchPoints bounds the points of one series sent to the page; longer
// series keep the largest sample of each time bucket, so peaks survive.
const maxWatchPoints = 3000

type watchLogs struct {
	mu   sync.Mutex
	logs []watchLogEntry
}

type watchLogEntry struct {
	name string
	log  *gpumon.Log
}

// AddWatchLogs reads the gpumem watch logs among paths (named *.jsonl, or
// starting with a watch record) into s and returns the other paths and
// how many logs it read.
func (s *Server) AddWatchLogs(paths []string) (rest []string, n int, err error) {
	for _, path := range paths {
		if path == "-" || !gpumon.IsLogFile(path) {
			rest = append(rest, path)
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, err
		}
		lg, err := gpumon.ReadLog(f, path)
		f.Close()
		if err != nil {
			return nil, 0, err
		}
		s.AddWatchLog(filepath.Base(path), lg)
		n++
	}
	return rest, n, nil
}

// AddWatchLog registers a gpumem watch log under a display name and
// returns its index for /api/watch?log=N.
func (s *Server) AddWatchLog(name string, lg *gpumon.Log) int {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	s.watch.logs = append(s.watch.logs, watchLogEntry{name, lg})
	return len(s.watch.logs) - 1
}

type watchJSON struct {
	Logs      []string          `json:"logs"`
	Name      string            `json:"name"`
	Start     time.Time         `json:"start"`
	Backend   string            `json:"backend"`
	Devices   []watchDeviceJSON `json:"devices"`
	Alerts    []watchAlertJSON  `json:"alerts"`
	Truncated bool              `json:"truncated"`
}

type watchDeviceJSON struct {
	GPU     int               `json:"gpu"`
	MIG     *int              `json:"mig,omitempty"`
	UUID    string            `json:"uuid"`
	Name    string            `json:"name"`
	Total   uint64            `json:"total"`
	T       []float64         `json:"t"` // seconds since Start
	Used    []uint64          `json:"used"`
	Samples int               `json:"samples"` // before downsampling
	Reports []watchReportJSON `json:"reports"`
	Procs   []watchProcJSON   `json:"procs"`
}

type watchReportJSON struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
	Peak  uint64  `json:"peak"`
	PeakT float64 `json:"peak_t"`
	Min   uint64  `json:"min"`
	Mean  uint64  `json:"mean"`
}

type watchProcJSON struct {
	PID  int       `json:"pid"`
	Cmd  string    `json:"cmd"`
	T    []float64 `json:"t"`
	Used []uint64  `json:"used"`
}

type watchAlertJSON struct {
	T       float64 `json:"t"`
	GPU     int     `json:"gpu"`
	MIG     *int    `json:"mig,omitempty"`
	Percent float64 `json:"percent"`
}

func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) {
	s.watch.mu.Lock()
	logs := append([]watchLogEntry(nil), s.watch.logs...)
	s.watch.mu.Unlock()
	n := 0
	if v := r.URL.Query().Get("log"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			writeErr(w, http.StatusBadRequest, "bad log %q: want a log number (0, 1, ...)", v)
			return
		}
	}
	if n >= len(logs) {
		writeErr(w, http.StatusNotFound, "no watch log %d", n)
		return
	}
	out := watchSeries(logs[n].name, logs[n].log)
	for _, l := range logs {
		out.Logs = append(out.Logs, l.name)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// watchSeries turns a log into the page's series.
func watchSeries(name string, lg *gpumon.Log) watchJSON {
	// Empty lists, not null, for the page.
	out := watchJSON{Name: name, Truncated: lg.TruncatedTail, Devices: []watchDeviceJSON{}, Alerts: []watchAlertJSON{}}
	var t0 time.Time
	for _, r := range lg.Samples {
		if t0.IsZero() || r.Time.Before(t0) {
			t0 = r.Time
		}
	}
	if len(lg.Starts) > 0 {
		out.Backend = lg.Starts[0].Backend
		if t0.IsZero() || lg.Starts[0].Time.Before(t0) {
			t0 = lg.Starts[0].Time
		}
	}
	out.Start = t0
	sec := func(t time.Time) float64 { return t.Sub(t0).Seconds() }

	type procKey struct {
		dev string
		pid int
	}
	devs := map[string]*watchDeviceJSON{}
	var order []string
	procs := map[procKey]*watchProcJSON{}
	var procOrder []procKey
	names := map[string]string{}
	for _, st := range lg.Starts {
		for _, d := range st.Devices {
			names[gpumon.DeviceKey(gpumon.Device{Index: d.GPU, UUID: d.UUID, MIG: migOrNone(d.MIG)})] = d.Name
		}
	}
	for _, r := range lg.Samples {
		d := r.Device()
		k := gpumon.DeviceKey(d)
		dj := devs[k]
		if dj == nil {
			dj = &watchDeviceJSON{GPU: d.Index, MIG: r.MIG, UUID: d.UUID, Name: names[k], Reports: []watchReportJSON{}, Procs: []watchProcJSON{}}
			devs[k] = dj
			order = append(order, k)
		}
		dj.Total = max(dj.Total, d.Total)
		dj.T = append(dj.T, sec(r.Time))
		dj.Used = append(dj.Used, d.Used)
		for _, p := range r.Procs {
			if p.Used == nil || *p.Used < 0 {
				continue
			}
			pk := procKey{k, p.PID}
			pj := procs[pk]
			if pj == nil {
				pj = &watchProcJSON{PID: p.PID, Cmd: p.Cmd}
				procs[pk] = pj
				procOrder = append(procOrder, pk)
			}
			pj.T = append(pj.T, sec(r.Time))
			pj.Used = append(pj.Used, uint64(*p.Used))
		}
	}
	for _, r := range lg.Reports {
		iv := r.Interval()
		if dj := devs[gpumon.DeviceKey(iv.Device)]; dj != nil && r.Samples > 0 {
			dj.Reports = append(dj.Reports, watchReportJSON{Start: sec(r.Start), End: sec(r.Time), Peak: r.Peak, PeakT: sec(r.PeakTime), Min: r.Min, Mean: r.Mean})
		}
	}
	for _, pk := range procOrder {
		pj := procs[pk]
		pj.T, pj.Used = downsampleMax(pj.T, pj.Used, maxWatchPoints)
		devs[pk.dev].Procs = append(devs[pk.dev].Procs, *pj)
	}
	for _, k := range order {
		dj := devs[k]
		dj.Samples = len(dj.T)
		dj.T, dj.Used = downsampleMax(dj.T, dj.Used, maxWatchPoints)
		sort.SliceStable(dj.Procs, func(i, j int) bool { return maxOf(dj.Procs[i].Used) > maxOf(dj.Procs[j].Used) })
		out.Devices = append(out.Devices, *dj)
	}
	for _, a := range lg.Alerts {
		out.Alerts = append(out.Alerts, watchAlertJSON{T: sec(a.Time), GPU: a.GPU, MIG: a.MIG, Percent: a.Percent})
	}
	return out
}

func migOrNone(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

func maxOf(v []uint64) uint64 {
	var m uint64
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// downsampleMax keeps at most n points: the series is cut into n equal
// time buckets and each keeps its largest value (at that value's time),
// so the chart's peaks are the log's peaks.
func downsampleMax(t []float64, v []uint64, n int) ([]float64, []uint64) {
	if len(t) <= n || len(t) < 2 {
		return t, v
	}
	t0, span := t[0], t[len(t)-1]-t[0]
	outT, outV := make([]float64, 0, n), make([]uint64, 0, n)
	bucket := -1
	for i := range t {
		b := n - 1
		if span > 0 {
			b = min(int((t[i]-t0)/span*float64(n)), n-1)
		}
		if b != bucket {
			outT, outV = append(outT, t[i]), append(outV, v[i])
			bucket = b
		} else if v[i] > outV[len(outV)-1] {
			outT[len(outT)-1], outV[len(outV)-1] = t[i], v[i]
		}
	}
	return outT, outV
}
