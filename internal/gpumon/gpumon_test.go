package gpumon

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var t0 = time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)

const gib = 1 << 30

// sample builds a one- or two-device sample at t0+ms with used GiB values.
func sample(ms int, used ...float64) Sample {
	s := Sample{Time: t0.Add(time.Duration(ms) * time.Millisecond)}
	for i, u := range used {
		uuid := "GPU-" + string(rune('a'+i))
		b := uint64(u * gib)
		s.Devices = append(s.Devices, Device{Index: i, UUID: uuid, Name: "H100", MIG: -1, Used: b, Free: 80*gib - b, Total: 80 * gib, Util: 50, MemKnown: true})
		s.Procs = append(s.Procs, Process{Device: i, UUID: uuid, PID: 100 + i, Command: "python train.py", Used: int64(b) - 1<<29})
	}
	return s
}

func TestIntervalPeaksResetMinMean(t *testing.T) {
	type want struct{ peak, min, mean float64 }
	tests := []struct {
		name    string
		periods [][]float64 // GPU 0's used GiB per sample, one slice per report period
		want    []want
	}{
		{"peak resets at each report", [][]float64{{10, 30, 20}, {5, 15}, {40}},
			[]want{{30, 10, 20}, {15, 5, 10}, {40, 40, 40}}},
		{"a falling interval reports its own peak, not the earlier one", [][]float64{{70, 60}, {20, 21, 22, 25}},
			[]want{{70, 60, 65}, {25, 20, 22}}},
		{"one sample", [][]float64{{1.5}}, []want{{1.5, 1.5, 1.5}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := NewStats(t0)
			ms := 0
			for p, vals := range tc.periods {
				for _, v := range vals {
					st.Add(sample(ms, v))
					ms += 500
				}
				ivs := st.Report(t0.Add(time.Duration(ms) * time.Millisecond))
				if len(ivs) != 1 {
					t.Fatalf("period %d: %d intervals, want 1", p, len(ivs))
				}
				iv, w := ivs[0], tc.want[p]
				if iv.Peak != uint64(w.peak*gib) || iv.Min != uint64(w.min*gib) || iv.Mean != uint64(w.mean*gib) || iv.Samples != len(vals) {
					t.Errorf("period %d: peak %d min %d mean %d samples %d, want %v GiB and %d samples", p, iv.Peak, iv.Min, iv.Mean, iv.Samples, w, len(vals))
				}
				if len(iv.Procs) != 1 || iv.Procs[0].Peak != int64(w.peak*gib)-1<<29 {
					t.Errorf("period %d: process peaks %+v, want %d", p, iv.Procs, int64(w.peak*gib)-1<<29)
				}
			}
		})
	}
}

func TestIntervalPeakTimeAndDevices(t *testing.T) {
	st := NewStats(t0)
	st.Add(sample(0, 10, 50))
	st.Add(sample(500, 30, 40))
	st.Add(sample(1000, 20, 45))
	cur := st.Current(t0.Add(time.Second))
	if len(cur) != 2 {
		t.Fatalf("%d devices, want 2", len(cur))
	}
	if cur[0].PeakTime != t0.Add(500*time.Millisecond) || cur[1].PeakTime != t0 {
		t.Errorf("peak times %v %v", cur[0].PeakTime, cur[1].PeakTime)
	}
	// Current does not reset: a report afterwards sees the same peak.
	if r := st.Report(t0.Add(time.Second)); r[1].Peak != 50*gib {
		t.Errorf("report after Current: peak %d, want 50 GiB", r[1].Peak)
	}
	// A device without memory figures is listed with no samples.
	st.Add(Sample{Time: t0.Add(2 * time.Second), Devices: []Device{{Index: 0, UUID: "GPU-a", MIG: -1, Util: -1}}})
	if r := st.Report(t0.Add(3 * time.Second)); r[0].Samples != 0 {
		t.Errorf("unknown memory counted: %+v", r[0])
	}
}

func TestAlertCrossing(t *testing.T) {
	a := NewAlerter(90)
	var got []float64
	// Of 80 GiB: 90% is 72 GiB. The second crossing (73) is in the same
	// period as the first, so it is quiet; the third (76) opens a new one.
	for i, used := range []float64{50, 71, 72.5, 79, 60, 73, 74, -1, 75, 60, 76} {
		if used < 0 {
			a.NewPeriod()
			continue
		}
		for _, al := range a.Check(sample(i*500, used)) {
			got = append(got, al.Percent)
			if al.Threshold != 90 || al.GPU != 0 || al.Used != uint64(used*gib) {
				t.Errorf("alert %+v", al)
			}
		}
	}
	// 75 after the period change is not a crossing: the device never
	// dropped below the line in between.
	want := []float64{100 * 72.5 / 80, 100 * 76.0 / 80}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("alerts at %v%%, want %v%%", got, want)
	}
}

func TestLogRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.jsonl")
	w, err := CreateLog(path)
	if err != nil {
		t.Fatal(err)
	}
	st := NewStats(t0)
	mig := sample(0, 10)
	mig.Devices[0].MIG, mig.Devices[0].UUID, mig.Devices[0].Util = 3, "MIG-x", -1
	mig.Procs[0].UUID = "MIG-x"
	start := StartRecord{Time: t0, Backend: "fake", IntervalMS: 500, ReportMS: 1000, Devices: []DeviceInfo{{GPU: 0, UUID: "GPU-a", Name: "H100", Total: 80 * gib}}}
	if err := w.Start(start); err != nil {
		t.Fatal(err)
	}
	samples := []Sample{sample(0, 10, 20), sample(500, 12.25, 19), mig}
	for _, s := range samples {
		st.Add(s)
		if err := w.Sample(s); err != nil {
			t.Fatal(err)
		}
	}
	ivs := st.Report(t0.Add(time.Second))
	if err := w.Report(ivs); err != nil {
		t.Fatal(err)
	}
	alert := AlertRecord{RecordHead: RecordHead{Time: t0.Add(time.Second), GPU: 1, UUID: "GPU-b"}, Used: 75 * gib, Total: 80 * gib, Percent: 93.75, Threshold: 90}
	if err := w.Alert(alert); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lg, err := ReadLog(f, path)
	if err != nil {
		t.Fatal(err)
	}
	start.Type = "start"
	if !reflect.DeepEqual(lg.Starts, []StartRecord{start}) {
		t.Errorf("start: got %+v", lg.Starts)
	}
	var wantSamples []SampleRecord
	for _, s := range samples {
		wantSamples = append(wantSamples, NewSampleRecords(s)...)
	}
	if len(wantSamples) != 5 || !reflect.DeepEqual(lg.Samples, wantSamples) {
		t.Errorf("samples: got %d %+v, want %d", len(lg.Samples), lg.Samples, len(wantSamples))
	}
	// Each record turns back into the device it came from.
	if d := lg.Samples[4].Device(); d.MIG != 3 || d.Util != -1 || d.Used != 10*gib || d.UUID != "MIG-x" {
		t.Errorf("MIG sample read back as %+v", d)
	}
	if d := lg.Samples[2].Device(); d.Used != uint64(12.25*gib) || d.Util != 50 {
		t.Errorf("sample read back as %+v", d)
	}
	if len(lg.Reports) != len(ivs) {
		t.Fatalf("%d reports, want %d", len(lg.Reports), len(ivs))
	}
	for i, r := range lg.Reports {
		got, want := r.Interval(), ivs[i]
		want.Device = Device{Index: want.Device.Index, MIG: want.Device.MIG, UUID: want.Device.UUID, Total: want.Device.Total, MemKnown: true}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("report %d: got %+v\nwant %+v", i, got, want)
		}
	}
	alert.Type = "alert"
	if !reflect.DeepEqual(lg.Alerts, []AlertRecord{alert}) {
		t.Errorf("alerts: got %+v", lg.Alerts)
	}
}

func TestReadLogErrors(t *testing.T) {
	good := `{"type":"start","time":"2026-11-25T14:00:00Z","backend":"nvml","interval_ms":500,"report_ms":10000,"devices":[]}` + "\n"
	tests := []struct {
		name, in, err string
		truncated     bool
	}{
		{"not json", good + "hello\n", "x.jsonl: line 2 (byte 113): not a JSON object", false},
		{"unknown type", good + `{"type":"allocation"}` + "\n", `line 2 (byte 113): unknown record type "allocation"`, false},
		{"bad field", good + `{"type":"sample","used":"lots"}` + "\n", "line 2 (byte 113): bad sample record", false},
		{"cut off last line is skipped", good + `{"type":"sample","ti`, "", true},
		{"a bad middle line is an error", good + `{"type":"sample","ti` + "\n" + good, "line 2", false},
		{"blank lines", "\n" + good + "\n", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lg, err := ReadLog(strings.NewReader(tc.in), "x.jsonl")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if lg.TruncatedTail != tc.truncated || len(lg.Starts) != 1 {
				t.Errorf("truncated %v starts %d", lg.TruncatedTail, len(lg.Starts))
			}
		})
	}
	// A line longer than the bound is refused, not read whole.
	long := good + `{"type":"sample","cmd":"` + strings.Repeat("x", maxLogLine) + "\"}\n"
	if _, err := ReadLog(strings.NewReader(long), "x.jsonl"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("long line: %v", err)
	}
}

func TestPrometheusParsesBack(t *testing.T) {
	st := NewStats(t0)
	st.Add(sample(0, 10, 20))
	st.Add(sample(500, 30, 25))
	last := st.Report(t0.Add(time.Second))
	now := sample(1000, 12.5, 21)
	now.Devices[1].PCIBusID = "00000000:00:09.0"
	now.Procs[0].Command = `python "train.py" --tag a\b`
	mig := Device{Index: 2, UUID: "MIG-c", Name: "H100 MIG 3g.40gb", MIG: 2, Used: 26 << 20, Free: 40423 << 20, Total: 40448 << 20, Util: -1, MemKnown: true}
	now.Devices = append(now.Devices, mig, Device{Index: 3, UUID: "GPU-d", MIG: -1, Util: -1}) // the last one: no figures
	var buf bytes.Buffer
	if err := WritePrometheus(&buf, "node7", now, last); err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("expfmt: %v\n%s", err, buf.String())
	}
	type key struct{ name, gpu string }
	got := map[key]float64{}
	labels := map[key]map[string]string{}
	for name, f := range fams {
		if f.GetType().String() != "GAUGE" {
			t.Errorf("%s is %v, want GAUGE", name, f.GetType())
		}
		for _, m := range f.GetMetric() {
			ls := map[string]string{}
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = l.GetValue()
			}
			k := key{name, ls["gpu"] + "/" + ls["pid"]}
			got[k] = m.GetGauge().GetValue()
			labels[k] = ls
		}
	}
	want := map[key]float64{
		{"DCGM_FI_DEV_FB_USED", "0/"}:                        12.5 * 1024,
		{"DCGM_FI_DEV_FB_USED", "1/"}:                        21 * 1024,
		{"DCGM_FI_DEV_FB_USED", "2/"}:                        26,
		{"DCGM_FI_DEV_FB_FREE", "0/"}:                        67.5 * 1024,
		{"DCGM_FI_DEV_FB_FREE", "2/"}:                        40423,
		{"DCGM_FI_DEV_FB_TOTAL", "1/"}:                       80 * 1024,
		{"DCGM_FI_DEV_GPU_UTIL", "0/"}:                       50,
		{"gpumem_fb_used_bytes", "1/"}:                       21 * gib,
		{"gpumem_fb_used_interval_peak_bytes", "0/"}:         30 * gib,
		{"gpumem_fb_used_interval_peak_bytes", "1/"}:         25 * gib,
		{"gpumem_fb_used_interval_min_bytes", "1/"}:          20 * gib,
		{"gpumem_fb_used_interval_mean_bytes", "0/"}:         20 * gib,
		{"gpumem_process_used_bytes", "0/100"}:               12.5*gib - 1<<29,
		{"gpumem_process_used_interval_peak_bytes", "1/101"}: 25*gib - 1<<29,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s{gpu %s}: %v (present %v), want %v", k.name, k.gpu, g, ok, v)
		}
	}
	if _, ok := got[key{"DCGM_FI_DEV_GPU_UTIL", "2/"}]; ok {
		t.Error("MIG device without utilisation has a DCGM_FI_DEV_GPU_UTIL sample")
	}
	if _, ok := got[key{"DCGM_FI_DEV_FB_USED", "3/"}]; ok {
		t.Error("device without memory figures has a sample")
	}
	l := labels[key{"DCGM_FI_DEV_FB_USED", "1/"}]
	wantL := map[string]string{"gpu": "1", "UUID": "GPU-b", "pci_bus_id": "00000000:00:09.0", "device": "nvidia1", "modelName": "H100", "Hostname": "node7"}
	if !reflect.DeepEqual(l, wantL) {
		t.Errorf("labels %v, want dcgm-exporter's %v", l, wantL)
	}
	if l := labels[key{"DCGM_FI_DEV_FB_USED", "2/"}]; l["GPU_I_ID"] != "2" || l["UUID"] != "MIG-c" {
		t.Errorf("MIG labels %v", l)
	}
	if c := labels[key{"gpumem_process_used_bytes", "0/100"}]["command"]; c != `python "train.py" --tag a\b` {
		t.Errorf("command label read back as %q", c)
	}
}

func TestParseSMIRecorded(t *testing.T) {
	f, err := os.Open("testdata/nvidia-smi.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type gpuWant struct {
		total, used, free uint64 // MiB
		util              int
	}
	type appWant struct {
		pid  int
		used int64 // MiB
		cmd  string
	}
	wantGPUs := []gpuWant{{81559, 19818, 61263, 100}, {81559, 19818, 61263, 100}, {81559, 59, 81022, -1}, {81559, 11125, 69956, -1}, {81559, 11125, 69956, -1}}
	wantApps := []appWant{{11327, 2566, "/root/tools/memhog"}, {11328, 1542, "/root/tools/memhog"}, {11345, 15690, "./gpu_burn"}, {11345, 15690, "./gpu_burn"},
		{21180, 2296, "/root/tools/memhog"}, {21181, 1272, "/root/tools/memhog"}, {21198, 7484, "./gpu_burn"}}
	var gpus []gpuWant
	var apps []appWant
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "gpu "):
			d, err := ParseSMIGPULine(line[4:])
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if d.Index != 0 || d.UUID != "GPU-00000000-0000-0000-0000-000000000000" || d.Name != "NVIDIA H100 80GB HBM3" || d.PCIBusID != "00000000:00:09.0" || !d.MemKnown || d.MIG != -1 {
				t.Errorf("%q: %+v", line, d)
			}
			gpus = append(gpus, gpuWant{d.Total / mib, d.Used / mib, d.Free / mib, d.Util})
		case strings.HasPrefix(line, "app "):
			p, err := ParseSMIAppLine(line[4:])
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			apps = append(apps, appWant{p.PID, p.Used / mib, p.Command})
		}
	}
	if !reflect.DeepEqual(gpus, wantGPUs) {
		t.Errorf("GPUs %v, want %v", gpus, wantGPUs)
	}
	if !reflect.DeepEqual(apps, wantApps) {
		t.Errorf("apps %v, want %v", apps, wantApps)
	}
}

func TestParseSMIFields(t *testing.T) {
	tests := []struct {
		line  string
		known bool
		free  uint64
		util  int
		err   string
	}{
		// nvidia-smi's spellings of "no value": [N/A], [Not Supported],
		// [Insufficient Permissions] (memory.free on some MIG setups).
		{"0, GPU-x, A100, 00000000:18:00.0, [N/A], [N/A], [N/A], [N/A]", false, 0, -1, ""},
		{"0, GPU-x, A100, 00000000:18:00.0, 81920, 36537, [Insufficient Permissions], [Not Supported]", true, 81920 - 36537, -1, ""},
		{"1, GPU-y, L4, 00000000:00:03.0, 23034, 0, 23034, 0", true, 23034, 0, ""},
		{"0, GPU-x, A100, 00000000:18:00.0, 81920, 36537", false, 0, 0, "want 8 comma-separated fields, got 6"},
		{"x, GPU-x, A100, 00000000:18:00.0, 1, 1, 0, 0", false, 0, 0, `index "x"`},
		{"0, GPU-x, A100, 00000000:18:00.0, 1 GiB, 1, 0, 0", false, 0, 0, "memory.total"},
		{"0, GPU-x, A100, 00000000:18:00.0, 1, 1, 0, 101", false, 0, 0, "utilization.gpu"},
		{"Unable to determine the device handle for GPU0000:01:00.0: GPU has fallen off the bus.", false, 0, 0, "fields"},
	}
	for _, tc := range tests {
		d, err := ParseSMIGPULine(tc.line)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.line, err, tc.err)
			}
			continue
		}
		if err != nil || d.MemKnown != tc.known || d.Free/mib != tc.free || d.Util != tc.util {
			t.Errorf("%q: %+v %v", tc.line, d, err)
		}
	}
	p, err := ParseSMIAppLine("GPU-x, 524, [N/A], /usr/bin/python3, with, commas")
	if err != nil || p.Used != -1 || p.Command != "/usr/bin/python3, with, commas" || p.PID != 524 {
		t.Errorf("app with [N/A] memory: %+v %v", p, err)
	}
	if _, err := ParseSMIAppLine("GPU-x, pid, 1, x"); err == nil {
		t.Error("bad pid accepted")
	}
}

// fakeSMI writes a shell script that answers like nvidia-smi: the one-shot
// queries and an -lms stream of three loops over two GPUs.
func fakeSMI(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSMIStream(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	bin := fakeSMI(t, `case "$*" in
*--query-compute-apps*) echo "GPU-b, 11345, 15690, ./gpu_burn" ;;
*-lms*) for u in 100 200 300; do
    echo "0, GPU-a, NVIDIA H100 80GB HBM3, 00000000:00:09.0, 81559, $u, 0, 7"
    echo "1, GPU-b, NVIDIA H100 80GB HBM3, 00000000:00:0A.0, 81559, 1$u, 0, [N/A]"
  done ;;
*) echo "0, GPU-a, NVIDIA H100 80GB HBM3, 00000000:00:09.0, 81559, 1, 0, 0"
   echo "1, GPU-b, NVIDIA H100 80GB HBM3, 00000000:00:0A.0, 81559, 1, 0, 0" ;;
esac
`)
	s, err := OpenSMI(bin, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, u := range []uint64{100, 200, 300} {
		smp, err := s.Sample()
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		if len(smp.Devices) != 2 || smp.Devices[0].Used != u*mib || smp.Devices[1].Used != (1000+u)*mib || smp.Devices[1].Util != -1 || smp.Devices[0].Util != 7 {
			t.Fatalf("sample %d: %+v", i, smp.Devices)
		}
		if len(smp.Procs) != 1 || smp.Procs[0].Device != 1 || smp.Procs[0].Used != 15690*mib || smp.Procs[0].PID != 11345 {
			t.Errorf("sample %d processes: %+v", i, smp.Procs)
		}
	}
	if _, err := s.Sample(); err == nil || !strings.Contains(err.Error(), "nvidia-smi stopped") {
		t.Errorf("after the stream ends: %v", err)
	}
}

func TestSMIUnavailable(t *testing.T) {
	if _, err := OpenSMI(filepath.Join(t.TempDir(), "nvidia-smi"), time.Second); err == nil {
		t.Error("missing nvidia-smi accepted")
	}
	// nvidia-smi installed without a working driver prints this and exits 9.
	bin := fakeSMI(t, `echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."; exit 9`)
	_, err := OpenSMI(bin, time.Second)
	if err == nil || !strings.Contains(err.Error(), "couldn't communicate with the NVIDIA driver") {
		t.Errorf("driverless nvidia-smi: %v", err)
	}
}

func TestOpenWithoutDriver(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	t.Setenv("PATH", t.TempDir())
	_, err := Open(time.Second)
	if !errors.Is(err, ErrNoDriver) || err.Error() != "no NVIDIA driver found (NVML and nvidia-smi unavailable)" {
		t.Fatalf("Open: %v", err)
	}
	var nd *NoDriverError
	if !errors.As(err, &nd) || len(nd.Reasons) != 2 {
		t.Errorf("reasons: %+v", nd)
	}
}

func TestDemoIsATrainingJob(t *testing.T) {
	// Rank 1's spike every fifth 2-second step is the demo's point: the
	// interval peak shows it, the all-time view would hide the steps
	// between.
	normal, spike := DemoUsed(1, 3*time.Second), DemoUsed(1, 9*time.Second)
	if spike-normal < 5*gib {
		t.Errorf("rank 1 at step 4: %d bytes, step 1: %d bytes; want a spike of about 6 GiB", spike, normal)
	}
	if DemoUsed(0, 0) != 18*gib || DemoUsed(0, time.Second) != 42*gib {
		t.Errorf("rank 0: %d at 0s, %d at 1s", DemoUsed(0, 0), DemoUsed(0, time.Second))
	}
}

func FuzzParseSMIGPULine(f *testing.F) {
	f.Add("0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 00000000:00:09.0, 81559 MiB, 11125 MiB, 69956 MiB, [N/A]")
	f.Add("1, GPU-y, L4, 00000000:00:03.0, 23034, 0, 23034, 0")
	f.Fuzz(func(t *testing.T, line string) {
		d, err := ParseSMIGPULine(line)
		if err == nil && d.Util > 100 {
			t.Errorf("util %d accepted", d.Util)
		}
		_, _ = ParseSMIAppLine(line)
	})
}

func FuzzReadLog(f *testing.F) {
	f.Add([]byte(`{"type":"start","time":"2026-11-25T14:00:00Z","backend":"nvml","interval_ms":500,"report_ms":10000,"devices":[{"gpu":0,"total":1}]}` + "\n" +
		`{"type":"sample","time":"2026-11-25T14:00:00Z","gpu":0,"used":1,"free":0,"total":1,"procs":[{"pid":1,"cmd":"x","used":1}]}` + "\n"))
	f.Add([]byte(`{"type":"report","time":"2026-11-25T14:00:00Z","mig":2,"peak":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		lg, err := ReadLog(bytes.NewReader(b), "fuzz")
		if err == nil {
			for _, r := range lg.Reports {
				_ = r.Interval()
			}
		}
	})
}
