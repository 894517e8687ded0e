package record

import (
	"flag"
	"io"
	"slices"
	"testing"
)

// TestOptionValues: the command line's spellings of steps, ranks and the
// monitor interval, and the values each rule refuses.
func TestOptionValues(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		ok      bool
		steps   []int
		ranks   []int
		monitor int
	}{
		{nil, true, nil, nil, 0},
		{[]string{"--step", "1,3", "--step", "10"}, true, []int{1, 3, 10}, nil, 0},
		{[]string{"--step", "0"}, false, nil, nil, 0},
		{[]string{"--step", "1,,2"}, false, nil, nil, 0},
		{[]string{"--ranks", "0, 8"}, true, nil, []int{0, 8}, 0},
		{[]string{"--ranks", "-1"}, false, nil, nil, 0},
		{[]string{"--ranks", ""}, false, nil, nil, 0},
		{[]string{"--monitor"}, true, nil, nil, 1},
		{[]string{"--monitor=5"}, true, nil, nil, 5},
		{[]string{"--monitor=false"}, true, nil, nil, 0},
		{[]string{"--monitor=0"}, false, nil, nil, 0},
		{[]string{"--monitor=x"}, false, nil, nil, 0},
	} {
		var o Options
		fs := flag.NewFlagSet("record", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(o.StepsValue(), "step", "")
		fs.Var(o.RanksValue(), "ranks", "")
		fs.Var(o.MonitorValue(), "monitor", "")
		err := fs.Parse(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%q: error %v, want ok %v", tc.args, err, tc.ok)
			continue
		}
		if tc.ok && (!slices.Equal(o.Steps, tc.steps) || !slices.Equal(o.Ranks, tc.ranks) || o.Monitor != tc.monitor) {
			t.Errorf("%q: steps %v ranks %v monitor %d; want %v %v %d", tc.args, o.Steps, o.Ranks, o.Monitor, tc.steps, tc.ranks, tc.monitor)
		}
		if tc.ok && tc.ranks != nil && o.RanksValue().String() == "" {
			t.Errorf("%q: ranks print empty", tc.args)
		}
	}
}
