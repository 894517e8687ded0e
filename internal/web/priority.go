package web

import (
	"context"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Work the page does not wait on to respond to the user (the totals
// curves, the peak and OOM answers, the colour classes, the state
// history's checkpoints, built on first use) runs in the background at
// a low CPU priority (on Linux, nice 10 or 19 by how soon it is wanted),
// so that on a machine with few cores it takes only the CPU that the
// window answers and the browser leave idle: a zoom right after the first
// paint of an 80 MB snapshot waited 100-200 ms behind the peak answer's
// analysis and the state history.
//
// A thread's priority cannot be raised again without privileges, so the
// background work runs on a few worker goroutines that lock their
// threads for good: those threads run nothing else (threads the runtime
// starts from them are made by its template thread and do not inherit
// the priority). They never exit either: on Linux a child process started
// with a parent-death signal from a thread would get it when the thread
// ends (a browser started by a test, say). The server has as many more Go
// processors than cores as there are workers: a low-priority thread holds
// its processor while the system runs other threads, and the requests
// the user waits on must still find one free.

// A priority says how soon background work is wanted.
type priority int

const (
	// soon is for what the page shows without a click (the totals
	// curves, the markers) and the state view's first answer: it takes
	// the CPU the user's requests leave, before later work.
	soon priority = 10
	// later is for the answers and the state history's checkpoints.
	later priority = 19
)

// workerPool is the workers of one priority.
type workerPool struct {
	nice    int
	workers int
	start   sync.Once
	jobs    chan func()
}

var pools = map[priority]*workerPool{
	soon:  {nice: int(soon), workers: 2, jobs: make(chan func())},
	later: {nice: int(later), workers: 3, jobs: make(chan func())},
}

var backgroundProcs sync.Once

// inBackground runs f on a worker of priority p and waits for it; a
// panic in f is raised again in the caller (lazy.get turns it into an
// error).
func inBackground(p priority, f func()) {
	backgroundProcs.Do(func() {
		if lowerThreadPriority == nil {
			return
		}
		extra := 0
		for _, wp := range pools {
			extra += wp.workers
		}
		if runtime.GOMAXPROCS(0) < runtime.NumCPU()+extra {
			runtime.GOMAXPROCS(runtime.NumCPU() + extra)
		}
	})
	wp := pools[p]
	wp.start.Do(func() {
		for range wp.workers {
			go wp.work()
		}
	})
	done := make(chan any, 1)
	wp.jobs <- func() {
		defer func() { done <- recover() }()
		f()
	}
	if v := <-done; v != nil {
		panic(v)
	}
}

// work runs jobs on a thread of its own at the pool's priority.
func (wp *workerPool) work() {
	if lowerThreadPriority != nil {
		runtime.LockOSThread() // for good: see above
		lowerThreadPriority(wp.nice)
	}
	for f := range wp.jobs {
		f()
	}
}

// spawnLater runs f in the background at priority later without waiting,
// for replay's background builds.
func spawnLater(f func()) { go inBackground(later, f) }

// userRequests tracks the requests the user waits on (windows, state
// steps). Zooming through an 80 MB snapshot, the peak answer's analysis
// or the totals curves running beside each window's query made it 50-70 %
// slower on two cores even at the lowest priority (they share the memory
// bandwidth and caches), so work that can wait starts only once the user
// has paused.
type userRequests struct {
	inFlight atomic.Int32
	last     atomic.Int64 // UnixNano when the last one ended
	// answers counts the answer requests (peak, OOM, classes,
	// fragmentation curve, flamegraph) that have waited their turn: the
	// user waits on them too, so the analysis no longer pauses for the
	// other requests while one is open (see answer).
	answers atomic.Int32
	// pause is userPause (set shorter by the fuzz test of the handlers).
	pause time.Duration
}

// pauseLen is how long the user must be idle to count as paused.
func (u *userRequests) pauseLen() time.Duration {
	if u.pause > 0 {
		return u.pause
	}
	return userPause
}

// An answer request waits for the user to pause at most pauseLen before
// it runs anyway. It waited for a pause with no bound: under 32
// concurrent window and state requests the peak answer took 7 s at the
// median, the fragmentation curve 11 s.

// answerWaiting reports whether an answer request is being computed.
func (u *userRequests) answerWaiting() bool { return u.answers.Load() > 0 }

// userPause is how long no request must have run for the user to count
// as paused: longer than between the steps of a zoom by keys.
const userPause = 250 * time.Millisecond

// track counts h's requests.
func (u *userRequests) track(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u.inFlight.Add(1)
		defer func() {
			u.last.Store(time.Now().UnixNano())
			u.inFlight.Add(-1)
		}()
		h(w, r)
	}
}

// waitAnswered returns once no request the user waits on is being
// answered: the window index's build pauses so (Timeline.SetIndexPause),
// between the requests rather than until the user pauses, since a user
// zooming on and on would otherwise never get the index.
func (u *userRequests) waitAnswered() {
	for u.inFlight.Load() > 0 {
		time.Sleep(time.Millisecond)
	}
}

// waitAnsweredUnless is waitAnswered returning early, too, once wanted
// reports true (checked as often): for work that a request being answered
// may wait on.
func (u *userRequests) waitAnsweredUnless(wanted func() bool) {
	for u.inFlight.Load() > 0 && !wanted() {
		time.Sleep(time.Millisecond)
	}
}

// busy reports whether the user is waiting on a request or has not paused
// since the last one.
func (u *userRequests) busy() bool {
	return u.inFlight.Load() > 0 || time.Since(time.Unix(0, u.last.Load())) < u.pauseLen()
}

// waitIdle returns once the user has paused, or ctx ends.
func (u *userRequests) waitIdle(ctx context.Context) { u.waitIdleAtMost(ctx, -1) }

// waitIdleAtMost is waitIdle returning after at most limit (no bound when
// negative).
func (u *userRequests) waitIdleAtMost(ctx context.Context, limit time.Duration) {
	var deadline <-chan time.Time
	if limit >= 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		deadline = t.C
	}
	for {
		wait := 20 * time.Millisecond
		if u.inFlight.Load() == 0 {
			since := time.Since(time.Unix(0, u.last.Load()))
			if since >= u.pauseLen() {
				return
			}
			wait = u.pauseLen() - since
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-time.After(wait):
		}
	}
}
