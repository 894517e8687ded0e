package web

import "testing"

func TestParseMaxUpload(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"4GiB", 4 << 30}, {"512MiB", 512 << 20}, {"100MB", 100 << 20}, {"1048576", 1 << 20}, {"1.5 GiB", 3 << 29}, {"2K", 2048},
	} {
		if got, err := ParseMaxUpload(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseMaxUpload(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "x", "-1GiB", "0", "GiB", "2TiB"} {
		if _, err := ParseMaxUpload(bad); err == nil {
			t.Errorf("ParseMaxUpload(%q) succeeded", bad)
		}
	}
}
