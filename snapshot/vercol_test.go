package snapshot

import (
	"reflect"
	"testing"
)

// TestVersionColumn checks the address versions' column against the
// versions themselves: every width, widening at the first version that
// does not fit (by set and by append, which must give the same column,
// as the versioner's and annotate's do), the slices of a part of it in
// their narrowest width, SetVersions and an index out of range.
func TestVersionColumn(t *testing.T) {
	cases := []struct {
		v     []int32
		width int
	}{
		{nil, 0},
		{[]int32{0, 0, 3}, 1},
		{[]int32{0, 255, 1}, 1},
		{[]int32{0, 255, 256, 1}, 2},
		{[]int32{1, 65535, 2}, 2},
		{[]int32{1, 300, 65536, 7, 2}, 4},
		{[]int32{70000, 1}, 4},
		{[]int32{1 << 30, 300, 2}, 4},
	}
	width := func(c *versionColumn) int {
		switch {
		case c.w != nil:
			return 4
		case c.h != nil:
			return 2
		case c.b != nil:
			return 1
		}
		return 0
	}
	for ci, c := range cases {
		set := makeVersionColumn(len(c.v))
		var app versionColumn
		for i, x := range c.v {
			set.set(i, x)
			app.append(x, 2)
		}
		var tr Trace
		tr.SetVersions(c.v)
		for name, col := range map[string]*versionColumn{"set": &set, "append": &app, "SetVersions": &tr.versions} {
			if w := width(col); w != c.width {
				t.Errorf("case %d, %s: %d bytes a version, want %d", ci, name, w, c.width)
			}
			if col.len() != len(c.v) {
				t.Errorf("case %d, %s: %d versions, want %d", ci, name, col.len(), len(c.v))
			}
			for i, x := range c.v {
				if got := col.at(i); got != x {
					t.Errorf("case %d, %s: version %d is %d, want %d", ci, name, i, got, x)
				}
			}
			for _, i := range []int{-1, len(c.v), len(c.v) + 5} {
				if got := col.at(i); got != 0 {
					t.Errorf("case %d, %s: version %d out of range is %d", ci, name, i, got)
				}
			}
		}
		if !reflect.DeepEqual(set.b, app.b) || !reflect.DeepEqual(set.h, app.h) || !reflect.DeepEqual(set.w, app.w) {
			t.Errorf("case %d: set %+v and append %+v differ", ci, set, app)
		}
		if tr.HasVersions() != (len(c.v) > 0) {
			t.Errorf("case %d: HasVersions %v", ci, tr.HasVersions())
		}
		for lo := 0; lo <= len(c.v); lo++ {
			for hi := lo; hi <= len(c.v); hi++ {
				got := set.slice(lo, hi)
				var want Trace
				want.SetVersions(c.v[lo:hi])
				if !reflect.DeepEqual(got, want.versions) {
					t.Errorf("case %d: versions %d..%d %+v, want %+v", ci, lo, hi, got, want.versions)
				}
			}
		}
	}
}
