package estimate

import (
	"errors"
	"flag"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/snapshot"
)

// base is a request with the command line's defaults and no model.
func base() Request {
	return Request{
		Options:     Options{Dtype: "bf16", Optimizer: "adamw", LogitsFP32: true, Batch: 1, Seq: 2048, GPUs: 1, Nodes: 1, CacheOverhead: DefaultCacheOverhead},
		Set:         map[string]bool{},
		CUDAContext: "512MiB",
		Device:      -1,
	}
}

// TestRequestErrors: a mistake in the request is a *UsageError (exit 2 on
// the command line), an unreadable config a *FileError naming the path,
// and a file that is not a model config neither (exit 1).
func TestRequestErrors(t *testing.T) {
	llama := filepath.Join("testdata", "configs", "llama-2-7b.json")
	for _, tc := range []struct {
		name  string
		edit  func(q *Request)
		usage bool   // a *UsageError
		file  string // a *FileError for this path
		want  string // in the message
	}{
		{"no model", func(q *Request) {}, true, "", "no model"},
		{"two models", func(q *Request) { q.Params, q.Demo = "7B", true }, true, "", "give only one of"},
		{"bad count", func(q *Request) { q.Params = "lots" }, true, "", `--params "lots"`},
		{"arch missing", func(q *Request) { q.Arch.Layers = 2 }, true, "", "--hidden is missing"},
		{"bad context", func(q *Request) { q.Params, q.CUDAContext = "7B", "much" }, true, "", "--cuda-context"},
		{"contradiction", func(q *Request) { q.Params, q.Set["precision"], q.Set["dtype"] = "7B", true, true }, true, "", "--precision replaces --dtype"},
		{"base model of a count", func(q *Request) { q.Params, q.BaseModel = "7B", true }, true, "", "--base-model needs the architecture"},
		{"max batch without gpu", func(q *Request) { q.Params, q.MaxBatch = "7B", true }, true, "", "--max-batch needs --gpu"},
		{"unknown gpu", func(q *Request) { q.Params, q.GPU = "7B", "Voodoo5" }, true, "", "Voodoo5"},
		{"calibration without snapshots", func(q *Request) { q.Params, q.Calibration.Batch = "7B", []int{2} }, true, "", "need --calibrate"},
		{"missing config", func(q *Request) { q.ConfigPath = "testdata/none.json" }, false, "testdata/none.json", "no such file"},
		{"not a config", func(q *Request) { q.ConfigPath = "request_test.go" }, false, "", "request_test.go: "},
		{"a config", func(q *Request) { q.ConfigPath = llama }, false, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := base()
			tc.edit(&q)
			a, err := q.Run(func(string) (*snapshot.Snapshot, string, error) { panic("no snapshot to open") })
			var ue *UsageError
			var fe *FileError
			if got := errors.As(err, &ue); got != tc.usage {
				t.Errorf("usage error %v, want %v (%v)", got, tc.usage, err)
			}
			if tc.file != "" && (!errors.As(err, &fe) || fe.Path != tc.file || !errors.Is(err, fs.ErrNotExist)) {
				t.Errorf("want a file error for %s, got %#v", tc.file, err)
			}
			if tc.file == "" && errors.As(err, &fe) {
				t.Errorf("unexpected file error %v", err)
			}
			if tc.want == "" {
				if err != nil || a == nil || a.Result == nil || a.Verdict != nil || a.Check != nil {
					t.Fatalf("answer %+v, %v", a, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q in it", err, tc.want)
			}
		})
	}
}

// TestRequestDemoCheck: --demo estimates the demo's model and checks it
// against the demo snapshot, as Measure measures it; a --check file is
// opened with the opener and named by it; the GPU gives the verdict.
func TestRequestDemoCheck(t *testing.T) {
	q := base()
	q.Demo, q.GPU = true, "H100"
	a, err := q.Run(func(string) (*snapshot.Snapshot, string, error) { panic("the demo needs no opener") })
	if err != nil {
		t.Fatal(err)
	}
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	want := Measure(s, s.DefaultDevice())
	if a.Check == nil || a.Check.Measured.Peak != want.Peak || a.Check.Measured.Source != "demo" {
		t.Fatalf("check %+v, want the demo's peak %d", a.Check, want.Peak)
	}
	if a.Verdict == nil || a.Result.Options.Model == nil || a.Result.Options.Model.Family != "demo" {
		t.Errorf("verdict %+v, model %+v", a.Verdict, a.Result.Options.Model)
	}

	q = base()
	q.Params, q.CheckPath, q.Device = "1B", "run.pickle", 7
	opened := ""
	_, err = q.Run(func(p string) (*snapshot.Snapshot, string, error) { opened = p; return s, "run", nil })
	if opened != "run.pickle" || err == nil || !strings.Contains(err.Error(), "device 7") {
		t.Errorf("opened %q; error %v, want the missing device 7", opened, err)
	}
	failed := errors.New("run.pickle: truncated")
	if _, err = q.Run(func(string) (*snapshot.Snapshot, string, error) { return nil, "", failed }); err != failed {
		t.Errorf("error %v, want the opener's as it is", err)
	}
}

// TestCalibrationValues: --calibrate repeats; a calibration run's batch
// and length are positive integers.
func TestCalibrationValues(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		ok    bool
		paths []string
		batch []int
	}{
		{[]string{"--calibrate", "a.pickle", "--calibrate", "b.pickle", "--calibrate-batch", "4"}, true, []string{"a.pickle", "b.pickle"}, []int{4}},
		{[]string{"--calibrate-batch", "0"}, false, nil, nil},
		{[]string{"--calibrate-seq", "x"}, false, nil, nil},
		{[]string{"--calibrate-seq", "-3"}, false, nil, nil},
	} {
		var c CalibrationFlags
		fs := flag.NewFlagSet("estimate", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(c.PathsValue(), "calibrate", "")
		fs.Var(c.BatchValue(), "calibrate-batch", "")
		fs.Var(c.SeqValue(), "calibrate-seq", "")
		err := fs.Parse(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%q: error %v, want ok %v", tc.args, err, tc.ok)
			continue
		}
		if tc.ok && (!slices.Equal(c.Paths, tc.paths) || !slices.Equal(c.Batch, tc.batch)) {
			t.Errorf("%q: %+v", tc.args, c)
		}
	}
}
