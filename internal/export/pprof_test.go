package export

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/report"
)

// pprofTotals sums each sample type's values.
func pprofTotals(p *profile.Profile) map[string]int64 {
	out := map[string]int64{}
	for _, smp := range p.Sample {
		for i, v := range smp.Value {
			out[p.SampleType[i].Type] += v
		}
	}
	return out
}

// TestPprofCorpus: on every device of every real snapshot the profile
// parses back, inuse_space is info's allocated bytes, inuse_objects its
// active_allocated block count, alloc_objects the trace's alloc count and
// peak_space info's peak active.
func TestPprofCorpus(t *testing.T) {
	for _, path := range corpus.Files(t) {
		s := load(t, path)
		in := report.BuildInfo(s, replay.Peaks)
		for _, di := range in.Devices {
			var buf bytes.Buffer
			if err := WritePprof(&buf, analysis.NewDevice(s, di.Device), PprofOptions{}); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			p, err := profile.Parse(&buf)
			if err != nil {
				t.Fatalf("%s device %d: profile.Parse: %v", filepath.Base(path), di.Device, err)
			}
			got := pprofTotals(p)
			allocs := 0
			for _, a := range di.Actions {
				if a.Action == "alloc" {
					allocs = a.Count
				}
			}
			want := map[string]int64{
				"inuse_space":   int64(di.AllocatedBytes),
				"inuse_objects": int64(di.BlockStates[0].Blocks),
				"alloc_objects": int64(allocs),
				"peak_space":    int64(di.ActiveTimelinePeakBytes),
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s device %d: %s = %d, info says %d", filepath.Base(path), di.Device, k, got[k], v)
				}
			}
			if p.DefaultSampleType != "inuse_space" || len(p.SampleType) != 6 {
				t.Errorf("%s: sample types %v", filepath.Base(path), p.SampleType)
			}
		}
	}
}

// TestPprofTool reads an export with go tool pprof -raw and -top.
func TestPprofTool(t *testing.T) {
	goBin := corpus.Tool(t, "go", "go tool pprof reads the export")
	s := load(t, realFile("cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle"))
	f := filepath.Join(t.TempDir(), "x.pb.gz")
	var buf bytes.Buffer
	if err := WritePprof(&buf, analysis.NewDevice(s, 0), PprofOptions{}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(f, buf.Bytes(), 0o644)
	raw, err := exec.Command(goBin, "tool", "pprof", "-raw", f).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -raw: %v\n%s", err, raw)
	}
	for _, want := range []string{"inuse_space/bytes[dflt]", "alloc_objects/count", "peak_space/bytes", "category:[", "device:[cuda:0]", "benchmark.py"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("go tool pprof -raw output lacks %q", want)
		}
	}
	top, err := exec.Command(goBin, "tool", "pprof", "-top", "-sample_index=peak_space", f).CombinedOutput()
	if err != nil || !strings.Contains(string(top), "Type: peak_space") || strings.Contains(string(top), "<unknown>") {
		t.Errorf("go tool pprof -top: %v\n%s", err, top)
	}
}
