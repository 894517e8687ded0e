package web

import (
	"context"
	"errors"
	"math"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/snapshot"
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

func TestWaitIdle(t *testing.T) {
	var u userRequests
	done := make(chan struct{})
	go func() { u.waitIdle(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("waitIdle waits with no request ever made")
	}

	release := make(chan struct{})
	started := make(chan struct{})
	h := u.track(func(http.ResponseWriter, *http.Request) { close(started); <-release })
	go h(nil, nil)
	<-started
	done = make(chan struct{})
	go func() { u.waitIdle(context.Background()); close(done) }()
	select {
	case <-done:
		t.Fatal("waitIdle returned while a user request runs")
	case <-time.After(100 * time.Millisecond):
	}
	ended := time.Now()
	close(release)
	<-done
	if d := time.Since(ended); d < userPause*9/10 {
		t.Errorf("waitIdle returned %v after the request ended; want the pause, %v", d, userPause)
	}

	// A request that is gone stops waiting.
	ctx, cancel := context.WithCancel(context.Background())
	release = make(chan struct{})
	started = make(chan struct{})
	go u.track(func(http.ResponseWriter, *http.Request) { close(started); <-release })(nil, nil)
	<-started
	done = make(chan struct{})
	go func() { u.waitIdle(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Error("waitIdle ignores its context")
	}
	close(release)
}

// TestAnalysisPausesForUser: the device's analysis (the answers' common
// work) waits while the user is busy and finishes once they pause.
func TestAnalysisPausesForUser(t *testing.T) {
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	dd := newDeviceData(s, 0)
	var busy atomic.Bool
	busy.Store(true)
	dd.userBusy = busy.Load
	done := make(chan error, 1)
	go func() {
		_, err := dd.analysisDevice()
		done <- err
	}()
	select {
	case <-done:
		t.Fatal("the analysis finished while the user was busy")
	case <-time.After(150 * time.Millisecond):
	}
	busy.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the analysis never finished once the user paused")
	}
}

// TestVersionsPause checks that the address versions' pass of a file the
// server loads waits while a request the user waits on is answered, goes
// on once none is, and does not wait while a request waits for the
// versions (it may be that one).
func TestVersionsPause(t *testing.T) {
	srv := New(Options{})
	u := &srv.user
	var pause func()
	_, errc := srv.Store.Load("x", func(opt *snapshot.Options) (*snapshot.Snapshot, error) {
		pause = opt.Pause
		return nil, errors.New("not a snapshot")
	})
	<-errc
	if pause == nil {
		t.Fatal("the server's decode has no Options.Pause")
	}
	f := srv.Store.file(0)
	returned := func() bool {
		done := make(chan struct{})
		go func() { pause(); close(done) }()
		select {
		case <-done:
			return true
		case <-time.After(50 * time.Millisecond):
			return false
		}
	}
	if !returned() {
		t.Fatal("the pass paused with no request in flight")
	}
	u.inFlight.Add(1)
	done := make(chan struct{})
	go func() { pause(); close(done) }()
	select {
	case <-done:
		t.Fatal("the pass went on while a window was being answered")
	case <-time.After(50 * time.Millisecond):
	}
	u.inFlight.Add(-1)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the pass did not go on once the window was answered")
	}
	u.inFlight.Add(1)
	defer u.inFlight.Add(-1)
	f.readyWaiters.Add(1)
	defer f.readyWaiters.Add(-1)
	if !returned() {
		t.Fatal("the pass paused while a request waited for the versions")
	}
	// A request waiting for a file to be ready is counted so.
	g := srv.Store.addPending("y")
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan struct{})
	go func() { _ = g.wait(ctx); close(waited) }()
	for deadline := time.Now().Add(5 * time.Second); g.readyWaiters.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a request waiting for the file is not counted in readyWaiters")
		}
	}
	cancel()
	<-waited
	if n := g.readyWaiters.Load(); n != 0 {
		t.Errorf("readyWaiters %d after the wait ended, want 0", n)
	}
}

// TestBuildPausesWired checks the pauses of the totals curves' build
// (pauseCurves) and of the state history's intake of the dump
// (pauseHistory), which replay calls about every 65,536 items
// (TestCurvesPause, TestStartHistoryPause): each parks while a window or
// state step is answered, goes on once it is, and does not park while
// another request waits for what it builds.
func TestBuildPausesWired(t *testing.T) {
	srv := New(Options{})
	u := &srv.user
	_, errc := srv.Store.Load("x", func(opt *snapshot.Options) (*snapshot.Snapshot, error) {
		return &snapshot.Snapshot{Traces: []snapshot.Trace{{}}}, nil
	})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	dd := srv.Store.file(0).device(0)
	for _, c := range []struct {
		name    string
		pause   func()
		callers *atomic.Int32
		waiting int32 // callers that make a request wait
	}{
		{"the totals curves", dd.pauseCurves, &dd.curvesCallers, 2}, // the build's own call and a request's
		{"the state history", dd.pauseHistory, &dd.historyWanted, 1},
	} {
		returns := func() bool {
			done := make(chan struct{})
			go func() { c.pause(); close(done) }()
			select {
			case <-done:
				return true
			case <-time.After(50 * time.Millisecond):
				return false
			}
		}
		if !returns() {
			t.Fatalf("%s paused with no request in flight", c.name)
		}
		u.inFlight.Add(1)
		done := make(chan struct{})
		go func() { c.pause(); close(done) }()
		select {
		case <-done:
			t.Fatalf("%s went on while a window was being answered", c.name)
		case <-time.After(50 * time.Millisecond):
		}
		u.inFlight.Add(-1)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not go on once the window was answered", c.name)
		}
		u.inFlight.Add(1)
		c.callers.Add(c.waiting)
		if !returns() {
			t.Fatalf("%s paused while a request waited for it", c.name)
		}
		c.callers.Add(-c.waiting)
		u.inFlight.Add(-1)
	}
}

// TestIndexBesideFirstWindow checks when a timeline's window index is
// built: beside the first window when the timeline is big (the build does
// not pause for that window), else from its answer on; and after the
// first answer, only between the user's requests.
func TestIndexBesideFirstWindow(t *testing.T) {
	old := indexBesideFirst
	defer func() { indexBesideFirst = old }()
	// Enough elements that the build has pause points past its start.
	s := replaySnapshot(70_000)
	built := func(tl *timeline, within time.Duration) bool {
		for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if tl.tl.IndexBuilt() == "built" {
				return true
			}
		}
		return false
	}
	u := &userRequests{}
	u.inFlight.Add(1) // the first window, being answered

	indexBesideFirst = 0 // every timeline is big
	big := newTimeline(s, 0, "active", nil, nil)
	if got := big.tl.IndexBuilt(); got != "none" {
		t.Fatalf("index %q before the first window", got)
	}
	big.beforeWindow(u)
	if !built(big, 10*time.Second) {
		t.Fatalf("a big timeline's index was not built beside its first window (%s)", big.tl.IndexBuilt())
	}
	big.afterWindow()

	indexBesideFirst = math.MaxInt // none is
	small := newTimeline(s, 0, "active", nil, nil)
	small.beforeWindow(u)
	if built(small, 50*time.Millisecond) || small.tl.IndexBuilt() != "none" {
		t.Fatalf("a small timeline's index started before its first window was answered (%s)", small.tl.IndexBuilt())
	}
	small.afterWindow() // the build starts, and waits for the window in flight
	if built(small, 100*time.Millisecond) {
		t.Fatal("the index build went on while a window was being answered")
	}
	u.inFlight.Add(-1)
	if !built(small, 10*time.Second) {
		t.Fatalf("the index build did not go on once the window was answered (%s)", small.tl.IndexBuilt())
	}
}

// replaySnapshot is one device's trace of n allocations of 1-4 KiB, one
// in three freed two steps later.
func replaySnapshot(n int) *snapshot.Snapshot {
	var evs []snapshot.Event
	for i := range n {
		addr, size := uint64(0x100000+i*8192), uint64(1024+i%3072)
		evs = append(evs, snapshot.Event{Action: snapshot.ActionAlloc, Addr: addr, Size: size})
		if i%3 == 2 {
			a, sz := evs[len(evs)-3].Addr, evs[len(evs)-3].Size
			evs = append(evs, snapshot.Event{Action: snapshot.ActionFreeRequested, Addr: a, Size: sz},
				snapshot.Event{Action: snapshot.ActionFreeCompleted, Addr: a, Size: sz})
		}
	}
	return &snapshot.Snapshot{
		Strings: []string{""},
		Streams: []int64{0},
		Stacks:  snapshot.StackTable{Offsets: []int32{0, 0}},
		Traces:  []snapshot.Trace{{Events: evs}},
	}
}
