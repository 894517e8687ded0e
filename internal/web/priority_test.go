package web

import (
	"runtime"
	"testing"
)

func TestInBackground(t *testing.T) {
	ran := false
	inBackground(later, func() { ran = true })
	if !ran {
		t.Fatal("inBackground did not run f")
	}
	if runtime.GOOS == "linux" && runtime.GOMAXPROCS(0) < runtime.NumCPU()+5 {
		t.Errorf("GOMAXPROCS %d: want at least NumCPU+5 (one per worker) so that the user's requests find a free processor", runtime.GOMAXPROCS(0))
	}
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("panic in f: caller got %v, want boom", p)
			}
		}()
		inBackground(soon, func() { panic("boom") })
	}()
	// The workers live on after a panic.
	for i := 0; i <= 5; i++ {
		inBackground(soon, func() {})
	}
	// A failed build is the lazy's error, as without the background.
	var l lazy[int]
	if _, err := l.get(func() int {
		var v int
		inBackground(later, func() { panic("no") })
		return v
	}, "test"); err == nil {
		t.Error("lazy.get of a panicking background job: no error")
	}
}
