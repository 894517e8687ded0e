package web

import (
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBackgroundNice checks that background work runs at its nice value
// and leaves the caller's thread as it was.
func TestBackgroundNice(t *testing.T) {
	before, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		t.Skip("getpriority:", err)
	}
	for _, p := range []priority{soon, later} {
		var got int
		inBackground(p, func() {
			// The raw syscall returns 20 - nice.
			v, _ := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
			got = 20 - v
		})
		if got < int(p) { // a process already niced past p stays there
			t.Errorf("priority %d: background thread has nice %d", p, got)
		}
	}
	if after, _ := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid()); after != before {
		t.Errorf("caller's priority changed from %d to %d", before, after)
	}
}

// TestBackgroundKeepsThreads checks that background work ends no thread:
// a child started with a parent-death signal (as chromedp starts a
// browser) gets it when the thread that started it ends. Here the
// children are started by background jobs themselves, on their threads.
func TestBackgroundKeepsThreads(t *testing.T) {
	var children []*exec.Cmd
	var mu sync.Mutex
	exited := make(chan int, 8)
	defer func() {
		for _, c := range children {
			_ = c.Process.Kill()
		}
	}()
	for i := range 8 {
		inBackground([]priority{soon, later}[i%2], func() {
			c := exec.Command("sleep", "30")
			c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := c.Start(); err != nil {
				return
			}
			mu.Lock()
			children = append(children, c)
			mu.Unlock()
			go func() { _ = c.Wait(); exited <- i }()
		})
	}
	if len(children) == 0 {
		t.Skip("cannot start sleep")
	}
	select {
	case i := <-exited:
		t.Errorf("child %d died when its background job ended", i)
	case <-time.After(100 * time.Millisecond):
	}
}
