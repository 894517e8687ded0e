package analysis

import (
	"reflect"
	"strings"
	"testing"
)

const mb = 1 << 20

// liveSnap: a 20 MiB segment made before the trace with one block a
// (4 MiB, no stack) still live; the trace allocates b (2 MiB) and c
// (3 MiB) from two call sites that share their innermost user frame,
// d (1 MiB) from a third, then frees c. Peak: a+b+c+d = 10 MiB after d.
func liveSnap(t testing.TB) *Device {
	lib := "/usr/lib/python3.11/site-packages/torch/nn/functional.py:10:linear"
	s := build(t, []seg{{addr: 0x1000000, blocks: []blk{
		{size: 4 * mb, req: 4 * mb, state: "active_allocated"},
		{size: 2 * mb, req: 2 * mb, state: "active_allocated"},
		{size: 1 * mb, req: 1 * mb, state: "active_allocated"},
		{size: 13 * mb, req: 0, state: "inactive"},
	}}}, []ev{
		{action: "alloc", addr: 0x1000000 + 4*mb, size: 2 * mb, time: 1000, frames: []string{lib, "model.py:5:forward", "train.py:1:main"}},
		{action: "alloc", addr: 0x1000000 + 7*mb, size: 3 * mb, time: 2000, frames: []string{lib, "model.py:5:forward", "train.py:2:main"}},
		{action: "alloc", addr: 0x1000000 + 6*mb, size: 1 * mb, time: 3000, frames: []string{"model.py:9:loss", "train.py:3:main"}},
		{action: "free_requested", addr: 0x1000000 + 7*mb, size: 3 * mb, time: 4000},
		{action: "free_completed", addr: 0x1000000 + 7*mb, size: 3 * mb, time: 4000},
	})
	return NewDevice(s, 0)
}

func TestResolve(t *testing.T) {
	d := liveSnap(t)
	for _, tt := range []struct {
		spec      string
		event     int
		live      uint64
		errSubstr string
	}{
		{"peak", 2, 10 * mb, ""},
		{"", 2, 10 * mb, ""},
		{"end", 4, 7 * mb, ""},
		{"e0", 0, 6 * mb, ""},
		{"e3", 3, 7 * mb, ""}, // a free_requested merged with its free_completed pops at once
		{"1ms", 1, 9 * mb, ""},
		{"1500us", 1, 9 * mb, ""},
		{"3s", 0, 0, "valid events are e0..e4, valid times 0us..3000us"},
		{"e5", 0, 0, "outside device 0's trace: valid events are e0..e4"},
		{"x", 0, 0, "want peak, reserved-peak, end, eN"},
	} {
		m, err := d.Resolve(tt.spec)
		if tt.errSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errSubstr) {
				t.Errorf("%q: err %v, want %q", tt.spec, err, tt.errSubstr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.spec, err)
		}
		p := d.LiveProfile(m)
		if m.Event != tt.event || p.Bytes != tt.live {
			t.Errorf("%q: event %d live %d, want %d %d", tt.spec, m.Event, p.Bytes, tt.event, tt.live)
		}
	}
	if d.Active.PeakBytes != 10*mb {
		t.Errorf("peak %d", d.Active.PeakBytes)
	}
}

func TestFold(t *testing.T) {
	d := liveSnap(t)
	m, _ := d.Resolve("peak")
	p := d.LiveProfile(m)
	if len(p.Samples) != 4 || p.Count != 4 {
		t.Fatalf("unfolded: %d samples, %d allocations", len(p.Samples), p.Count)
	}
	q := p.Fold(1, 0)
	q.Sort()
	type row struct {
		key   string
		count int
		bytes uint64
	}
	var got []row
	for i := range q.Samples {
		got = append(got, row{q.Key(&q.Samples[i]), q.Samples[i].Count, q.Samples[i].Bytes})
	}
	want := []row{
		{"model.py:5:forward", 2, 5 * mb}, // torch's own frame skipped, b and c share it
		{"", 1, 4 * mb},                   // the pre-trace block has no stack
		{"model.py:9:loss", 1, 1 * mb},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("folded depth 1:\n got %v\nwant %v", got, want)
	}
	q2 := p.Fold(2, 0)
	q2.Sort()
	if len(q2.Samples) != 4 || q2.Key(&q2.Samples[1]) != "model.py:5:forward;train.py:2:main" {
		t.Errorf("folded depth 2: %d samples, second %q", len(q2.Samples), q2.Key(&q2.Samples[1]))
	}
	if q.Bytes != p.Bytes || q.Count != p.Count {
		t.Errorf("fold changed totals")
	}
}

// TestTopFramesWithoutUserFrames: a backward allocation (C++ frames only)
// is named by its autograd node, not by the allocator's frames.
func TestTopFramesWithoutUserFrames(t *testing.T) {
	s := build(t, nil, []ev{{action: "alloc", addr: 0x1000, size: 512, frames: []string{
		"CUDACachingAllocator.cpp:0:c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char)",
		"??:0:at::detail::empty_cuda(c10::ArrayRef<long>)",
		"VariableType_3.cpp:0:torch::autograd::VariableType::bmm(c10::DispatchKeySet)",
		"??:0:torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&)",
		"??:0:torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
	}}})
	got := TopFrames(s, s.StackFrames(s.Traces[0].Events[0].Stack), 1)
	if len(got) != 1 || !strings.Contains(FrameString(s, got[0]), "BmmBackward0::apply") {
		t.Errorf("top frame %v", got)
	}
}

// TestSiteItems: each site lists its allocations (the viewer highlights
// them), and the moment at a timestep is the one the timeline shows.
func TestSiteItems(t *testing.T) {
	d := liveSnap(t)
	m := d.MomentAtTimestep(float64(d.Active.Timestep(2)))
	if m.Event != 2 || m.Action != 2 {
		t.Fatalf("moment at timestep %d: %+v", d.Active.Timestep(2), m)
	}
	a := d.LiveAnswer(m, LiveOptions{Depth: 1, Items: true})
	var total uint64
	for _, s := range a.Sites {
		var b uint64
		for _, i := range s.Items {
			b += d.Active.Size(int(i))
		}
		if b != s.Bytes || len(s.Items) != s.Count {
			t.Errorf("site %v: items %v sum %d, bytes %d count %d", s.Frames, s.Items, b, s.Bytes, s.Count)
		}
		total += b
	}
	if total != 10*mb {
		t.Errorf("items cover %d bytes", total)
	}
}

// FuzzResolve: any --at text resolves to a moment inside the trace or is
// an error; it never panics.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"peak", "end", "reserved-peak", "e0", "e4", "e-1", "1ms", "2.5ms", "1e3us", "NaNs", "-3s", "9999999999999999999us", "ms", "e"} {
		f.Add(s)
	}
	d := liveSnap(f)
	n := len(d.Events())
	f.Fuzz(func(t *testing.T, spec string) {
		m, err := d.Resolve(spec)
		if err != nil {
			return
		}
		if m.Event < -1 || m.Event >= n || m.Action < -1 || m.Action >= len(d.Active.Events) {
			t.Errorf("%q: moment %+v outside the trace", spec, m)
		}
	})
}
