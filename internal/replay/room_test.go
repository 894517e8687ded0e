package replay

import (
	"runtime"
	"testing"
)

// TestReleaseRoom: the written part of a column is kept; on Linux the
// whole pages of its room are handed back (written before, they read as
// zeros after); a small room is left alone.
func TestReleaseRoom(t *testing.T) {
	for _, c := range []struct {
		len, cap int
		released bool
	}{
		{1000, 1 << 20, runtime.GOOS == "linux"},
		{(1 << 20) - 1000, 1 << 20, false}, // 8 KB of room: left alone
		{1 << 20, 1 << 20, false},
	} {
		s := make([]uint64, c.cap)
		for i := range s {
			s[i] = uint64(i) + 1
		}
		releaseRoom(s[:c.len])
		for i := range c.len {
			if s[i] != uint64(i)+1 {
				t.Fatalf("len %d cap %d: element %d changed to %d", c.len, c.cap, i, s[i])
			}
		}
		if last := s[c.cap-1]; c.released != (last == 0) {
			t.Fatalf("len %d cap %d: the room's last element reads %d after, released %v", c.len, c.cap, last, c.released)
		}
		runtime.KeepAlive(s)
	}
}
