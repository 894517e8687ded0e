package monitor

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func line(rank, step int, alloc, peak uint64) string {
	return fmt.Sprintf(`{"gpumem_monitor":1,"rank":%d,"device":0,"step":%d,"time":1.5,"allocated_bytes":%d,"peak_allocated_bytes":%d,"reserved_bytes":%d,"total_bytes":%d,"utilization":0.1}`+"\n",
		rank, step, alloc, peak, peak+(1<<20), uint64(80)<<30)
}

const mib = 1 << 20

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		peaks  []uint64 // MiB, steps 1..
		median uint64
		max    uint64
		step   int
		jumps  []int
	}{
		{"flat", []uint64{100, 100, 100, 100}, 100, 100, 1, nil},
		{"one spike", []uint64{100, 100, 200, 100, 100}, 100, 200, 3, []int{3}},
		{"within 10%", []uint64{100, 109, 100}, 100, 109, 2, nil},
		{"two reports: no jumps", []uint64{100, 300}, 200, 300, 2, nil},
		{"even count median", []uint64{100, 100, 300, 300}, 200, 300, 3, []int{3, 4}},
	} {
		var b strings.Builder
		for i, p := range tc.peaks {
			b.WriteString(line(2, i+1, 50*mib, p*mib))
		}
		s, err := Read(strings.NewReader(b.String()), "r.jsonl")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var jumps []int
		for _, j := range s.Jumps {
			jumps = append(jumps, j.Step)
		}
		if s.Rank != 2 || s.MedianPeak != tc.median*mib || s.MaxPeak != tc.max*mib || s.MaxStep != tc.step || fmt.Sprint(jumps) != fmt.Sprint(tc.jumps) {
			t.Errorf("%s: rank %d median %d max %d at %d jumps %v; want median %d max %d at %d jumps %v", tc.name, s.Rank,
				s.MedianPeak/mib, s.MaxPeak/mib, s.MaxStep, jumps, tc.median, tc.max, tc.step, tc.jumps)
		}
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "r.jsonl: no monitor reports"},
		{line(0, 1, 1, 1) + `{"gpumem_monitor":1,"rank":0,"st`, "r.jsonl:2: not a monitor report: unexpected end of JSON input"},
		{line(0, 1, 1, 1) + `{"rank":0}` + "\n", `r.jsonl:2: not a monitor report (no "gpumem_monitor" key)`},
		{line(0, 1, 1, 1) + line(1, 1, 1, 1), "r.jsonl:2: rank 1 after rank 0: one file per rank (gpumem ranks compares them)"},
		{strings.Repeat("x", 70000), "r.jsonl:1: line longer than 65536 bytes: not a monitor report"},
	} {
		_, err := Read(strings.NewReader(tc.in), "r.jsonl")
		if err == nil || err.Error() != tc.want {
			t.Errorf("Read(%.40q): %v, want %s", tc.in, err, tc.want)
		}
	}
}

func TestSniff(t *testing.T) {
	for in, want := range map[string]bool{
		line(0, 1, 1, 1):          true,
		"  \n" + line(0, 1, 1, 1): true,
		`{"segments": []}`:        false,
		`{"file": "x.pickle"}`:    false,
		"\x80\x04\x95":            false,
		`[{"gpumem_monitor":1}]`:  true,
		`{"gpumem_monitor`:        false,
	} {
		if Sniff([]byte(in)) != want {
			t.Errorf("Sniff(%q) != %v", in, want)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add(line(0, 1, 1, 1) + line(0, 2, 5, 7) + line(0, 3, 1, 100<<20))
	f.Add(`{"gpumem_monitor":1,"step":-1,"peak_allocated_bytes":18446744073709551615}`)
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Read(strings.NewReader(in), "f")
		if err != nil {
			return
		}
		if s.MaxPeak < s.MedianPeak || len(s.Jumps) > len(s.Reports) {
			t.Fatalf("max %d < median %d or jumps %d > reports %d", s.MaxPeak, s.MedianPeak, len(s.Jumps), len(s.Reports))
		}
	})
}

// TestNoJumpsJSON: a series without jumps lists none, [] rather than null,
// however few its reports.
func TestNoJumpsJSON(t *testing.T) {
	for _, in := range []string{line(0, 1, 1, 1), line(0, 1, 1, mib) + line(0, 2, 1, mib) + line(0, 3, 1, mib)} {
		s, err := Read(strings.NewReader(in), "m.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(s)
		if err != nil || !strings.Contains(string(b), `"peak_jumps":[]`) {
			t.Errorf("%s, %v: want \"peak_jumps\":[]", b, err)
		}
	}
}
