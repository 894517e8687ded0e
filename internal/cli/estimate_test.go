package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/estimate"
)

func estimateConfig(name string) string {
	return filepath.Join("..", "estimate", "testdata", "configs", name)
}

// TestEstimateJSON checks the keys a script reads and that --max-batch
// prints the same batch as the JSON's max_batch.
func TestEstimateJSON(t *testing.T) {
	args := []string{"estimate", "--config", estimateConfig("llama-2-7b.json"), "--dtype", "bf16", "--mixed-precision",
		"--zero", "2", "--gpus", "8", "--batch", "2", "--seq", "4096", "--flash-attention", "--gpu", "H100", "--json"}
	code, out, errOut := runMain(t, nil, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var j struct {
		Parameters int64            `json:"parameters"`
		PeakBytes  int64            `json:"peak_bytes"`
		Terms      map[string]int64 `json:"terms"`
		Fits       *bool            `json:"fits"`
		MaxBatch   *int             `json:"max_batch"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if j.Parameters != 6_738_415_616 || j.PeakBytes <= 0 || j.Fits == nil || j.MaxBatch == nil {
		t.Fatalf("json: %+v", j)
	}
	for _, k := range []string{"parameters", "gradients", "optimizer_state", "optimizer_intermediates", "activations", "cuda_context", "allocator_overhead"} {
		if _, ok := j.Terms[k]; !ok {
			t.Errorf("terms lack %q: %v", k, j.Terms)
		}
	}
	// ZeRO-2 over 8: bf16 weights whole, gradients and fp32 state an eighth.
	if j.Terms["parameters"] != 2*6_738_415_616 || j.Terms["gradients"] != 2*6_738_415_616/8 || j.Terms["optimizer_state"] != 12*6_738_415_616/8 {
		t.Errorf("zero-2 terms: %v", j.Terms)
	}
	code, out, _ = runMain(t, nil, append(args[:len(args)-1], "--max-batch")...)
	if n, err := strconv.Atoi(strings.TrimSpace(out)); code != 0 || err != nil || n != *j.MaxBatch {
		t.Errorf("--max-batch printed %q (exit %d), json max_batch %d", out, code, *j.MaxBatch)
	}
}

// TestEstimateText checks the text output has a formula line per term and
// the GPU verdict.
func TestEstimateText(t *testing.T) {
	code, out, errOut := runMain(t, nil, "estimate", "--config", estimateConfig("mistral-7b-v0.1.json"), "--inference",
		"--batch", "8", "--seq", "4096", "--gpu", "A100-40GB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"mistral: 7,241,732,096 parameters",
		"KV cache", "32 sliding-window layers × 8 kv-heads × (K 128 + V 128) × B 8 × min(L 4096, window 4096) × 2 B",
		"A100-40GB", "max batch",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestEstimateErrors: bad input is one line naming the field, exit 1;
// flag mistakes exit 2.
func TestEstimateErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bert := write("bert.json", `{"model_type": "bert", "hidden_size": 768}`)
	roberta := write("roberta.json", `{"model_type": "roberta", "hidden_size": 768}`)
	huge := write("huge.json", `{"model_type": "llama", "pad": "`+strings.Repeat("x", 5<<20)+`"}`)
	noInter := write("llama.json", `{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000}`)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"estimate", "--config", bert}, 1, `bert config has no "num_hidden_layers" field`},
		{[]string{"estimate", "--config", roberta}, 1, `"model_type" "roberta" is not a family gpumem counts`},
		{[]string{"estimate", "--config", huge}, 1, "larger than any config.json"},
		{[]string{"estimate", "--config", noInter}, 1, `llama config has no "intermediate_size" field`},
		{[]string{"estimate", "--config", filepath.Join(dir, "missing.json")}, 1, "missing.json"},
		// A bad flag value is a usage mistake, as in every command.
		{[]string{"estimate", "--layers", "32", "--hidden", "4096", "--heads", "32", "--vocab", "32000"}, 2, "--intermediate is missing"},
		{[]string{"estimate", "--params", "seven"}, 2, `--params "seven"`},
		{[]string{"estimate", "--params", "7X"}, 2, `--params "7X"`},
		{[]string{"estimate", "--params", "7B", "--gpu", "Z80"}, 2, "not a known GPU"},
		{[]string{"estimate", "--params", "7B", "--inference"}, 2, "--inference needs the architecture"},
		{[]string{"estimate", "--params", "7B", "--cuda-context", "lots"}, 2, "--cuda-context"},
		{[]string{"estimate", "--params", "7B", "--dtype", "fp8"}, 2, `dtype "fp8"`},
		{[]string{"estimate", "--params", "7B", "--batch", "0"}, 2, "batch and seq must be positive"},
		{[]string{"estimate", "--params", "7B", "--zero", "5"}, 2, "zero stage 5"},
		{[]string{"estimate"}, 2, "no model"},
		{[]string{"estimate", "--params", "7B", "--max-batch"}, 2, "--max-batch needs --gpu"},
	} {
		code, _, stderr := runMain(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, stderr, tc.code, tc.msg)
		}
		if tc.code == 1 && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: error is more than one line: %q", tc.args, stderr)
		}
	}
}

// TestEstimateCheckCS336 is the acceptance test on the real cs336 runs:
// given each run's architecture (testdata/cs336, recognised from the
// snapshots' parameter blocks) and its batch, the estimate's parameters,
// gradients and optimizer state are within 5% of internal/analysis's
// categories and the peak within 15%, and every row carries a reason.
func TestEstimateCheckCS336(t *testing.T) {
	real := corpus.Dir(t)
	cfg := func(size string) string {
		return filepath.Join("..", "estimate", "testdata", "cs336", "cs336-"+size+".json")
	}
	for _, tc := range []struct {
		file string
		args []string
	}{
		// 2.7B, batch 4, fp32, the course's own AdamW (a per-parameter loop);
		// each snapshot records the first step, whose optimizer step creates
		// the state.
		{"cs336-kkaitlyn111__memory_ctx128_fullstep.pickle", []string{"--config", cfg("2.7b"), "--batch", "4", "--seq", "128", "--first-step"}},
		{"cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle", []string{"--config", cfg("2.7b"), "--batch", "4", "--seq", "128", "--first-step"}},
		{"cs336-kkaitlyn111__memory_files_memory_ctx256_fullstep_.pickle", []string{"--config", cfg("2.7b"), "--batch", "4", "--seq", "256", "--first-step"}},
		{"cs336-kkaitlyn111__memory_files_memory_ctx512_fullstep_.pickle", []string{"--config", cfg("2.7b"), "--batch", "4", "--seq", "512", "--first-step"}},
		// large, batch 4 × 256; its gradients stay allocated through the forward.
		{"cs336-notHanmin__memory_snapshot.pickle", []string{"--config", cfg("large"), "--batch", "4", "--seq", "256", "--keep-grads"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			args := append([]string{"estimate", "--dtype", "fp32", "--optimizer-loop", "--json", "--check", filepath.Join(real, tc.file)}, tc.args...)
			code, out, errOut := runMain(t, nil, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var j struct {
				Check struct {
					Rows []struct {
						Name      string   `json:"name"`
						Estimated int64    `json:"estimated_bytes"`
						Measured  *int64   `json:"measured_bytes"`
						Diff      *float64 `json:"diff"`
						Reason    string   `json:"reason"`
					} `json:"rows"`
				} `json:"check"`
			}
			if err := json.Unmarshal([]byte(out), &j); err != nil {
				t.Fatal(err)
			}
			limits := map[string]float64{"parameters": 0.05, "gradients": 0.05, "optimizer state": 0.05, "peak (allocated)": 0.15}
			for _, row := range j.Check.Rows {
				if row.Reason == "" {
					t.Errorf("%s: no reason", row.Name)
				}
				limit, ok := limits[row.Name]
				if !ok {
					continue
				}
				delete(limits, row.Name)
				if row.Diff == nil || *row.Diff > limit || *row.Diff < -limit {
					t.Errorf("%s: estimated %d, measured %v, diff %v; want within %.0f%%", row.Name, row.Estimated, row.Measured, row.Diff, limit*100)
				}
			}
			if len(limits) > 0 {
				t.Errorf("rows missing: %v", limits)
			}
		})
	}
}

func TestEstimateGPU(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"H100", 81559 << 20}, {"a100-40gb", 40960 << 20}, {"80GiB", 80 << 30}, {"24GB", 24 << 30}, {"16000MiB", 16000 << 20},
	} {
		g, err := estimate.ParseGPU(tc.in)
		if err != nil || g.Bytes != tc.want {
			t.Errorf("%s: %v %v, want %d", tc.in, g, err, tc.want)
		}
	}
	if _, err := estimate.ParseGPU("B200-ish"); err == nil || !strings.Contains(err.Error(), "not a known GPU") {
		t.Errorf("unknown GPU: %v", err)
	}
}

// TestEstimateGolden keeps docs/estimate.md's worked examples as golden
// files, and checks the manual still shows them: after go test -update,
// copy the new outputs into docs/estimate.md.
func TestEstimateGolden(t *testing.T) {
	var manual strings.Builder
	for _, text := range corpus.Docs(t) {
		manual.WriteString(text)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		inReadme bool
	}{
		{"7b-zero2", []string{"--config", estimateConfig("llama-2-7b.json"), "--dtype", "bf16", "--mixed-precision", "--zero", "2",
			"--gpus", "8", "--batch", "2", "--seq", "4096", "--flash-attention", "--gpu", "H100"}, true},
		{"inference-kv", []string{"--config", estimateConfig("mistral-7b-v0.1.json"), "--inference", "--batch", "16", "--seq", "4096",
			"--flash-attention", "--gpu", "A100-80GB"}, true},
		{"params-json", []string{"--params", "7B", "--optimizer", "adamw-8bit", "--json"}, false},
		{"full-finetune", []string{"--config", estimateConfig("llama-3.2-1b.json"), "--precision", "amp-bf16", "--batch", "4", "--seq", "2048",
			"--flash-attention", "--gpu", "H100"}, true},
		{"lora", []string{"--config", estimateConfig("llama-3.1-8b.json"), "--dtype", "bf16", "--lora-rank", "16", "--batch", "1", "--seq", "2048",
			"--flash-attention", "--gpu", "A100-40GB"}, true},
		{"qlora", []string{"--config", estimateConfig("llama-3.1-8b.json"), "--qlora", "--batch", "4", "--seq", "2048", "--flash-attention",
			"--gpu", "24GiB"}, true},
		{"zero3-offload", []string{"--config", estimateConfig("llama-2-70b.json"), "--dtype", "bf16", "--mixed-precision", "--zero", "3",
			"--gpus", "8", "--offload", "optimizer", "--batch", "1", "--seq", "4096", "--flash-attention", "--grad-checkpointing", "--gpu", "H100"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runMain(t, nil, append([]string{"estimate"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			checkGolden(t, filepath.Join("testdata", "estimate", tc.name+".txt"), out)
			if tc.inReadme && !strings.Contains(manual.String(), out) {
				t.Errorf("docs/estimate.md no longer shows this output of gpumem estimate %s", strings.Join(tc.args, " "))
			}
		})
	}
}

// TestEstimateFlagCombinations: every contradictory or ineffective
// combination of flags is a one-line usage error saying why (exit 2).
func TestEstimateFlagCombinations(t *testing.T) {
	cfg := estimateConfig("llama-2-7b.json")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--config", cfg, "--inference", "--zero", "3", "--gpus", "8"}, "--inference with --zero 3"},
		{[]string{"--config", cfg, "--inference", "--optimizer", "sgd"}, "--inference with --optimizer"},
		{[]string{"--config", cfg, "--fsdp"}, "--fsdp over 1 GPU shards nothing"},
		{[]string{"--config", cfg, "--fsdp", "--zero", "1", "--gpus", "8"}, "--fsdp is full sharding"},
		{[]string{"--config", cfg, "--zero", "2"}, "--zero 2 over 1 GPU shards nothing"},
		{[]string{"--config", cfg, "--lora-rank", "100000"}, "--lora-rank 100000 is above the width"},
		{[]string{"--layers", "2", "--hidden", "100", "--heads", "3", "--intermediate", "64", "--vocab", "100"}, "--heads 3 does not divide --hidden 100"},
		{[]string{"--config", cfg, "--precision", "bf16", "--dtype", "fp16"}, "--precision replaces --dtype"},
		{[]string{"--config", cfg, "--qlora", "--weights", "int8"}, "--weights int8 contradicts it"},
		{[]string{"--config", cfg, "--weights", "nf4"}, "only adapters can train"},
		{[]string{"--config", cfg, "--offload", "params", "--zero", "2", "--gpus", "8"}, "only ZeRO-3 or FSDP partition"},
		{[]string{"--config", cfg, "--nodes", "4"}, "--nodes 4 without --zero or --fsdp"},
		{[]string{"--config", cfg, "--calibrate-seq", "128"}, "need --calibrate SNAPSHOT"},
		{[]string{"--config", cfg, "--calibrate", "a", "--calibrate", "b", "--calibrate-seq", "1", "--calibrate-seq", "2", "--calibrate-seq", "3", "--calibrate-batch", "1"}, "--calibrate-seq given 3 times for 2"},
		{[]string{"--params", "7B", "--base-model"}, "--base-model needs the architecture"},
	} {
		code, _, stderr := runMain(t, nil, append([]string{"estimate"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, stderr, tc.msg)
		}
	}
}

// TestEstimateCalibrateCS336 is issue 33's calibration acceptance on the
// real CS336 2.7B runs (batch 4, fp32, the course's AdamW, first step):
// calibrated on the 128- and 256-token runs, the estimate for 512 tokens
// must have its activations and its peak within 3% of the 512-token
// snapshot, where the architecture alone misses the activations by about
// -31%; the forward-only runs at the same lengths give the same check of
// the activations.
func TestEstimateCalibrateCS336(t *testing.T) {
	real := corpus.Dir(t)
	cfg := filepath.Join("..", "estimate", "testdata", "cs336", "cs336-2.7b.json")
	for _, tc := range []struct {
		name, pattern string
		limits        map[string]float64
	}{
		{"fullstep", "cs336-kkaitlyn111__memory_files_memory_ctx%d_fullstep_.pickle", map[string]float64{"activations": 0.03, "peak (allocated)": 0.03}},
		{"forward", "cs336-kkaitlyn111__memory_files_memory_ctx%d_forward_.pickle", map[string]float64{"activations": 0.03}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := func(L int) string { return filepath.Join(real, fmt.Sprintf(tc.pattern, L)) }
			base := []string{"estimate", "--config", cfg, "--dtype", "fp32", "--optimizer-loop", "--first-step", "--batch", "4", "--seq", "512",
				"--json", "--check", f(512)}
			cal := append(append([]string{}, base...), "--calibrate", f(128), "--calibrate", f(256), "--calibrate-batch", "4",
				"--calibrate-seq", "128", "--calibrate-seq", "256")
			diffs := func(args []string) map[string]float64 {
				code, out, errOut := runMain(t, nil, args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				var j struct {
					Check struct {
						Rows []struct {
							Name string   `json:"name"`
							Diff *float64 `json:"diff"`
						} `json:"rows"`
					} `json:"check"`
				}
				if err := json.Unmarshal([]byte(out), &j); err != nil {
					t.Fatal(err)
				}
				d := map[string]float64{}
				for _, r := range j.Check.Rows {
					if r.Diff != nil {
						d[r.Name] = *r.Diff
					}
				}
				return d
			}
			arch, calibrated := diffs(base), diffs(cal)
			if arch["activations"] > -0.2 {
				t.Errorf("the architecture alone was expected to miss the activations by over 20%%, got %+.1f%%", arch["activations"]*100)
			}
			for name, limit := range tc.limits {
				d, ok := calibrated[name]
				if !ok || d > limit || d < -limit {
					t.Errorf("calibrated %s: %+.2f%% (present %v), want within %.0f%% (architecture only: %+.2f%%)", name, d*100, ok, limit*100, arch[name]*100)
				}
			}
		})
	}
}
