package analysis

import (
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/synth"
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
