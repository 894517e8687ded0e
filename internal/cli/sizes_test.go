package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/alloc"
)

// TestSizeStrings: a size string gives the same bytes through every flag
// and script that takes one (serve --max-upload, sim --capacity,
// synth --capacity, the sizes of sim scripts), and an error through each
// when it is not a size. KB/MB/GB are powers of 1024, as docs/reference.md's "Sizes" says.
func TestSizeStrings(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64 // 0: not a size
	}{
		{"1048576", 1 << 20}, {"512B", 512}, {"2K", 2 << 10}, {"2KB", 2 << 10}, {"2KiB", 2 << 10}, {"2kib", 2 << 10},
		{"100MB", 100 << 20}, {"100MiB", 100 << 20}, {"100mb", 100 << 20}, {"1.5GiB", 3 << 29}, {"1.5GB", 3 << 29},
		{"4GiB", 4 << 30}, {"0.5TB", 1 << 39}, {"2.5MiB", 5 << 19},
		{"lots", 0}, {"-1GiB", 0}, {"3XB", 0}, {"GiB", 0},
	} {
		env := &Env{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}}
		got := map[string]uint64{}
		errs := map[string]bool{}
		if a, err := parseServeArgs(env, []string{"--max-upload", tc.in, "x.pickle"}); err == nil {
			got["serve --max-upload"] = uint64(a.maxUpload)
		} else {
			errs["serve --max-upload"] = true
		}
		if f, _, err := parseSimArgs(env, []string{"--capacity", tc.in, "x.pickle"}); err == nil {
			got["sim --capacity"] = f.CapacityBytes
		} else {
			errs["sim --capacity"] = true
		}
		if a, err := parseSynthArgs(env, []string{"--capacity", tc.in, "-o", "x.pickle"}); err == nil {
			got["synth --capacity"] = a.opt.Capacity
		} else {
			errs["synth --capacity"] = true
		}
		if cmds, err := alloc.ParseScript(strings.NewReader("alloc a " + tc.in)); err == nil {
			got["script alloc"] = cmds[0].Size
		} else {
			errs["script alloc"] = true
		}
		for _, path := range []string{"serve --max-upload", "sim --capacity", "synth --capacity", "script alloc"} {
			switch {
			case tc.want == 0 && !errs[path]:
				t.Errorf("%s %q = %d, want an error", path, tc.in, got[path])
			case tc.want != 0 && got[path] != tc.want:
				t.Errorf("%s %q = %d (error %v), want %d", path, tc.in, got[path], errs[path], tc.want)
			}
		}
	}
}
