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
