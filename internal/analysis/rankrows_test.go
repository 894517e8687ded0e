package analysis

import (
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
