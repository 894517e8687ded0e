package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

func profilerFiles(t *testing.T) []string {
	t.Helper()
	dir := corpus.Path("snapshots", "profiler_exports")
	files, _ := filepath.Glob(filepath.Join(dir, "*.gz"))
	if len(files) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no torch.profiler exports in %s", dir)
		}
		t.Skipf("no torch.profiler exports in %s", dir)
	}
	return files
}

// TestInfoProfilerExports: info reads every real torch.profiler file and
// names its format, in text and JSON; what the format lacks is a warning.
func TestInfoProfilerExports(t *testing.T) {
	for _, path := range profilerFiles(t) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runMain(t, nil, "info", "--json", path)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var in struct {
				Generation string `json:"generation"`
				Format     string `json:"format"`
				Profiler   *struct {
					Source   string `json:"source"`
					Segments string `json:"segments"`
				} `json:"profiler"`
				Devices []struct {
					Name string `json:"name"`
					Peak uint64 `json:"active_timeline_peak_bytes"`
				} `json:"devices"`
				Warnings []string `json:"warnings"`
			}
			if err := json.Unmarshal([]byte(out), &in); err != nil {
				t.Fatal(err)
			}
			want := "memory_timeline_raw"
			if strings.Contains(name, "trace") || strings.Contains(name, "df_index") {
				want = "kineto"
			}
			if in.Generation != want || in.Profiler == nil || !strings.Contains(in.Format, "torch.profiler") || in.Profiler.Segments == "" {
				t.Errorf("generation %q format %q profiler %+v", in.Generation, in.Format, in.Profiler)
			}
			if len(in.Devices) == 0 || in.Devices[0].Peak == 0 || len(in.Warnings) == 0 {
				t.Errorf("devices %+v warnings %q", in.Devices, in.Warnings)
			}
			code, text, errOut := runMain(t, nil, "info", path)
			if code != 0 || !strings.Contains(text, "source             "+in.Profiler.Source) || !strings.Contains(text, "segments         none recorded") {
				t.Errorf("text info (exit %d, %s):\n%s", code, errOut, text)
			}
		})
	}
}

// TestPeakProfilerCategories: peak --json on a raw timeline gives the
// profiler's categories, said to be the profiler's.
func TestPeakProfilerCategories(t *testing.T) {
	for _, path := range profilerFiles(t) {
		if !strings.Contains(path, "raw") {
			continue
		}
		code, out, errOut := runMain(t, nil, "peak", "--json", path)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", path, code, errOut)
		}
		var lv struct {
			Peak       uint64            `json:"peak_allocated_bytes"`
			Categories map[string]uint64 `json:"categories"`
			Reason     string            `json:"category_reason"`
			Sites      []struct {
				Category string `json:"category"`
			} `json:"sites"`
		}
		if err := json.Unmarshal([]byte(out), &lv); err != nil {
			t.Fatal(err)
		}
		sum := uint64(0)
		for _, v := range lv.Categories {
			sum += v
		}
		if lv.Reason != "from torch.profiler" || sum != lv.Peak || len(lv.Sites) == 0 {
			t.Errorf("%s: reason %q, categories sum %d of peak %d, %d sites", path, lv.Reason, sum, lv.Peak, len(lv.Sites))
		}
	}
}

// TestProfilerMissingViews: views that need allocator segments say what
// is missing and what to record (one line, exit 1) instead of an empty
// output; a truncated export fails the same way.
func TestProfilerMissingViews(t *testing.T) {
	files := profilerFiles(t)
	path := files[0]
	raw := ""
	for _, f := range files {
		if strings.Contains(f, "raw") {
			raw = f
		}
	}
	code, _, errOut := runMain(t, nil, "steps", raw)
	if code != 1 || !strings.Contains(errOut, "no ProfilerStep annotations") {
		t.Errorf("steps on a raw timeline: exit %d, stderr %q", code, errOut)
	}
	for _, args := range [][]string{{"stats", path}, {"sim", raw}, {"flame", "memory", "-o", filepath.Join(t.TempDir(), "f.svg"), path}, {"flame", "segments", "-o", filepath.Join(t.TempDir(), "f.svg"), path}} {
		code, out, errOut := runMain(t, nil, args...)
		if code != 1 || out != "" || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "no allocator segments") || !strings.Contains(errOut, "_record_memory_history") {
			t.Errorf("gpumem %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.json.gz")
	if err := os.WriteFile(cut, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runMain(t, nil, "info", cut)
	if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "truncated") {
		t.Errorf("truncated export: exit %d, stderr %q", code, errOut)
	}
	html := filepath.Join(t.TempDir(), "timeline.html")
	os.WriteFile(html, []byte("<html>\n<head><meta charset=\"utf-8\" /><title>GPU Memory Timeline HTML</title></head>\n<body>\n<img src='data:image/png;base64,AAAA'>\n</body></html>"), 0o644)
	code, _, errOut = runMain(t, nil, "info", html)
	if code != 1 || !strings.Contains(errOut, ".raw.json.gz") {
		t.Errorf("html export: exit %d, stderr %q", code, errOut)
	}
}
