package web

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/gpumon"
)

// watchTestLog is a two-GPU log of n samples 100 ms apart: GPU 0's used
// memory is i MiB at sample i but 5000 MiB at sample 777; GPU 1 is a MIG
// instance with a process whose memory the driver withholds.
func watchTestLog(n int) *gpumon.Log {
	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	lg := &gpumon.Log{Starts: []gpumon.StartRecord{{Type: "start", Time: t0, Backend: "nvml",
		Devices: []gpumon.DeviceInfo{{GPU: 0, UUID: "GPU-a", Name: "NVIDIA H100 80GB HBM3", Total: 80 << 30}}}}}
	mig := 3
	for i := 0; i < n; i++ {
		at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		used := uint64(i) << 20
		if i == 777 {
			used = 5000 << 20
		}
		pu, hidden := int64(used), int64(-1)
		lg.Samples = append(lg.Samples,
			gpumon.SampleRecord{RecordHead: gpumon.RecordHead{Type: "sample", Time: at, GPU: 0, UUID: "GPU-a"}, Used: used, Total: 80 << 30,
				Procs: []gpumon.ProcRecord{{PID: 42, Cmd: "python train.py", Used: &pu}}},
			gpumon.SampleRecord{RecordHead: gpumon.RecordHead{Type: "sample", Time: at, GPU: 1, MIG: &mig, UUID: "MIG-b"}, Used: 1 << 30, Total: 10 << 30,
				Procs: []gpumon.ProcRecord{{PID: 43, Cmd: "python eval.py", Used: &hidden}}})
	}
	lg.Reports = []gpumon.ReportRecord{{RecordHead: gpumon.RecordHead{Type: "report", Time: t0.Add(10 * time.Second), GPU: 0, UUID: "GPU-a"}, Start: t0,
		Total: 80 << 30, Samples: 100, Peak: 99 << 20, PeakTime: t0.Add(9900 * time.Millisecond), Min: 0, Mean: 50 << 20}}
	lg.Alerts = []gpumon.AlertRecord{{RecordHead: gpumon.RecordHead{Type: "alert", Time: t0.Add(77700 * time.Millisecond), GPU: 0, UUID: "GPU-a"}, Percent: 6.1, Threshold: 5}}
	return lg
}

func TestWatchLogAPI(t *testing.T) {
	s, h := newTestServer(t)
	s.AddWatchLog("run.jsonl", watchTestLog(10000))
	w := get(t, h, "127.0.0.1:8123", "/api/watch?log=0")
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	var got watchJSON
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "run.jsonl" || got.Backend != "nvml" || len(got.Devices) != 2 || len(got.Logs) != 1 || len(got.Alerts) != 1 || got.Alerts[0].T != 77.7 {
		t.Fatalf("got %+v", got)
	}
	d := got.Devices[0]
	if d.Name != "NVIDIA H100 80GB HBM3" || d.Samples != 10000 || len(d.T) > maxWatchPoints || len(d.T) != len(d.Used) {
		t.Errorf("device 0: name %q, %d samples, %d points", d.Name, d.Samples, len(d.T))
	}
	// Downsampling keeps each bucket's largest sample: the spike at sample
	// 777 (77.7 s) and the last, largest ramp value survive.
	found := false
	for i := range d.T {
		if d.Used[i] == 5000<<20 && d.T[i] == 77.7 {
			found = true
		}
	}
	if !found || d.Used[len(d.Used)-1] != 9999<<20 {
		t.Errorf("spike kept %v, last point %d", found, d.Used[len(d.Used)-1])
	}
	if len(d.Reports) != 1 || d.Reports[0].Peak != 99<<20 || d.Reports[0].End != 10 || d.Reports[0].PeakT != 9.9 {
		t.Errorf("reports %+v", d.Reports)
	}
	if len(d.Procs) != 1 || d.Procs[0].PID != 42 || len(d.Procs[0].T) > maxWatchPoints {
		t.Errorf("processes %+v", len(d.Procs))
	}
	// The MIG instance is its own device; its process without a figure
	// has no series.
	if m := got.Devices[1]; m.MIG == nil || *m.MIG != 3 || m.UUID != "MIG-b" || len(m.Procs) != 0 {
		t.Errorf("MIG device %+v", m)
	}
	if w := get(t, h, "127.0.0.1:8123", "/api/watch?log=1"); w.Code != 404 {
		t.Errorf("missing log: status %d", w.Code)
	}
	if w := get(t, h, "evil.example", "/api/watch"); w.Code != 403 {
		t.Errorf("foreign Host: status %d", w.Code)
	}
	if w := get(t, h, "127.0.0.1:8123", "/watch.html"); w.Code != 200 || !strings.Contains(w.Body.String(), "watch.js") {
		t.Errorf("watch.html: status %d", w.Code)
	}
}

func TestDownsampleMax(t *testing.T) {
	tests := []struct {
		t     []float64
		v     []uint64
		n     int
		wantT []float64
		wantV []uint64
	}{
		{[]float64{0, 1, 2}, []uint64{5, 6, 7}, 3, []float64{0, 1, 2}, []uint64{5, 6, 7}},
		{[]float64{0, 1, 2, 3, 4, 5}, []uint64{1, 9, 2, 3, 8, 4}, 2, []float64{1, 4}, []uint64{9, 8}},
		{[]float64{0, 0, 0, 0}, []uint64{1, 3, 2, 0}, 2, []float64{0}, []uint64{3}},
	}
	for _, tc := range tests {
		gt, gv := downsampleMax(tc.t, tc.v, tc.n)
		if !slices.Equal(gt, tc.wantT) || !slices.Equal(gv, tc.wantV) {
			t.Errorf("downsampleMax(%v, %v, %d) = %v %v, want %v %v", tc.t, tc.v, tc.n, gt, gv, tc.wantT, tc.wantV)
		}
	}
}
