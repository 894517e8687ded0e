package synth

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

func TestGenerateTraceBalance(t *testing.T) {
	for _, w := range smallWorkloads() {
		for _, conf := range []string{"", "expandable_segments:True", "max_split_size_mb:20,roundup_power2_divisions:4"} {
			t.Run(w.Model+"/"+w.DType.String()+"/"+conf, func(t *testing.T) {
				s, res, err := Generate(w, Options{Config: conf})
				if err != nil {
					t.Fatal(err)
				}
				if res.OOM != nil || res.StepsDone != w.Steps {
					t.Fatalf("steps done %d of %d, oom %v", res.StepsDone, w.Steps, res.OOM)
				}
				ev := s.Traces[0].Events
				if res.Events != len(ev) || len(ev) == 0 {
					t.Fatalf("Result.Events %d, trace has %d", res.Events, len(ev))
				}
				// Every alloc is later freed (free_requested then free_completed
				// of the same address) or is one of the live blocks of the dump.
				live := map[uint64]uint64{}
				counts := map[snapshot.Action]int{}
				var last int64
				for i, e := range ev {
					counts[e.Action]++
					if e.TimeUS < last {
						t.Fatalf("event %d: time_us goes back", i)
					}
					last = e.TimeUS
					if cc := s.Text(s.EventMeta(&s.Traces[0], i).CompileContext); e.Stack == snapshot.NoStack || e.Flags&snapshot.FlagHasTime == 0 || cc != "N/A" {
						t.Fatalf("event %d (%v): stack %d flags %b compile_context %q", i, e.Action, e.Stack, e.Flags, cc)
					}
					switch e.Action {
					case snapshot.ActionAlloc:
						if _, dup := live[e.Addr]; dup {
							t.Fatalf("event %d: alloc of live address %#x", i, e.Addr)
						}
						live[e.Addr] = e.Size
					case snapshot.ActionFreeRequested:
						if live[e.Addr] != e.Size {
							t.Fatalf("event %d: free_requested %#x size %d, alloc size %d", i, e.Addr, e.Size, live[e.Addr])
						}
						if i+1 >= len(ev) || ev[i+1].Action != snapshot.ActionFreeCompleted || ev[i+1].Addr != e.Addr {
							t.Fatalf("event %d: free_requested not followed by its free_completed", i)
						}
						delete(live, e.Addr)
					}
				}
				if counts[snapshot.ActionFreeRequested] != counts[snapshot.ActionFreeCompleted] {
					t.Errorf("free_requested %d != free_completed %d", counts[snapshot.ActionFreeRequested], counts[snapshot.ActionFreeCompleted])
				}
				if counts[snapshot.ActionSegmentAlloc]+counts[snapshot.ActionSegmentMap] == 0 {
					t.Errorf("no segment_alloc/segment_map events")
				}
				// The dump's active blocks are exactly the allocations never freed.
				dump := map[uint64]uint64{}
				var reserved, allocated uint64
				for i := range s.Segments {
					seg := &s.Segments[i]
					reserved += seg.TotalSize
					allocated += seg.AllocatedSize
					if seg.Stack == snapshot.NoStack && !seg.IsExpandable {
						t.Errorf("segment %#x has no stack", seg.Address)
					}
					for _, b := range s.SegmentBlocks(i) {
						if b.State == snapshot.BlockActiveAllocated {
							dump[b.Addr] = b.RequestedSize
							if b.Stack == snapshot.NoStack {
								t.Errorf("live block %#x has no stack", b.Addr)
							}
						}
					}
				}
				if !reflect.DeepEqual(dump, live) {
					t.Errorf("dump has %d live blocks, trace leaves %d", len(dump), len(live))
				}
				if int64(reserved) != res.Stats.ReservedBytes[0].Current || int64(allocated) != res.Stats.AllocatedBytes[0].Current {
					t.Errorf("dump reserved/allocated %d/%d, simulator stats %d/%d", reserved, allocated,
						res.Stats.ReservedBytes[0].Current, res.Stats.AllocatedBytes[0].Current)
				}
				if s.AllocatorSettings == nil || s.AllocatorSettings.Conf != conf || len(s.AllocatorSettings.RoundupPower2Divisions) != 16 {
					t.Errorf("allocator settings %+v", s.AllocatorSettings)
				}
				if got := len(s.Annotations); got != 6*w.Steps {
					t.Errorf("%d annotations, want %d", got, 6*w.Steps)
				}
			})
		}
	}
}

func TestGenerateOOM(t *testing.T) {
	w := Workload{Model: "transformer", Layers: 2, DModel: 256, Heads: 4, Seq: 128, Batch: 2, Vocab: 1000, Steps: 5}
	_, full, err := Generate(w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	peak := uint64(full.Stats.ReservedBytes[0].Peak)
	capacity := peak * 3 / 4
	s, res, err := Generate(w, Options{Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	if res.OOM == nil {
		t.Fatalf("no OOM at capacity %d (peak reserved %d)", capacity, peak)
	}
	ev := s.Traces[0].Events
	last := ev[len(ev)-1]
	if last.Action != snapshot.ActionOOM {
		t.Fatalf("last event %v, want oom", last.Action)
	}
	if last.Size != res.OOM.Size || last.Size%512 != 0 {
		t.Errorf("oom size %d, want the rounded request %d", last.Size, res.OOM.Size)
	}
	if last.Addr != res.OOM.DeviceFree || last.Addr > capacity {
		t.Errorf("oom device_free %d, error says %d (capacity %d)", last.Addr, res.OOM.DeviceFree, capacity)
	}
	if !strings.Contains(res.OOM.Error(), "CUDA out of memory") {
		t.Errorf("OOM message %q", res.OOM.Error())
	}
	if res.StepsDone >= w.Steps {
		t.Errorf("%d steps done despite OOM", res.StepsDone)
	}
	var reserved uint64
	for _, seg := range s.Segments {
		reserved += seg.TotalSize
	}
	if reserved > capacity {
		t.Errorf("reserved %d above capacity %d", reserved, capacity)
	}
}

func TestGenerateDeterministic(t *testing.T) {
	w := smallWorkloads()[0]
	a, _, err := Generate(w, Options{Config: "expandable_segments:True"})
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := Generate(w, Options{Config: "expandable_segments:True"})
	if !reflect.DeepEqual(a, b) {
		t.Error("two runs of the same workload differ")
	}
}

func TestGenerateBadConfig(t *testing.T) {
	_, _, err := Generate(smallWorkloads()[0], Options{Config: "max_split_size_mb:1"})
	if err == nil {
		t.Fatal("max_split_size_mb:1 accepted")
	}
}
