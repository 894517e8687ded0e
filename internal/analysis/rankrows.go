package analysis

import (
	"fmt"
	"runtime"
	"sync"
)

// RankRows makes the row of each of files with row, at most jobs at once
// (and never more than twice the CPUs): one row and one error per file. A
// panic in one file's row is that file's error, so that the other ranks
// are still answered (a caller's recover cannot catch a panic on another
// goroutine; it would end the process).
func RankRows(files []string, jobs int, row func(pos int, path string) (RankRow, error)) ([]RankRow, []error) {
	rows := make([]RankRow, len(files))
	errs := make([]error, len(files))
	if len(files) == 0 {
		return rows, errs
	}
	sem := make(chan struct{}, min(max(jobs, 1), runtime.GOMAXPROCS(0)*2, len(files)))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("%s: internal error: %v (please report this with the input file)", f, p)
				}
			}()
			rows[i], errs[i] = row(i, f)
		}()
	}
	wg.Wait()
	return rows, errs
}

// RankTable summarizes the rows of the files RankRows could read (errs:
// its errors, one per file). A file that cannot be read costs its row,
// not the table: failed lists the errors of the others, one line each for
// the user, and err is then the answer's error, which says how many rows
// are missing. One file that fails has no table and is its own error;
// neither have files none of which could be read.
func RankTable(rows []RankRow, errs []error) (r *Ranks, failed []error, err error) {
	var good []RankRow
	for i, e := range errs {
		switch {
		case e == nil:
			good = append(good, rows[i])
		case len(errs) == 1:
			return nil, nil, e
		default:
			failed = append(failed, e)
		}
	}
	if len(good) == 0 {
		return nil, failed, fmt.Errorf("none of the %d files could be read", len(errs))
	}
	if len(failed) > 0 {
		err = fmt.Errorf("%d of %d files could not be read (above); the table has the other %d", len(failed), len(errs), len(good))
	}
	return SummarizeRanks(good), failed, err
}
