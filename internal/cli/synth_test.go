package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSynthCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "s.pickle")
	small := []string{"--layers", "1", "--d-model", "64", "--heads", "4", "--seq", "32", "--batch", "2", "--vocab", "100", "--steps", "2"}
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		stdout string // substring
		stderr string // substring; "" = must be empty
	}{
		{"transformer", append(append([]string{}, small...), "-o", out), 0, "steps completed: 2 of 2", ""},
		{"json", append(append([]string{"--json", "--dtype", "bf16"}, small...), "-o", out), 0, "JSON", ""},
		{"mlp", []string{"--model", "mlp", "--layers", "2", "--hidden", "64", "--batch", "4", "--steps", "1", "-o", out}, 0, "mlp layers=2", ""},
		{"oom", append(append([]string{"--capacity", "1MiB"}, small...), "-o", out), 0, "stopped at OOM", ""},
		{"target size", []string{"--layers", "1", "--d-model", "64", "--heads", "4", "--seq", "32", "--batch", "2", "--vocab", "100", "--target-mb", "0.3", "-o", out}, 0, "(0.3 MB)", ""},
		{"no output", small, 2, "", "-o OUT is required"},
		{"bad flag", []string{"--nope", "-o", out}, 2, "", "unknown flag --nope"},
		{"bad dtype", []string{"--dtype", "fp8", "-o", out}, 2, "", "gpumem synth: --dtype: unknown dtype"},
		{"bad config", []string{"--config", "max_split_size_mb:1", "-o", out}, 2, "", "gpumem synth: --config: allocator config"},
		{"negative target", []string{"--target-mb", "-5", "-o", out}, 2, "", "--target-mb -5: want a size between 0 and 10^6 MB"},
		{"bad capacity", []string{"--capacity", "lots", "-o", out}, 2, "", "gpumem synth: --capacity: bad size"},
		{"bad model", []string{"--model", "rnn", "-o", out}, 2, "", `gpumem synth: --model "rnn": want mlp or transformer`},
		{"inference", []string{"--model", "mlp", "--inference", "--hidden", "64", "--batch", "4", "-o", out}, 0, "mlp layers=4 hidden=64 batch=4 steps=3 dtype=fp32 seed=0 inference", ""},
		{"qlora", []string{"--model", "mlp", "--lora", "--quant", "4bit", "--dtype", "bf16", "--hidden", "64", "--batch", "4", "-o", out}, 0, "lora quant=4bit", ""},
		{"oom unwind", []string{"--model", "mlp", "--oom-unwind", "--hidden", "1024", "--batch", "2048", "--capacity", "48MiB", "-o", out}, 0, "then the exception freed the forward pass's tensors", ""},
		{"patterns need the mlp", []string{"--inference", "-o", out}, 2, "", "built on the mlp: use --model mlp"},
		{"oom unwind needs a capacity", []string{"--model", "mlp", "--oom-unwind", "-o", out}, 2, "", "--oom-unwind needs --capacity"},
		{"quant needs lora", []string{"--model", "mlp", "--quant", "4bit", "-o", out}, 2, "", `quant "4bit": want 4bit, with lora`},
		{"mixed precision needs bf16", []string{"--model", "mlp", "--mixed-precision", "-o", out}, 2, "", "mixed-precision keeps bf16 parameters"},
		{"missing dir", append(append([]string{}, small...), "-o", filepath.Join(dir, "no", "x.pickle")), 1, "", "gpumem synth: " + filepath.Join(dir, "no", "x.pickle") + ": no such directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, stdout, stderr := runMain(t, nil, append([]string{"synth"}, tc.args...)...)
			if status != tc.status {
				t.Fatalf("status %d, want %d; stderr: %s", status, tc.status, stderr)
			}
			if !strings.Contains(stdout, tc.stdout) {
				t.Errorf("stdout %q lacks %q", stdout, tc.stdout)
			}
			if tc.stderr == "" && stderr != "" || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q, want %q", stderr, tc.stderr)
			}
			if tc.status == 1 && strings.Count(stderr, "\n") != 1 {
				t.Errorf("error output is not one line: %q", stderr)
			}
		})
	}
	b, err := os.ReadFile(out)
	if err != nil || len(b) < 2 || b[0] != 0x80 || b[1] != 4 {
		t.Errorf("last good run did not leave a protocol-4 pickle: %v", err)
	}
}
