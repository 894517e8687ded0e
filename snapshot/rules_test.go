package snapshot

import (
	"slices"
	"testing"

	"github.com/gpumem/gpumem/internal/rules"
)

func TestRequested(t *testing.T) {
	modern := &Snapshot{Source: Source{Generation: GenD5}}
	legacy := &Snapshot{Source: Source{Generation: GenD1}, History: []HistoryItem{{RealSize: 700}}}
	for _, tt := range []struct {
		name string
		s    *Snapshot
		b    Block
		want uint64
	}{
		{"modern", modern, Block{Size: 1024, RequestedSize: 1000, HasRequestedSize: true}, 1000},
		{"modern zero-byte request", modern, Block{Size: 512, HasRequestedSize: true}, 0},
		{"no requested_size", modern, Block{Size: 512}, 512},
		{"history first", legacy, Block{Size: 1024, RequestedSize: 1000, HasRequestedSize: true, NumHistory: 1}, 700},
		{"legacy requested", legacy, Block{Size: 1024, RequestedSize: 1000, HasRequestedSize: true}, 1000},
		{"legacy zero requested", legacy, Block{Size: 1024, HasRequestedSize: true}, 1024},
	} {
		if got := tt.s.Requested(&tt.b); got != tt.want {
			t.Errorf("%s: Requested = %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestDivisions(t *testing.T) {
	if d := (*AllocatorSettings)(nil).Divisions(); d != nil {
		t.Errorf("nil settings: %v", d)
	}
	a := &AllocatorSettings{RoundupPower2Divisions: []RoundupDivision{
		{IntervalMiB: "1", Divisions: 4}, {IntervalMiB: "256", Divisions: 8}, {IntervalMiB: "65536", Divisions: 16},
		{IntervalMiB: "3", Divisions: 2}, {IntervalMiB: "x", Divisions: 2}, // not intervals: ignored
	}}
	want := rules.Divisions{0: 4, 8: 8, 15: 16}
	if d := a.Divisions(); d == nil || *d != want {
		t.Errorf("Divisions = %v, want %v", d, want)
	}
}

func TestInPrivatePool(t *testing.T) {
	for _, tt := range []struct {
		seg  Segment
		want bool
	}{{Segment{}, false}, {Segment{HasPoolID: true}, false}, {Segment{HasPoolID: true, PoolID: [2]int64{1, 0}}, true},
		{Segment{HasPoolID: true, PoolID: [2]int64{0, 3}}, true}, {Segment{PoolID: [2]int64{1, 0}}, false}} {
		if got := tt.seg.InPrivatePool(); got != tt.want {
			t.Errorf("%+v: InPrivatePool = %v", tt.seg.PoolID, got)
		}
	}
}

func TestDefaultDevice(t *testing.T) {
	trace := func(n int) Trace { return Trace{Events: make([]Event, n)} }
	for _, tt := range []struct {
		name string
		s    Snapshot
		want int
	}{
		{"empty", Snapshot{}, 0},
		{"longest trace", Snapshot{Traces: []Trace{trace(2), trace(5)}}, 1},
		{"tie: the one holding memory", Snapshot{Traces: []Trace{trace(1), trace(1)},
			Segments: []Segment{{Device: 1, TotalSize: 2 << 20}}}, 1},
		{"tie, same memory: the lowest", Snapshot{Traces: []Trace{trace(3), trace(3)}}, 0},
		{"no trace: segments decide", Snapshot{Segments: []Segment{{Device: 2, TotalSize: 1}, {Device: 3, TotalSize: 5}}}, 3},
	} {
		if got := tt.s.DefaultDevice(); got != tt.want {
			t.Errorf("%s: DefaultDevice = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestDevicesBeyondTheArrays checks Devices and DefaultDevice on device
// numbers the tally keeps in its map (negative, or smallDevices and up)
// beside those it keeps in arrays, against the answer written out.
func TestDevicesBeyondTheArrays(t *testing.T) {
	trace := func(n int) Trace { return Trace{Events: make([]Event, n)} }
	traces := make([]Trace, 71)
	traces[70] = trace(2)
	traces[3] = trace(2)
	for _, tt := range []struct {
		name        string
		s           Snapshot
		devices     []int
		defaultDevs int
	}{
		{"segments only, beyond 63 and below 0",
			Snapshot{Segments: []Segment{{Device: 64, TotalSize: 9}, {Device: -1, TotalSize: 3}, {Device: 2, TotalSize: 5}, {Device: 64, TotalSize: 1}, {Device: 200, TotalSize: 10}}},
			[]int{-1, 2, 64, 200}, 64},
		{"a tie of traces decided by a device in the map",
			Snapshot{Traces: traces, Segments: []Segment{{Device: 3, TotalSize: 4}, {Device: 70, TotalSize: 5}}},
			[]int{3, 70}, 70},
		{"a tie of traces decided by a device in the arrays",
			Snapshot{Traces: traces, Segments: []Segment{{Device: 3, TotalSize: 6}, {Device: 70, TotalSize: 5}}},
			[]int{3, 70}, 3},
		{"empty", Snapshot{}, []int{}, 0},
	} {
		if got := tt.s.Devices(); !slices.Equal(got, tt.devices) {
			t.Errorf("%s: Devices = %v, want %v", tt.name, got, tt.devices)
		}
		if got := tt.s.DefaultDevice(); got != tt.defaultDevs {
			t.Errorf("%s: DefaultDevice = %d, want %d", tt.name, got, tt.defaultDevs)
		}
	}
}
