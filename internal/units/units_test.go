package units

import (
	"math/rand"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"1048576", MiB, true}, {"512B", 512, true}, {"3MiB", 3 * MiB, true}, {"3MB", 3 * MiB, true},
		{"3mb", 3 * MiB, true}, {"2KiB", 2048, true}, {"2KB", 2048, true}, {"2K", 2048, true}, {"1.5GiB", 1536 * MiB, true},
		{"1.5 GiB", 1536 * MiB, true}, {" 4GiB ", 4 * GiB, true}, {"100MB", 100 * MiB, true}, {"1GB", GiB, true},
		{"1TB", TiB, true}, {"0", 0, true}, {"0.5k", 512, true}, {"1.9", 1, true},
		{"", 0, false}, {"MiB", 0, false}, {"3XB", 0, false}, {"x", 0, false}, {"-1", 0, false}, {"-1GiB", 0, false},
		{"1e3", 0, false}, {"1..5MiB", 0, false}, {"99999999999999999999", 0, false}, {"20000000000TiB", 0, false},
		{"16777216TiB", 0, false}, {"16777215TiB", 16777215 * TiB, true},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "bad size ") {
			t.Errorf("Parse(%q) error %q does not start with \"bad size \"", tt.in, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1048576", "1.5 GiB", "3mb", "x", "99999999999999999999", "0.1k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			return
		}
		// Units are case-insensitive.
		if m, err := Parse(strings.ToUpper(s)); err != nil || m != n {
			t.Fatalf("Parse(%q) = %d, upper case %d, %v", s, n, m, err)
		}
	})
}

func TestPython(t *testing.T) {
	// Expected strings are what Python's _memory_viz._format_size prints.
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0.0B"}, {7, "7.0B"}, {512, "512.0B"}, {1023, "1023.0B"}, {1024, "1.0KiB"},
		{1126, "1.1KiB"},
		{1280, "1.2KiB"}, // 1.25 rounds half to even
		{1792, "1.8KiB"}, // 1.75 rounds half to even
		{1536, "1.5KiB"}, {10 * MiB, "10.0MiB"}, {1024*MiB - 1, "1024.0MiB"}, {3 << 30, "3.0GiB"},
		{-2048, "-2.0KiB"}, {1 << 62, "4.0EiB"},
	}
	for _, tt := range tests {
		if got := Python(tt.n); got != tt.want {
			t.Errorf("Python(%d) = %q, want %q", tt.n, got, tt.want)
		}
		if tt.n >= 0 {
			if got := PythonU(uint64(tt.n)); got != tt.want {
				t.Errorf("PythonU(%d) = %q, want %q", tt.n, got, tt.want)
			}
		}
	}
	if got := PythonU(1<<64 - 1); got != "16.0EiB" {
		t.Errorf("PythonU(max) = %q", got)
	}
	if got, want := PythonBytes(3<<29), "1.5GiB (1610612736 bytes)"; got != want {
		t.Errorf("PythonBytes = %q, want %q", got, want)
	}
}

func TestViz(t *testing.T) {
	// memory_viz's formatSize; 1280 and 1792 are exact ties that
	// JavaScript's toFixed rounds up (Python rounds them to even).
	tests := []struct {
		n          uint64
		want, shrt string
	}{
		{0, "0.0B (0 bytes)", "0.0B"}, {1536, "1.5KiB (1536 bytes)", "1.5KiB"}, {1023, "1023.0B (1023 bytes)", "1023.0B"},
		{1280, "1.3KiB (1280 bytes)", "1.3KiB"}, {1792, "1.8KiB (1792 bytes)", "1.8KiB"},
		{10 << 20, "10.0MiB (10485760 bytes)", "10.0MiB"}, {7575726912, "7.1GiB (7575726912 bytes)", "7.1GiB"},
	}
	for _, c := range tests {
		if got := Viz(c.n); got != c.want {
			t.Errorf("Viz(%d) = %q, want %q", c.n, got, c.want)
		}
		if got := VizShort(c.n); got != c.shrt {
			t.Errorf("VizShort(%d) = %q, want %q", c.n, got, c.shrt)
		}
	}
}

// TestAppendVizLower checks the integer text against Viz, ties (x.x5
// exactly) and unit boundaries included.
func TestAppendVizLower(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	vals := []uint64{0, 1, 511, 1023, 1024, 1025, 1536, 1075, 1126, 1048575, 1048576, 1<<30 - 1, 1 << 40, 1<<53 - 1, 1 << 53, 1<<63 + 12345}
	for k := 0; k < 20000; k++ {
		vals = append(vals, r.Uint64()>>uint(r.Intn(64)))
	}
	for shift := uint(0); shift < 50; shift += 10 {
		for tenth := uint64(0); tenth < 10240; tenth += 7 {
			vals = append(vals, (tenth<<shift)/10+(1<<shift)/20) // near ties
		}
	}
	for _, n := range vals {
		if got, want := string(AppendVizLower(nil, n)), strings.ToLower(Viz(n)); got != want {
			t.Fatalf("AppendVizLower(%d) = %q, Viz %q", n, got, want)
		}
	}
}

func TestC10(t *testing.T) {
	for _, tt := range []struct {
		n    uint64
		want string
	}{{0, "0 bytes"}, {1024, "1024 bytes"}, {1025, "1.00 KiB"}, {1536, "1.50 KiB"}, {MiB, "1024.00 KiB"},
		{MiB + 1, "1.00 MiB"}, {GiB, "1024.00 MiB"}, {80 * GiB, "80.00 GiB"}} {
		if got := C10(tt.n); got != tt.want {
			t.Errorf("C10(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestHuman(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0"}, {512, "+512 B"}, {-10239, "-10239 B"}, {10 * KiB, "+10 KiB"}, {1536 * KiB, "+1.5 MiB"},
		{20 * MiB, "+20 MiB"}, {-3 * GiB / 2, "-1.5 GiB"}, {GiB + GiB/3, "+1.33 GiB"}} {
		if got := HumanSigned(tt.n); got != tt.want {
			t.Errorf("HumanSigned(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := Human(0); got != "0 B" {
		t.Errorf("Human(0) = %q", got)
	}
}

func TestProgress(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0.0 MiB"}, {5 * MiB, "5.0 MiB"}, {123 * MiB, "123.0 MiB"}, {GiB - 1, "1024.0 MiB"}, {GiB, "1.0 GiB"}, {3 * GiB / 2, "1.5 GiB"}} {
		if got := Progress(tt.n); got != tt.want {
			t.Errorf("Progress(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestThousands(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, "0"}, {7, "7"}, {999, "999"}, {1000, "1,000"}, {-1000, "-1,000"},
		{-999, "-999"}, {6738415616, "6,738,415,616"}, {-123456789, "-123,456,789"},
	} {
		if got := Thousands(c.n); got != c.want {
			t.Errorf("Thousands(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
