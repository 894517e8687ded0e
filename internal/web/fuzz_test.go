package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/demo"
)

// fuzzEndpoints are the viewer's GET endpoints, every one that reads a
// query.
var fuzzEndpoints = []string{"files", "meta", "window", "curves", "markers", "elem", "search", "events",
	"state", "flame", "settings", "classes", "peak", "oom", "fragcurve", "watch"}

// FuzzQuery sends every endpoint arbitrary query strings: the answer is
// never a 5xx or an internal error, a JSON answer parses, and an error is
// a 4xx with a JSON error that says what was wrong.
func FuzzQuery(f *testing.F) {
	s := New(Options{Addr: "127.0.0.1:8123"})
	s.user.pause = time.Microsecond // no quarter-second waits for a pause
	s.Add("tiny.pickle", tinySnapshot())
	if d, err := demo.Open(); err == nil {
		s.Add("demo", d)
	}
	h := s.Handler()
	for _, q := range []string{"", "file=1", "device=99", "x0=-1e308&x1=1e308", "x0=NaN", "idx=-1", "file=abc&idx=NaN",
		"view=state&idx=2", "view=segments", "view=private&x=3", "at=e3", "at=12ms", "by=stream", "w=0&h=0",
		"detail=0", "mode=time&x0=0&x1=1e20", "from=5&count=9999", "addr=0x1000", "frame=forward", "capacity=1024&top=0",
		"depth=1000&top=100000", "id=0", "wait=0", "log=0", "x0=1&x1=1", "file=1&device=0&view=state&idx=100000"} {
		for i := range fuzzEndpoints {
			f.Add(uint8(i), q)
		}
	}
	f.Fuzz(func(t *testing.T, ep uint8, query string) {
		if strings.ContainsAny(query, "#\x00") {
			return
		}
		url := "/api/" + fuzzEndpoints[int(ep)%len(fuzzEndpoints)] + "?" + query
		r, err := http.NewRequest("GET", "http://127.0.0.1:8123"+url, nil)
		if err != nil {
			return // not a request a client can send
		}
		r.Host = "127.0.0.1:8123"
		r.RemoteAddr = "127.0.0.1:5555"
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, r)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s: %v for one request on a small file", url, d)
		}
		body := w.Body.String()
		if w.Code >= 500 || strings.Contains(body, "internal error") {
			t.Fatalf("%s: %d %.300s", url, w.Code, body)
		}
		ct := w.Header().Get("Content-Type")
		if w.Code >= 400 {
			var e apiError
			if ct != "application/json" || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "" {
				t.Fatalf("%s: %d without a JSON error: %q %.300s", url, w.Code, ct, body)
			}
			return
		}
		if ct == "application/json" && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s: 200 with invalid JSON %.300s", url, body)
		}
	})
}
