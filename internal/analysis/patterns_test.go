package analysis

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gpumem/gpumem/internal/synth"
	"github.com/gpumem/gpumem/snapshot"
)

// synthRun generates a synthetic run and decodes its pickle, as a user's
// file would be read.
func synthRun(t testing.TB, w synth.Workload, o synth.Options) (*Device, *synth.Result) {
	t.Helper()
	s, res, err := synth.Generate(w, o)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := synth.Write(&buf, s, false); err != nil {
		t.Fatal(err)
	}
	dec, err := snapshot.DecodeBytes(buf.Bytes(), "synth.pickle", nil)
	if err != nil {
		t.Fatal(err)
	}
	return NewDevice(dec, o.Device), res
}

// truthOf is the true category of item i of d.Active.
func truthOf(d *Device, res *synth.Result, i int) string {
	it := &d.Active.Items[i]
	if it.Alloc >= 0 {
		return res.Truth.Events[it.Alloc]
	}
	_, _, addr := d.itemSource(i)
	return res.Truth.Before[addr]
}

// scoreAt is the share of live bytes at m whose category is the true one,
// and the wrong bytes per (true, got) pair.
func scoreAt(d *Device, res *synth.Result, m Moment) (float64, map[string]uint64, uint64) {
	var right, total uint64
	wrong := map[string]uint64{}
	d.Active.Live(m.Action, func(i int) {
		sz := d.Active.Items[i].Size
		total += sz
		want, got := truthOf(d, res, i), d.Category(i).String()
		if want == got {
			right += sz
		} else {
			wrong[fmt.Sprintf("%s as %s (%s)", want, got, d.CategoryRule(i))] += sz
		}
	})
	if total == 0 {
		return 0, wrong, 0
	}
	return float64(right) / float64(total), wrong, total
}

// TestPatternTruth: on every synthetic pattern, at least 99% of the live
// bytes at the peak (and at the OOM for oom-unwind, and at every step's
// end) are in their true category.
func TestPatternTruth(t *testing.T) {
	base := synth.Workload{Model: "mlp", Layers: 4, Hidden: 1024, Batch: 64, Steps: 3}
	with := func(f func(w *synth.Workload)) synth.Workload { w := base; f(&w); return w }
	for _, tt := range []struct {
		name string
		w    synth.Workload
		o    synth.Options
		oom  bool
	}{
		{"plain", base, synth.Options{}, false},
		{"inference", with(func(w *synth.Workload) { w.Inference = true }), synth.Options{}, false},
		{"lora", with(func(w *synth.Workload) { w.LoRA = true }), synth.Options{}, false},
		{"lora-4bit", with(func(w *synth.Workload) { w.LoRA, w.Quant, w.DType = true, "4bit", synth.BF16 }), synth.Options{}, false},
		{"oom-unwind", with(func(w *synth.Workload) { w.OOMUnwind, w.Batch = true, 2048 }), synth.Options{Capacity: 48 << 20}, true},
		{"no-annotations", with(func(w *synth.Workload) { w.NoAnnotations = true }), synth.Options{}, false},
		{"checkpointing", with(func(w *synth.Workload) { w.Checkpointing = true }), synth.Options{}, false},
		{"ddp", with(func(w *synth.Workload) { w.DDP = true }), synth.Options{}, false},
		{"mixed-precision", with(func(w *synth.Workload) { w.MixedPrecision, w.DType = true, synth.BF16 }), synth.Options{}, false},
		{"fsdp", with(func(w *synth.Workload) { w.FSDP = true }), synth.Options{}, false},
		{"compile", with(func(w *synth.Workload) { w.Compile = true }), synth.Options{}, false},
		{"compile-no-annotations", with(func(w *synth.Workload) { w.Compile, w.NoAnnotations = true, true }), synth.Options{}, false},
		{"lora-oom-unwind", with(func(w *synth.Workload) { w.LoRA, w.OOMUnwind, w.Batch = true, true, 2048 }), synth.Options{Capacity: 96 << 20}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, res := synthRun(t, tt.w, tt.o)
			if tt.oom != (res.OOM != nil) {
				t.Fatalf("OOM %v, want %v", res.OOM, tt.oom)
			}
			specs := []string{"peak", "end"}
			if tt.oom {
				for r, e := range d.Events() {
					if e.Action == snapshot.ActionOOM {
						specs = append(specs, fmt.Sprintf("e%d", r))
					}
				}
				if len(specs) != 3 {
					t.Fatalf("no oom entry")
				}
				if last := d.Events()[len(d.Events())-1].Action; last == snapshot.ActionOOM {
					t.Errorf("nothing freed after the OOM: the unwind is missing")
				}
			}
			// Every allocation of the trace, by bytes.
			var right, total uint64
			wrong := map[string]uint64{}
			for i := range d.Active.Items {
				sz := d.Active.Items[i].Size
				total += sz
				if want, got := truthOf(d, res, i), d.Category(i).String(); want == got {
					right += sz
				} else {
					wrong[fmt.Sprintf("%s as %s (%s)", want, got, d.CategoryRule(i))] += sz
				}
			}
			t.Logf("%s, every allocation: %.4f of %d bytes right", tt.name, float64(right)/float64(total), total)
			if float64(right) < 0.99*float64(total) {
				t.Errorf("%s: every allocation: %.4f of %d bytes in their true category; wrong: %v", tt.name, float64(right)/float64(total), total, wrong)
			}
			for _, spec := range specs {
				m, err := d.Resolve(spec)
				if err != nil {
					t.Fatal(err)
				}
				score, wrong, total := scoreAt(d, res, m)
				t.Logf("%s at %s: %.4f of %d live bytes right", tt.name, spec, score, total)
				if score < 0.99 {
					t.Errorf("%s at %s: %.4f of %d live bytes in their true category; wrong: %v", tt.name, spec, score, total, wrong)
				}
			}
		})
	}
}
