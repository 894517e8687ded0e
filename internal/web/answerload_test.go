package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestAnswersDoNotStarve: while window and state requests never stop (the
// user never pauses), an answer the user asked for still comes, within
// about 250 ms: it waited for a pause that never came.
func TestAnswersDoNotStarve(t *testing.T) {
	_, h := newTestServer(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := "/api/window?x0=0&x1=4&w=100&h=100"
			if k%2 == 1 {
				url = "/api/state?view=state&idx=1"
			}
			for ctx.Err() == nil {
				r := httptest.NewRequest("GET", url, nil)
				r.Host = "127.0.0.1:8123"
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	time.Sleep(50 * time.Millisecond) // the load is on
	for _, url := range []string{"/api/peak", "/api/oom", "/api/classes?by=category", "/api/fragcurve?x0=0&x1=4", "/api/flame?idx=1"} {
		done := make(chan int, 1)
		start := time.Now()
		go func() {
			r := httptest.NewRequest("GET", url, nil)
			r.Host = "127.0.0.1:8123"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			done <- w.Code
		}()
		select {
		case code := <-done:
			if code != http.StatusOK {
				t.Errorf("%s: %d", url, code)
			}
			t.Logf("%s under load: %v", url, time.Since(start).Round(time.Millisecond))
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no answer in 5 s while windows and state steps go on", url)
		}
	}
}
