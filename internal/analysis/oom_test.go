package analysis

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/synth"
	"github.com/gpumem/gpumem/snapshot"
)

var update = flag.Bool("update", false, "rewrite the testdata fixtures and golden files")

// The OOM fixtures: allocator scripts run through internal/alloc on a
// device of the given capacity, written out as PyTorch's JSON snapshot
// (testdata/NAME.json, rewritten with -update) and decoded back.
var oomFixtures = []struct {
	name, script     string
	capacity, extern uint64
}{
	// Fifteen 6 MiB blocks fill five 20 MiB segments (a 100 MiB device);
	// freeing the first and last of every three leaves 70 MiB cached
	// free in holes of 6 and 8 MiB: a 12 MiB request fails.
	{"oom-fragmentation", fragScript, 100 * mb, 0},
	// 60 MiB then 50 MiB on a 100 MiB device: nothing is cached free.
	{"oom-shortage", "alloc a 60MiB\nalloc b 50MiB\n", 100 * mb, 0},
	// The same on a 128 MiB device of which 28 MiB are held outside the
	// allocator: CUDA reports 40 MiB free, as on the 100 MiB device.
	{"oom-outside", "alloc a 60MiB\nalloc b 50MiB\n", 128 * mb, 28 * mb},
	{"no-oom", "alloc a 60MiB\nalloc b 20MiB\nfree a\n", 100 * mb, 0},
	// Two OOMs: 50 MiB, then 45 MiB, with 60 MiB allocated of 100 MiB.
	{"oom-twice", "alloc a 60MiB\nalloc b 50MiB\nalloc c 45MiB\n", 100 * mb, 0},
}

var fragScript = func() string {
	var b strings.Builder
	for i := 0; i < 15; i++ {
		b.WriteString("alloc x" + string(rune('a'+i)) + " 6MiB\n")
	}
	for i := 0; i < 15; i++ {
		if i%3 != 1 {
			b.WriteString("free x" + string(rune('a'+i)) + "\n")
		}
	}
	b.WriteString("alloc big 12MiB\n")
	return b.String()
}()

// fixture returns the decoded fixture snapshot.
func fixture(t testing.TB, name string) *snapshot.Snapshot {
	t.Helper()
	path := filepath.Join("testdata", name+".json")
	if *update {
		for _, f := range oomFixtures {
			if f.name != name {
				continue
			}
			cmds, err := alloc.ParseScript(strings.NewReader(f.script))
			if err != nil {
				t.Fatal(err)
			}
			_, a, err := alloc.RunScript(cmds, alloc.DefaultConfig(), alloc.Options{Capacity: f.capacity, External: f.extern, Record: true})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := snapshot.WriteJSON(&buf, a.Snapshot()); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := snapshot.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestOOMVerdicts(t *testing.T) {
	for _, tt := range []struct {
		fixture  string
		capacity uint64
		verdict  string
		// R, F, reserved, allocated, largest free block, short.
		req, free, reserved, allocated, largest, short uint64
		outside                                        int64 // -1: no capacity
		arith                                          string
	}{
		{"oom-fragmentation", 0, VerdictFragmentation, 12 * mb, 0, 100 * mb, 30 * mb, 8 * mb, 0, -1,
			"R <= C + F = 70 MiB (73400320 B): the total would have held it"},
		{"oom-shortage", 0, VerdictShortage, 50 * mb, 40 * mb, 60 * mb, 60 * mb, 0, 10 * mb, -1,
			"R > C + F = 40 MiB (41943040 B): short by 10 MiB (10485760 B)"},
		{"oom-shortage", 100 * mb, VerdictShortage, 50 * mb, 40 * mb, 60 * mb, 60 * mb, 0, 10 * mb, 0,
			"R > C + F + X = 40 MiB (41943040 B): even that would not have been enough"},
		{"oom-outside", 128 * mb, VerdictOutside, 50 * mb, 40 * mb, 60 * mb, 60 * mb, 0, 10 * mb, 28 * mb,
			"R <= C + F + X = 68 MiB (71303168 B): the memory held outside PyTorch's allocator made the difference"},
		{"oom-outside", 0, VerdictShortage, 50 * mb, 40 * mb, 60 * mb, 60 * mb, 0, 10 * mb, -1, ""},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			d := NewDevice(fixture(t, tt.fixture), 0)
			a, err := d.OOMAnswer(OOMOptions{Capacity: tt.capacity, NoReplay: true})
			if err != nil {
				t.Fatal(err)
			}
			if a.Verdict != tt.verdict || a.RequestedBytes != tt.req || a.DeviceFreeBytes != tt.free ||
				a.ReservedBytes != tt.reserved || a.AllocatedBytes != tt.allocated || a.LargestFreeBlockBytes != tt.largest ||
				a.ShortBytes != tt.short || a.ReservedUnallocatedBytes != tt.reserved-tt.allocated {
				t.Errorf("got %s R=%d F=%d reserved=%d allocated=%d largest=%d short=%d\n%s",
					a.Verdict, a.RequestedBytes, a.DeviceFreeBytes, a.ReservedBytes, a.AllocatedBytes, a.LargestFreeBlockBytes, a.ShortBytes,
					strings.Join(a.Arithmetic, "\n"))
			}
			if (a.OutsideAllocatorBytes == nil) != (tt.outside < 0) || a.OutsideAllocatorBytes != nil && int64(*a.OutsideAllocatorBytes) != tt.outside {
				t.Errorf("outside allocator %v, want %d", a.OutsideAllocatorBytes, tt.outside)
			}
			if tt.arith != "" && !strings.Contains(strings.Join(a.Arithmetic, "\n"), tt.arith) {
				t.Errorf("arithmetic lacks %q:\n%s", tt.arith, strings.Join(a.Arithmetic, "\n"))
			}
			if len(a.OOMs) != 1 {
				t.Errorf("%d OOMs", len(a.OOMs))
			}
		})
	}
}

// TestOOMAtDump: an OOM the trace does not record, given at the dump of
// the no-OOM fixture (reserved 80 MiB, allocated 20 MiB, its one free
// block 60 MiB on stream 0), gets each verdict from the same arithmetic.
func TestOOMAtDump(t *testing.T) {
	for _, tt := range []struct {
		name           string
		dump           DumpOOM
		capacity       uint64
		verdict        string
		largest, short uint64
		outside        int64 // -1: no capacity
		arith          string
	}{
		{"fragmentation", DumpOOM{RequestedBytes: 70 * mb, DeviceFreeBytes: 30 * mb}, 0, VerdictFragmentation, 60 * mb, 0, -1,
			"R <= C + F = 90 MiB (94371840 B): the total would have held it"},
		{"shortage", DumpOOM{RequestedBytes: 100 * mb, DeviceFreeBytes: 10 * mb}, 90 * mb, VerdictShortage, 60 * mb, 30 * mb, 0,
			"R > C + F + X = 70 MiB (73400320 B): even that would not have been enough"},
		{"outside", DumpOOM{RequestedBytes: 100 * mb, DeviceFreeBytes: 10 * mb}, 128 * mb, VerdictOutside, 60 * mb, 30 * mb, 38 * mb,
			"R <= C + F + X = 108 MiB (113246208 B): the memory held outside PyTorch's allocator made the difference"},
		{"other stream", DumpOOM{RequestedBytes: 70 * mb, DeviceFreeBytes: 30 * mb, Stream: 7}, 0, VerdictFragmentation, 0, 0, -1,
			"largest free block of stream 7's large pool is 0 B (0 B) < R"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDevice(fixture(t, "no-oom"), 0)
			dump := tt.dump
			a, err := d.OOMAnswer(OOMOptions{Capacity: tt.capacity, AtDump: &dump})
			if err != nil {
				t.Fatal(err)
			}
			arith := strings.Join(a.Arithmetic, "\n")
			if !a.AtDump || a.Verdict != tt.verdict || a.RequestedBytes != tt.dump.RequestedBytes || a.DeviceFreeBytes != tt.dump.DeviceFreeBytes ||
				a.ReservedBytes != 80*mb || a.AllocatedBytes != 20*mb || a.LargestFreeBlockBytes != tt.largest || a.ShortBytes != tt.short ||
				a.Stream != tt.dump.Stream || a.At.Event != 5 || len(a.OOMs) != 1 || len(a.Settings) != 0 {
				t.Errorf("got at_dump %v %s R=%d F=%d reserved=%d allocated=%d largest=%d short=%d stream %d at %+v, %d OOMs, %d settings\n%s",
					a.AtDump, a.Verdict, a.RequestedBytes, a.DeviceFreeBytes, a.ReservedBytes, a.AllocatedBytes, a.LargestFreeBlockBytes,
					a.ShortBytes, a.Stream, a.At, len(a.OOMs), len(a.Settings), arith)
			}
			if (a.OutsideAllocatorBytes == nil) != (tt.outside < 0) || a.OutsideAllocatorBytes != nil && int64(*a.OutsideAllocatorBytes) != tt.outside {
				t.Errorf("outside allocator %v, want %d", a.OutsideAllocatorBytes, tt.outside)
			}
			if !strings.Contains(arith, tt.arith) || !strings.Contains(arith, "at the dump") {
				t.Errorf("arithmetic lacks %q or the dump:\n%s", tt.arith, arith)
			}
		})
	}
	// A trace that records its OOMs is answered from them.
	d := NewDevice(fixture(t, "oom-shortage"), 0)
	if _, err := d.OOMAnswer(OOMOptions{AtDump: &DumpOOM{RequestedBytes: mb}}); err == nil || !strings.Contains(err.Error(), "records 1 out-of-memory") {
		t.Errorf("--at-dump on a trace with an OOM: %v", err)
	}
}

func TestNoOOMHeadroom(t *testing.T) {
	d := NewDevice(fixture(t, "no-oom"), 0)
	a, err := d.OOMAnswer(OOMOptions{Capacity: 100 * mb})
	if err != nil {
		t.Fatal(err)
	}
	h := a.Headroom
	if a.Verdict != VerdictNoOOM || h == nil || h.PeakReservedBytes != 80*mb || h.PeakAllocatedBytes != 80*mb || *h.HeadroomBytes != 20*mb {
		t.Fatalf("verdict %s headroom %+v", a.Verdict, h)
	}
	if len(a.OOMs) != 0 {
		t.Errorf("ooms %v", a.OOMs)
	}
}

// TestOOMSettingsReplay: the settings come from real replays through
// internal/alloc at the capacity the OOM implies. Expandable segments put
// the fragmentation fixture's blocks in one range where the freed
// neighbours merge into 12 MiB holes; nothing can serve the shortage.
func TestOOMSettingsReplay(t *testing.T) {
	avoids := func(a *OOMAnswer) map[string]bool {
		out := map[string]bool{}
		for _, s := range a.Settings {
			if s.ReplayDeclined != "" {
				t.Fatalf("replay: %s", s.ReplayDeclined)
			}
			if s.CapacityBytes != a.ReservedBytes+a.DeviceFreeBytes {
				t.Errorf("%s replayed at %d", s.Config, s.CapacityBytes)
			}
			out[s.Config] = s.AvoidsOOM
		}
		return out
	}
	frag, err := NewDevice(fixture(t, "oom-fragmentation"), 0).OOMAnswer(OOMOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := avoids(frag)
	if got["recorded"] || !got["expandable_segments:True"] {
		t.Errorf("fragmentation: recorded avoids=%v, expandable avoids=%v", got["recorded"], got["expandable_segments:True"])
	}
	found := false
	for _, s := range frag.Suggestions {
		found = found || s.Kind == "allocator_setting" && strings.Contains(s.Text, "expandable_segments:True")
	}
	if !found {
		t.Errorf("no expandable_segments suggestion: %+v", frag.Suggestions)
	}
	short, err := NewDevice(fixture(t, "oom-shortage"), 0).OOMAnswer(OOMOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for cfg, ok := range avoids(short) {
		if ok {
			t.Errorf("shortage: %s avoids it", cfg)
		}
	}
	if n := len(short.Suggestions); n == 0 || short.Suggestions[n-1].Kind != "none_avoids" {
		t.Errorf("shortage suggestions %+v", short.Suggestions)
	}
}

func TestLookupGPU(t *testing.T) {
	for _, tt := range []struct {
		in, want, err string
	}{
		{"H100", "H100-80GB", ""},
		{"nvidia a100-80gb", "A100-80GB", ""},
		{"A100", "", "A100 is ambiguous: A100-40GB, A100-80GB"},
		{"rtx", "", "rtx is ambiguous: RTX3090, RTX4090"},
		{"A100-40", "A100-40GB", ""},
		{"TPU", "", "known: A100-40GB"},
	} {
		g, err := LookupGPU(tt.in)
		if g.Name != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%q: %v %v", tt.in, g, err)
		}
	}
}

// TestOOMSuggestions: a hand-built snapshot in the spec's format (an oom
// entry with device_free and the rounded size) where a forward's 24 MiB
// activation is live when a 16 MiB request fails 4 MiB short.
func TestOOMSuggestions(t *testing.T) {
	const segAddr = 0x10000000
	fwd := []string{"model.py:5:forward", "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py:1750:_call_impl", "train.py:1:main"}
	s := build(t, []seg{{addr: segAddr, blocks: []blk{
		{size: 8 * mb, req: 8 * mb, state: "active_allocated"},
		{size: 24 * mb, req: 24 * mb, state: "active_allocated", frames: fwd},
		{size: 8 * mb, state: "inactive"},
	}}}, []ev{
		{action: "alloc", addr: segAddr + 8*mb, size: 24 * mb, time: 10, frames: fwd},
		{action: "oom", free: 4 * mb, size: 16 * mb, time: 20, frames: fwd},
	})
	a, err := NewDevice(s, 0).OOMAnswer(OOMOptions{NoReplay: true})
	if err != nil {
		t.Fatal(err)
	}
	if a.Verdict != VerdictShortage || a.ShortBytes != 4*mb || a.Categories["activation"] != 24*mb {
		t.Fatalf("verdict %s short %d activations %d\n%s", a.Verdict, a.ShortBytes, a.Categories["activation"], strings.Join(a.Arithmetic, "\n"))
	}
	type sug struct {
		kind  string
		bytes uint64
		text  string
	}
	want := []sug{
		{"smaller_batch", 4 * mb, "the allocations that scale with the batch hold 24 MiB at the OOM: a batch that shrinks them by at least 4 MiB (17%) is needed (arithmetic, not replayed)"},
		{"activation_checkpointing", 24 * mb, "activation checkpointing frees up to 24 MiB of activations (4 MiB needed)"},
		{"free_site", 24 * mb, "free or shrink forward (model.py:5) (activation, 1 allocations, 24 MiB live) before this point"},
	}
	if len(a.Suggestions) != len(want) {
		t.Fatalf("suggestions %+v", a.Suggestions)
	}
	for i, w := range want {
		g := a.Suggestions[i]
		if g.Kind != w.kind || g.Bytes != w.bytes || g.Text != w.text {
			t.Errorf("suggestion %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestSeveralOOMs: every OOM is answered in OOMs; the top level is the
// first one's.
func TestSeveralOOMs(t *testing.T) {
	a, err := NewDevice(fixture(t, "oom-twice"), 0).OOMAnswer(OOMOptions{NoReplay: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.OOMs) != 2 || a.RequestedBytes != 50*mb || a.OOMs[0].RequestedBytes != 50*mb || a.OOMs[1].RequestedBytes != 45*mb ||
		a.OOMs[1].ShortBytes != 5*mb || a.OOMs[1].Verdict != VerdictShortage || a.OOMs[1].At.Event <= a.OOMs[0].At.Event {
		t.Errorf("%d OOMs: top %d; %+v", len(a.OOMs), a.RequestedBytes, a.OOMs)
	}
}

// TestOOMInsideBackward: a synthetic run (gpumem synth --capacity 4GiB)
// that runs out inside its backward pass. What the unfinished pass still
// holds has no known fate: unknown, not gradient; the rest keeps its
// category.
func TestOOMInsideBackward(t *testing.T) {
	s, res, err := synth.Generate(synth.DefaultWorkload("transformer"), synth.Options{Capacity: 4 << 30})
	if err != nil || res.OOM == nil {
		t.Fatalf("synth: %v (no OOM: %v)", err, res.OOM == nil)
	}
	a, err := NewDevice(s, 0).OOMAnswer(OOMOptions{NoReplay: true})
	if err != nil {
		t.Fatal(err)
	}
	c := a.Categories
	if c["gradient"] != 0 || c["unknown"] != 500*mb || c["parameter"] == 0 || c["optimizer_state"] != 2*c["parameter"] {
		t.Errorf("categories at the OOM: %v", c)
	}
}

// TestSynthShortage: gpumem synth --model mlp --layers 8 --hidden 8192
// --capacity 8GiB runs out creating optimizer state. The verdict and its
// figures match PyTorch's own message for that OOM ("Tried to allocate
// 256.00 MiB ... 170.00 MiB is free ... 19.05 MiB is reserved by PyTorch
// but unallocated"), and no allocator setting avoids it in a replay.
func TestSynthShortage(t *testing.T) {
	s, res, err := synth.Generate(synth.Workload{Model: "mlp", Layers: 8, Hidden: 8192}, synth.Options{Capacity: 8 << 30})
	if err != nil || res.OOM == nil {
		t.Fatalf("synth: %v (no OOM: %v)", err, res.OOM == nil)
	}
	a, err := NewDevice(s, 0).OOMAnswer(OOMOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Verdict != VerdictShortage || a.RequestedBytes != 268435456 || a.DeviceFreeBytes != 178257920 ||
		a.ReservedUnallocatedBytes != 19979264 || a.ShortBytes != 268435456-178257920-19979264 {
		t.Errorf("%s: R %d F %d C %d short %d\n%s", a.Verdict, a.RequestedBytes, a.DeviceFreeBytes, a.ReservedUnallocatedBytes, a.ShortBytes, strings.Join(a.Arithmetic, "\n"))
	}
	if a.DeviceFreeBytes != res.OOM.DeviceFree || a.RequestedBytes != res.OOM.AllocSize && a.RequestedBytes != res.OOM.Size {
		t.Errorf("OOM entry %d/%d, the allocator's error %+v", a.RequestedBytes, a.DeviceFreeBytes, res.OOM)
	}
	if len(a.Settings) != len(alloc.SweepConfigs)+1 {
		t.Errorf("%d settings replayed", len(a.Settings))
	}
	for _, st := range a.Settings {
		if st.AvoidsOOM || st.ReplayDeclined != "" {
			t.Errorf("%s: avoids %v (%s)", st.Config, st.AvoidsOOM, st.ReplayDeclined)
		}
	}
}
