package report

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

const mib = 1 << 20

// builder assembles small snapshots for tests.
type builder struct{ s *snapshot.Snapshot }

func newBuilder() *builder {
	return &builder{&snapshot.Snapshot{
		Source:  snapshot.Source{Name: "test.pickle", Encoding: "pickle", Protocol: 4, Generation: snapshot.GenD5},
		Strings: []string{""},
		Streams: []int64{0},
		Stacks:  snapshot.StackTable{Offsets: []int32{0, 0}},
	}}
}

type blk struct {
	size, req uint64
	state     snapshot.BlockState
}

func (b *builder) segment(device int32, addr uint64, stream snapshot.StreamID, large bool, blocks ...blk) {
	seg := snapshot.Segment{Device: device, Address: addr, Stream: stream, Large: large, HasPoolID: true,
		FirstBlock: int32(len(b.s.Blocks)), NumBlocks: int32(len(blocks))}
	a := addr
	for _, x := range blocks {
		b.s.Blocks = append(b.s.Blocks, snapshot.Block{Addr: a, RawAddress: a, HasAddress: true, Size: x.size,
			RequestedSize: x.req, HasRequestedSize: true, State: x.state})
		seg.TotalSize += x.size
		if x.state == snapshot.BlockActiveAllocated {
			seg.AllocatedSize += x.size
		}
		if x.state != snapshot.BlockInactive {
			seg.ActiveSize += x.size
			seg.RequestedSize += x.req
		}
		a += x.size
	}
	b.s.Segments = append(b.s.Segments, seg)
}

func (b *builder) event(device int, a snapshot.Action, addr, size uint64, timeUS int64) {
	for len(b.s.Traces) <= device {
		b.s.Traces = append(b.s.Traces, snapshot.Trace{})
	}
	e := snapshot.Event{Action: a, Addr: addr, Size: size, TimeUS: timeUS, Flags: snapshot.FlagHasTime}
	b.s.Traces[device].Events = append(b.s.Traces[device].Events, e)
}

var (
	allocated = snapshot.BlockActiveAllocated
	pending   = snapshot.BlockActivePendingFree
	inactive  = snapshot.BlockInactive
)

func TestStats(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *builder)
		want  string // the report without the legend
	}{
		{
			// The example output in the spec, verified against PyTorch.
			name: "two pages",
			build: func(b *builder) {
				b.segment(0, 1<<32, 0, true, blk{20 * mib, 20 * mib, allocated}, blk{10 * mib, 10 * mib, allocated}, blk{10 * mib, 0, inactive})
				b.segment(0, 1<<33, 0, false, blk{2 * mib, 0, inactive})
			},
			want: `Summary of segments >= 20.0MiB in size
[ab] 40.0MiB allocated, 10.0MiB (0.0% internal) free
segments: 2
total_reserved: 42.0MiB
total_allocated: 30.0MiB
total_free: 12.0MiB (0.0% internal)
`,
		},
		{
			// Two blocks share page 0: 5+6 MiB = 55% -> digit 5; pending
			// frees count as free; internal free from rounding; stream suffix
			// uses the raw stream value; sorting by size puts the small
			// segment first.
			name: "shared page and stream",
			build: func(b *builder) {
				b.s.Streams = append(b.s.Streams, 94251832147200)
				b.segment(0, 1<<34, 1, true, blk{5 * mib, 4 * mib, allocated}, blk{6 * mib, 6 * mib, allocated}, blk{4 * mib, 4 * mib, pending}, blk{25 * mib, 0, inactive})
				b.segment(0, 1<<33, 0, true, blk{20 * mib, 20 * mib, allocated})
			},
			want: `Summary of segments >= 20.0MiB in size
[a] 20.0MiB allocated, 0.0B free
[5 ] 40.0MiB allocated, 30.0MiB (3.3% internal) free stream_94251832147200
segments: 2
total_reserved: 60.0MiB
total_allocated: 30.0MiB
total_free: 30.0MiB (3.3% internal)
`,
		},
		{
			name:  "empty",
			build: func(b *builder) {},
			want: `Summary of segments >= 20.0MiB in size
segments: 0
total_reserved: 0.0B
total_allocated: 0.0B
total_free: 0.0B
`,
		},
		{
			// Legacy blocks: history[0].real_size, else requested_size, else size.
			name: "legacy",
			build: func(b *builder) {
				b.segment(0, 1<<32, 0, true, blk{20 * mib, 0, allocated}, blk{2 * mib, 0, allocated}, blk{2 * mib, 0, inactive})
				b.s.History = []snapshot.HistoryItem{{Addr: 1 << 32, RealSize: 19 * mib}}
				b.s.Blocks[0].NumHistory = 1
				b.s.Blocks[1].HasRequestedSize = false
			},
			want: `Summary of segments >= 20.0MiB in size
[ab] 24.0MiB allocated, 3.0MiB (33.3% internal) free
segments: 1
total_reserved: 24.0MiB
total_allocated: 21.0MiB
total_free: 3.0MiB (33.3% internal)
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuilder()
			tt.build(b)
			var out bytes.Buffer
			if err := Stats(&out, b.s); err != nil {
				t.Fatal(err)
			}
			if want := tt.want + statsLegend + "\n"; out.String() != want {
				t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
			}
		})
	}
}

func TestTrace(t *testing.T) {
	b := newBuilder()
	seg := uint64(1 << 40)
	b.segment(0, seg, 0, true, blk{4 * mib, 4 * mib, allocated}, blk{16 * mib, 0, inactive})
	b.segment(1, 1<<41, 0, true, blk{20 * mib, 0, inactive})
	b.event(0, snapshot.ActionFreeRequested, 1<<30, 512, 1)      // allocated before the trace
	b.event(0, snapshot.ActionFreeCompleted, 1<<30, 512, 2)      //
	b.event(0, snapshot.ActionSegmentAlloc, seg, 20*mib, 3)      // a
	b.event(0, snapshot.ActionAlloc, seg, 4*mib, 4)              // b, still live
	b.event(0, snapshot.ActionAlloc, seg+4*mib, 1000, 5)         // c
	b.event(0, snapshot.ActionFreeRequested, seg+4*mib, 1000, 6) //
	b.event(0, snapshot.ActionFreeCompleted, seg+4*mib, 1000, 7) //
	b.event(0, snapshot.ActionAlloc, seg+4*mib, 2000, 8)         // d, same address: new name
	b.event(0, snapshot.ActionFreeRequested, seg+4*mib, 2000, 9)
	b.event(0, snapshot.ActionFreeCompleted, seg+4*mib, 2000, 10)
	b.event(0, snapshot.ActionSegmentMap, 1<<45, 40*mib, 11) // e
	b.event(0, snapshot.ActionAlloc, 1<<45+mib, 512, 12)     // f in e
	b.event(0, snapshot.ActionSegmentUnmap, 1<<45, 40*mib, 13)
	b.event(0, snapshot.ActionAlloc, 1<<45+mib, 512, 14) // g: MEM
	b.event(0, snapshot.ActionSnapshot, 0, 4*mib, 15)
	b.event(0, snapshot.ActionOOM, 3*mib, 80*mib, 16)
	b.event(0, snapshot.ActionSegmentFree, 1<<42, 2*mib, 17)
	b.event(2, snapshot.ActionAlloc, 1<<41, 100, 1)
	var out bytes.Buffer
	if err := Trace(&out, b.s, TraceOptions{Device: -1}); err != nil {
		t.Fatal(err)
	}
	want := `Device 0 ----------------
17 entries
del 1073741824 # 512.0B, allocated before the trace began
# free completed for 1073741824 512.0B
a = cudaMalloc(1099511627776, 20.0MiB)
b = a[0:4.0MiB]
c = a[4194304:1000.0B]
del c # 1000.0B
# free completed for c 1000.0B
d = a[4194304:2.0KiB]
del d # 2.0KiB
# free completed for d 2.0KiB
e = cuMemMap(35184372088832, 40.0MiB) # expandable segment grows
f = e[1048576:512.0B]
cuMemUnmap(35184372088832, 40.0MiB) # expandable segment shrinks
g = MEM[35184373137408:512.0B]
# snapshot taken: 4.0MiB active
raise OutOfMemoryError # 80.0MiB requested, 3.0MiB free in CUDA
cudaFree(4398046511104) # 2.0MiB, allocated before the trace began
TOTAL MEM: 4.0MiB # allocated at dump time; 2 allocations of this trace still live (4.0MiB requested)

Device 2 ----------------
1 entry
a = MEM[2199023255552:100.0B]
TOTAL MEM: 0.0B # allocated at dump time; 1 allocation of this trace still live (100.0B requested)
`
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	if err := Trace(&out, b.s, TraceOptions{Device: 1}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "no trace entries for device 1\n" {
		t.Errorf("device 1: got %q", got)
	}
	if err := Trace(&out, b.s, TraceOptions{Device: 7}); err == nil {
		t.Errorf("device 7: no error")
	}

	b.s.Traces = nil
	out.Reset()
	if err := Trace(&out, b.s, TraceOptions{Device: -1}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "no trace: test.pickle is a bare list") {
		t.Errorf("bare list: got %q", out.String())
	}
}

func TestBuildInfo(t *testing.T) {
	b := newBuilder()
	b.s.Streams = append(b.s.Streams, 1234)
	b.segment(0, 1<<40, 0, true, blk{4 * mib, 3 * mib, allocated}, blk{16 * mib, 0, inactive})
	b.segment(0, 1<<41, 1, false, blk{mib, 512, pending}, blk{mib, 0, inactive})
	b.event(0, snapshot.ActionFreeRequested, 1<<30, 512, 1000)
	b.event(0, snapshot.ActionFreeCompleted, 1<<30, 512, 2000)
	b.event(0, snapshot.ActionFreeCompleted, 1<<31, 512, 2500)
	b.event(0, snapshot.ActionAlloc, 1<<40, 3*mib, 3000)
	b.event(0, snapshot.ActionOOM, 0, 3*mib, 4000)
	b.s.HasAnnotationsKey = true
	b.s.Annotations = []snapshot.Annotation{
		{Name: "ProfilerStep#1", Stage: "START"}, {Name: "ProfilerStep#1", Stage: "END"},
		{Name: "ProfilerStep#2", Stage: "START"}, {Name: "forward", Stage: "START"},
	}
	b.s.AllocatorSettings = &snapshot.AllocatorSettings{Conf: "expandable_segments:True", MaxSplitSize: -1, ExpandableSegments: true}
	peaks := func(s *snapshot.Snapshot, d int) (uint64, uint64) { return 111, 222 }
	in := BuildInfo(b.s, peaks)

	if len(in.Devices) != 1 {
		t.Fatalf("devices = %d, want 1", len(in.Devices))
	}
	d := in.Devices[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"active peak", d.ActiveTimelinePeakBytes, uint64(111)},
		{"segment peak", d.SegmentTimelinePeakBytes, uint64(222)},
		{"segments", d.Segments, 2},
		{"blocks", d.Blocks, 4},
		{"reserved", d.ReservedBytes, uint64(22 * mib)},
		{"allocated", d.AllocatedBytes, uint64(4 * mib)},
		{"active", d.ActiveBytes, uint64(5 * mib)},
		{"pools", len(d.Pools), 2},
		{"first pool type", d.Pools[0].Type, "small"},
		{"trace entries", d.TraceEntries, 5},
		{"pre-trace frees", d.PreTraceFrees, 2},
		{"time span", *d.TimeSpan, TimeSpan{1000, 4000, 3000}},
		{"annotation groups", in.Annotations.Groups[0], NameCount{"ProfilerStep#*", 2}},
		{"distinct annotations", in.Annotations.Distinct, 3},
		{"streams", len(in.Streams), 2},
		{"pytorch", in.PyTorch, "2.5+"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
	joined := strings.Join(in.Warnings, "\n")
	for _, w := range []string{"2 frees of blocks allocated before the trace started", "1 out-of-memory", "no alloc entry of the trace has a stack"} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings lack %q:\n%s", w, joined)
		}
	}

	js, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Devices []map[string]any `json:"devices"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"device", "active_timeline_peak_bytes", "segment_timeline_peak_bytes", "segments", "blocks", "trace_entries"} {
		if _, ok := back.Devices[0][k]; !ok {
			t.Errorf("JSON device lacks %q", k)
		}
	}
	var text bytes.Buffer
	if err := WriteInfo(&text, in); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cuda:0", "expandable_segments:True", "unlimited", "ProfilerStep#* x2", "111.0B (111 bytes)"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("info text lacks %q:\n%s", want, text.String())
		}
	}
}

func TestInfoWarnings(t *testing.T) {
	b := newBuilder()
	b.segment(0, 1<<40, 0, true, blk{2 * mib, 0, inactive})
	b.s.Traces = []snapshot.Trace{{}}
	if w := BuildInfo(b.s, nil).Warnings; len(w) != 1 || !strings.HasPrefix(w[0], "empty trace") {
		t.Errorf("empty trace warnings = %q", w)
	}
	b.s.Traces = nil
	b.s.Source.Generation = snapshot.GenL
	in := BuildInfo(b.s, nil)
	if w := in.Warnings; len(w) != 1 || !strings.HasPrefix(w[0], "no trace") {
		t.Errorf("bare list warnings = %q", w)
	}
	bad := func(*snapshot.Snapshot, int) (uint64, uint64) { panic("index out of range") }
	b.segment(0, 1<<40, 0, true, blk{2 * mib, 0, inactive})
	if w := BuildInfo(b.s, bad).Warnings; !strings.Contains(strings.Join(w, "\n"), "timeline peaks unavailable: index out of range") {
		t.Errorf("panicking peaks: warnings = %q", w)
	}
	if in.PyTorch == "unknown" {
		t.Errorf("no PyTorch hint for generation L")
	}
}

func TestIntervals(t *testing.T) {
	var iv intervals
	iv.add(traceSegment{"a", 100, 10})
	iv.add(traceSegment{"b", 200, 10})
	iv.add(traceSegment{"c", 150, 10})
	iv.add(traceSegment{"d", 105, 20}) // overlaps a, which is dropped
	tests := []struct {
		addr uint64
		want string
	}{{99, ""}, {100, ""}, {105, "d"}, {124, "d"}, {125, ""}, {150, "c"}, {159, "c"}, {160, ""}, {209, "b"}, {210, ""}}
	for _, tt := range tests {
		got, _ := iv.find(tt.addr)
		if got.name != tt.want {
			t.Errorf("find(%d) = %q, want %q", tt.addr, got.name, tt.want)
		}
	}
	if _, ok := iv.removeAt(150); !ok {
		t.Errorf("removeAt(150) found nothing")
	}
	iv.removeRange(0, 201) // removes d and b
	if len(iv) != 0 {
		t.Errorf("left %v", iv)
	}
}

// TestRandomSnapshotsDoNotPanic feeds the reports snapshots whose numbers
// disagree with each other (block sizes that overflow their segment,
// requested sizes above block sizes, zero sizes, huge addresses, frees
// without allocs) as a decoder would pass them through.
func TestRandomSnapshotsDoNotPanic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []uint64{0, 1, 512, mib, 20 * mib, 20*mib + 1, 1 << 40, 1<<63 - 1}
	for iter := 0; iter < 300; iter++ {
		b := newBuilder()
		for i := rng.IntN(4); i > 0; i-- {
			var blocks []blk
			for j := rng.IntN(5); j > 0; j-- {
				blocks = append(blocks, blk{sizes[rng.IntN(len(sizes))], sizes[rng.IntN(len(sizes))], snapshot.BlockState(rng.IntN(3))})
			}
			b.segment(int32(rng.IntN(2)), rng.Uint64(), 0, rng.IntN(2) == 0, blocks...)
			if rng.IntN(3) == 0 {
				b.s.Segments[len(b.s.Segments)-1].TotalSize = sizes[rng.IntN(len(sizes))]
			}
		}
		for i := rng.IntN(30); i > 0; i-- {
			b.event(rng.IntN(3), snapshot.Action(rng.IntN(int(snapshot.ActionOOM)+1)), rng.Uint64()%4096, sizes[rng.IntN(len(sizes))], rng.Int64())
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("iteration %d panicked: %v", iter, r)
				}
			}()
			Stats(io.Discard, b.s)
			Trace(io.Discard, b.s, TraceOptions{Device: -1})
			WriteInfo(io.Discard, BuildInfo(b.s, nil))
		}()
	}
}
