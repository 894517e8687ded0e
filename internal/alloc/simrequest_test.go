package alloc

import "testing"

func TestSimRequest(t *testing.T) {
	for _, tc := range []struct {
		r       SimRequest
		wantErr string
	}{
		{SimRequest{Capacity: "80GiB", Fraction: 0.5, Config: "expandable_segments:True"}, ""},
		{SimRequest{Capacity: "lots"}, "--capacity: "},
		{SimRequest{Fraction: 1.5, Capacity: "1GiB"}, "--fraction must be in [0, 1], got 1.5"},
		{SimRequest{Fraction: 0.5}, "--fraction needs --capacity"},
		{SimRequest{BatchScale: 0.5, Script: "x"}, "--batch-scale replays a snapshot, not a script"},
		{SimRequest{BatchScale: 0.5, Sweep: true}, "--batch-scale replays under the recorded settings: it does not combine with --sweep, --config or --fraction"},
		{SimRequest{BatchScale: -1}, "--batch-scale -1: want a number above 0 (and at most 1000), e.g. 0.5"},
		{SimRequest{Curve: 300, Sweep: true}, ""},
		{SimRequest{Curve: -1}, "--curve -1: want a number of buckets from 1 to 4096"},
		{SimRequest{Curve: 5000}, "--curve 5000: want a number of buckets from 1 to 4096"},
		{SimRequest{Curve: 10, Script: "x"}, "--curve draws a snapshot's replay: it does not combine with --script or --batch-scale"},
		{SimRequest{Curve: 10, BatchScale: 0.5}, "--curve draws a snapshot's replay"},
	} {
		err := tc.r.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%+v: %v", tc.r, err)
		case tc.wantErr != "" && (err == nil || len(err.Error()) < len(tc.wantErr) || err.Error()[:len(tc.wantErr)] != tc.wantErr):
			t.Errorf("%+v: error %v, want %q", tc.r, err, tc.wantErr)
		}
	}
	r := SimRequest{Capacity: "oom", Fraction: 0.25, Config: "garbage_collection_threshold:0.8", Curve: 7}
	if err := r.Validate(); err != nil || !r.CapacityOOM {
		t.Fatalf("oom: %v, CapacityOOM %v", err, r.CapacityOOM)
	}
	r.Capacity = "1GiB"
	if err := r.Validate(); err != nil || r.CapacityOOM {
		t.Fatalf("1GiB after oom: %v, CapacityOOM %v", err, r.CapacityOOM)
	}
	o, err := r.Options(1, true, true)
	if err != nil || o.CapacityOOM || o.Config == nil || o.Config.MemoryFraction != 0.25 || o.Capacity != 1<<30 || o.Device != 1 || !o.FromEmpty || o.Curve != 7 {
		t.Errorf("Options = %+v, %v", o, err)
	}
}
