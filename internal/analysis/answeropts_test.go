package analysis

import (
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/synth"
	"github.com/gpumem/gpumem/snapshot"
)

// TestAnswerOptions: the depth and number of sites an answer accepts, and
// the devices it covers: every device with data, or the one asked for,
// each with the user's rules.
func TestAnswerOptions(t *testing.T) {
	for _, tc := range []struct {
		o    LiveOptions
		want string
	}{
		{LiveOptions{Depth: 1}, ""},
		{LiveOptions{Depth: DefaultDepth, Top: DefaultTop}, ""},
		{LiveOptions{Depth: 0}, "--depth must be at least 1"},
		{LiveOptions{Depth: 2, Top: -1}, "--top must be at least 0"},
	} {
		if err := tc.o.Validate(); (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}

	d, _ := synthRun(t, synth.Workload{Model: "mlp", Layers: 2, Hidden: 256, Batch: 8, Steps: 1}, synth.Options{Device: 1})
	s := d.S
	rules, err := ParseUserRules([]byte(`[{"match": "mlp", "category": "mine"}]`), "rules.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		device int
		want   []int
		err    string
	}{
		{-1, []int{1}, ""},
		{1, []int{1}, ""},
		{0, nil, "run.pickle: no device 0 (devices: 1)"},
	} {
		devs, err := AnswerOptions{Device: tc.device, Rules: rules}.Devices(s, "run.pickle")
		if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("device %d: error %v, want %q", tc.device, err, tc.err)
		}
		var got []int
		for _, dv := range devs {
			got = append(got, dv.Index)
			if dv.user != rules {
				t.Errorf("device %d: the user's rules are not set", dv.Index)
			}
		}
		if len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
			t.Errorf("device %d: devices %v, want %v", tc.device, got, tc.want)
		}
	}
}

// TestDumpCheckDevice: an OOM at the dump of a snapshot of several
// devices must say which device ran out; of one device it need not.
func TestDumpCheckDevice(t *testing.T) {
	one := build(t, []seg{{addr: 0x1000, blocks: []blk{{size: 2 << 20, req: 2 << 20, state: "active_allocated"}}}}, nil)
	two, err := snapshot.Decode(strings.NewReader(`{"segments": [], "device_traces": [
		[{"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "time_us": 1}],
		[{"action": "alloc", "addr": 8192, "size": 512, "stream": 0, "time_us": 2}]]}`), "two.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	dump := &DumpOOM{RequestedBytes: 1 << 30}
	for _, tc := range []struct {
		name   string
		d      *DumpOOM
		s      *snapshot.Snapshot
		chosen bool
		want   string
	}{
		{"one device", dump, one, false, ""},
		{"two devices, chosen", dump, two, true, ""},
		{"two devices", dump, two, false, "--at-dump: the snapshot has devices 0, 1; say which one ran out with --device"},
		{"no dump asked", nil, two, false, ""},
	} {
		err := tc.d.CheckDevice(tc.s, tc.chosen)
		if (err == nil) != (tc.want == "") || err != nil && err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
