package analysis

import (
	"errors"
	"strings"
	"testing"
)

// A panic in one file's row is that file's error; the others are made.
func TestRankRowsRecovers(t *testing.T) {
	files := []string{"a", "b", "c"}
	rows, errs := RankRows(files, 2, func(pos int, path string) (RankRow, error) {
		if path == "b" {
			panic("boom")
		}
		return RankRow{Rank: pos}, nil
	})
	if errs[0] != nil || errs[2] != nil || rows[2].Rank != 2 {
		t.Errorf("other files: rows %+v, errs %v", rows, errs)
	}
	if errs[1] == nil || !strings.HasPrefix(errs[1].Error(), "b: internal error: boom") {
		t.Errorf("panicking file's error = %v", errs[1])
	}
}

// TestRankTable: the rows of the files read make the table; the others
// are listed and make the error, which counts them.
func TestRankTable(t *testing.T) {
	bad := errors.New("x.pickle: truncated")
	row := func(rank int) RankRow { return RankRow{Rank: rank, PeakAllocatedBytes: uint64(rank+1) << 30} }
	for _, tc := range []struct {
		name   string
		errs   []error
		rows   int // in the table; 0: none
		failed int
		err    string
	}{
		{"all read", []error{nil, nil, nil}, 3, 0, ""},
		{"one of three fails", []error{nil, bad, nil}, 2, 1, "1 of 3 files could not be read (above); the table has the other 2"},
		{"the one file fails", []error{bad}, 0, 0, bad.Error()},
		{"none read", []error{bad, bad}, 0, 2, "none of the 2 files could be read"},
	} {
		rows := make([]RankRow, len(tc.errs))
		for i := range rows {
			rows[i] = row(i)
		}
		r, failed, err := RankTable(rows, tc.errs)
		if (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
		if len(failed) != tc.failed {
			t.Errorf("%s: %d failures, want %d", tc.name, len(failed), tc.failed)
		}
		if got := 0; r != nil {
			got = len(r.Ranks)
			if got != tc.rows {
				t.Errorf("%s: %d rows, want %d", tc.name, got, tc.rows)
			}
		} else if tc.rows > 0 {
			t.Errorf("%s: no table", tc.name)
		}
	}
}
