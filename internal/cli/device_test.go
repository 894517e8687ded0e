package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// TestDeviceFlagStatsInfo: stats and info take --device like every other
// command: only that device's segments (stats) or section (info); a
// device the file lacks is an error naming the ones it has.
func TestDeviceFlagStatsInfo(t *testing.T) {
	for _, cmd := range []string{"stats", "info"} {
		_, all, _ := runMain(t, nil, cmd, "--demo")
		if code, one, errs := runMain(t, nil, cmd, "--demo", "--device", "0"); code != 0 || one != all {
			t.Errorf("%s --demo --device 0 (the only device): exit %d, stderr %q, output differs from without --device", cmd, code, errs)
		}
		if code, _, errs := runMain(t, nil, cmd, "--demo", "--device", "9"); code != 1 || !strings.Contains(errs, "demo: no device 9 (devices: 0)") {
			t.Errorf("%s --device 9: exit %d, stderr %q", cmd, code, errs)
		}
		if code, _, errs := runMain(t, nil, cmd, "--demo", "--device", "x"); code != 2 || !strings.Contains(errs, "want a device number") {
			t.Errorf("%s --device x: exit %d, stderr %q", cmd, code, errs)
		}
	}

	// A file with two devices (device 0 has a trace but no segments, device
	// 1 all 673): the per-device summaries add up to the whole one.
	path := filepath.Join(corpus.Snapshots(t), "real", "LayoutEditing__dump_snapshot__7bced596.pickle")
	segs := regexp.MustCompile(`(?m)^segments: (\d+)$`)
	count := func(args ...string) int {
		code, out, errs := runMain(t, nil, append([]string{"stats", path}, args...)...)
		m := segs.FindStringSubmatch(out)
		if code != 0 || m == nil {
			t.Fatalf("stats %v: exit %d, stderr %q", args, code, errs)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	total, d0, d1 := count(), count("--device", "0"), count("--device", "1")
	if d0 != 0 || d1 != 673 || d0+d1 != total {
		t.Errorf("segments: device 0 %d + device 1 %d, want 0 + 673 = %d", d0, d1, total)
	}
	_, out, _ := runMain(t, nil, "info", "--json", "--device", "1", path)
	var in struct {
		Devices []struct {
			Device int `json:"device"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(out), &in); err != nil || len(in.Devices) != 1 || in.Devices[0].Device != 1 {
		t.Errorf("info --json --device 1: devices %+v (%v), want only device 1", in.Devices, err)
	}
}

// TestHelpAndUnknown: asking for help exits 0, an unknown command or a
// bad flag value 2, and a missing file given as "gpumem FILE" is a missing
// file (exit 1).
func TestHelpAndUnknown(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"stats", "-h"}, 0, "usage: gpumem stats"},
		{[]string{"sim", "--help"}, 0, "usage: gpumem sim"},
		{[]string{"help", "trace"}, 0, "usage: gpumem trace"},
		{[]string{"help", "bogus"}, 2, `unknown command "bogus"`},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"missing/x.pickle"}, 1, "missing/x.pickle: no such file"},
		{[]string{"peak", "--demo", "--device", "-1"}, 2, "want a device number"},
		{[]string{"synth", "--model", "cnn", "-o", "x.pickle"}, 2, `--model "cnn": want mlp or transformer`},
		{[]string{"synth", "--layers", "-2", "-o", "x.pickle"}, 2, "--layers -2"},
		{[]string{"sim", "--demo", "--capacity", "-1GiB"}, 2, "bad size"},
	} {
		code, out, errs := runMain(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(out+errs, tc.msg) {
			t.Errorf("gpumem %v: exit %d, output %q; want exit %d mentioning %q", tc.args, code, out+errs, tc.code, tc.msg)
		}
	}
}
