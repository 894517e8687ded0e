package synth

import (
	"encoding/hex"
	"math"
	"testing"
)

// TestPickleInts pins the integer opcodes to what CPython's pickle writes
// (pickle.dumps(v, protocol=4) without PROTO and STOP).
func TestPickleInts(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		want string
	}{
		{0, "4b00"}, {255, "4bff"}, {256, "4d0001"}, {65535, "4dffff"}, {65536, "4a00000100"},
		{-1, "4affffffff"}, {math.MaxInt32, "4affffff7f"}, {math.MaxInt32 + 1, "8a050000008000"},
		{math.MinInt32, "4a00000080"}, {math.MinInt32 - 1, "8a05ffffff7fff"},
		{math.MaxInt64, "8a08ffffffffffffff7f"}, {1 << 40, "8a06000000000001"},
	} {
		p := &pickler{}
		p.int(tc.v)
		if got := hex.EncodeToString(p.frame); got != tc.want {
			t.Errorf("int(%d) = %s, want %s", tc.v, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v    uint64
		want string
	}{
		{1 << 63, "8a09000000000000008000"}, {math.MaxUint64, "8a09ffffffffffffffff00"}, {7, "4b07"},
	} {
		p := &pickler{}
		p.uint(tc.v)
		if got := hex.EncodeToString(p.frame); got != tc.want {
			t.Errorf("uint(%d) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

func TestJSONString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            `"plain"`,
		`q"\`:              `"q\"\\"`,
		"a>b<c&":           `"a>b<c&"`,
		"tab\tnl\n":        `"tab\tnl\n"`,
		"bell\a":           `"bell\u0007"`,
		"ctl\x01":          `"ctl\u0001"`,
		"caf\u00e9 \u2603": `"caf\u00e9 \u2603"`,
	} {
		if got := jsonString(in); got != want {
			t.Errorf("jsonString(%q) = %s, want %s", in, got, want)
		}
	}
}
