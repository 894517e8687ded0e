package analysis

import (
	"bytes"
	"fmt"
	"strings"
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
	it := d.Active.Item(i)
	if it.Alloc >= 0 {
		return res.Truth.Events[it.Alloc]
	}
	_, _, addr := d.itemSource(i)
	return res.Truth.Before[addr]
}

// score counts the bytes of the allocations each visits whose category
// is the true one, and the wrong bytes per (true, got) pair. Blocks that
// weights-counted and grads-counted classify are alike in all the
// snapshot records, and the rules claim their counts per size, not which
// block is which: they are scored by size, as the bytes per category
// their group has against the group's true bytes per category.
func score(d *Device, res *synth.Result, each func(func(i int))) (right, total uint64, wrong map[string]uint64) {
	wrong = map[string]uint64{}
	type key struct {
		size uint64
		cat  string
	}
	want, got := map[key]uint64{}, map[key]uint64{}
	each(func(i int) {
		sz := d.Active.Size(i)
		total += sz
		w, g := truthOf(d, res, i), d.Category(i).String()
		if r := d.CategoryRule(i); r == RuleWeightsCounted || r == RuleGradsCounted {
			want[key{sz, w}] += sz
			got[key{sz, g}] += sz
			return
		}
		if w == g {
			right += sz
		} else {
			wrong[fmt.Sprintf("%s as %s (%s)", w, g, d.CategoryRule(i))] += sz
		}
	})
	for k, w := range want {
		right += min(w, got[k])
		if w > got[k] {
			wrong[fmt.Sprintf("%s of a counted group of %d B blocks", k.cat, k.size)] += w - got[k]
		}
	}
	return right, total, wrong
}

// scoreAt is the share of live bytes at m whose category is the true one
// (see score), and the wrong bytes per (true, got) pair.
func scoreAt(d *Device, res *synth.Result, m Moment) (float64, map[string]uint64, uint64) {
	right, total, wrong := score(d, res, func(f func(int)) { d.Active.Live(m.Action, f) })
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
		{"kept-grads", with(func(w *synth.Workload) { w.KeptGrads = true }), synth.Options{}, false},
		{"kept-grads-compile-no-annotations", with(func(w *synth.Workload) { w.KeptGrads, w.Compile, w.NoAnnotations = true, true, true }), synth.Options{}, false},
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
			right, total, wrong := score(d, res, func(f func(int)) {
				for i := range d.Active.Len() {
					f(i)
				}
			})
			if strings.HasPrefix(tt.name, "kept-grads") {
				// The gradients kept from before recording are the counted
				// rules' (not another rule's by chance).
				counted := map[Rule]uint64{}
				for i := range d.Active.Len() {
					counted[d.CategoryRule(i)] += d.Active.Size(i)
				}
				if counted[RuleGradsCounted] == 0 || counted[RuleGradsCounted] != counted[RuleWeightsCounted] {
					t.Errorf("grads-counted %d B, weights-counted %d B: want equal and non-zero", counted[RuleGradsCounted], counted[RuleWeightsCounted])
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
