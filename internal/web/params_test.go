package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestBadParameters: every bad query parameter of every endpoint is a 400
// whose JSON error names it; a device the file lacks is one too (as the
// command line says it), and nothing is cached for a refused request.
func TestBadParameters(t *testing.T) {
	s, h := newTestServer(t)
	const host = "127.0.0.1:8123"
	tests := []struct{ url, param string }{
		{"/api/meta?file=abc", "file"},
		{"/api/meta?file=-1", "file"},
		{"/api/meta?device=99", "device 99"},
		{"/api/meta?device=x", "device"},
		{"/api/meta?mode=weird", "mode"},
		{"/api/meta?detail=NaN", "detail"},
		{"/api/files?wait=abc", "wait"},
		{"/api/window?x0=NaN", "x0"},
		{"/api/window?x1=Inf", "x1"},
		{"/api/window?w=abc", "w"},
		{"/api/window?h=-5", "h"},
		{"/api/window?y0=-Inf", "y0"},
		{"/api/window?device=99", "device 99"},
		{"/api/curves?x0=1e999", "x0"},
		{"/api/curves?w=1.5", "w"},
		{"/api/markers?device=3", "device 3"},
		{"/api/elem?id=abc", "id"},
		{"/api/elem", "id"},
		{"/api/search?device=7&frame=x", "device 7"},
		{"/api/events?from=-3", "from"},
		{"/api/events?count=lots", "count"},
		{"/api/state?idx=NaN", "idx"},
		{"/api/state?idx=-2", "idx"},
		{"/api/flame?idx=x", "idx"},
		{"/api/settings?device=99", "device 99"},
		{"/api/classes?by=colour", "colour"},
		{"/api/peak?x=NaN", "x"},
		{"/api/peak?depth=-1", "depth"},
		{"/api/peak?top=many", "top"},
		{"/api/peak?at=sometime", "at"},
		{"/api/oom?capacity=-1", "capacity"},
		{"/api/oom?top=NaN", "top"},
		{"/api/fragcurve?x0=-Inf&x1=Inf", "x0"},
		{"/api/fragcurve?x0=0&x1=NaN", "x1"},
		{"/api/fragcurve?x0=5&x1=1", "x0 and x1"},
		{"/api/fragcurve?x0=0&x1=5&w=-1", "w"},
		{"/api/watch?log=abc", "log"},
	}
	for _, tc := range tests {
		w := get(t, h, host, tc.url)
		var e apiError
		if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, tc.param) {
			t.Errorf("%s: %d %q; want 400 with a JSON error naming %q", tc.url, w.Code, w.Body.String(), tc.param)
		}
	}
	// The command line's wording for a device the file lacks.
	w := get(t, h, host, "/api/meta?device=99")
	if !strings.Contains(w.Body.String(), "has no device 99 (devices: 0)") {
		t.Errorf("device 99: %s", w.Body.String())
	}
	// Refused devices leave nothing behind.
	f := s.file(0)
	f.mu.Lock()
	before := len(f.devs)
	f.mu.Unlock()
	for d := 1; d < 200; d++ {
		for _, ep := range []string{"meta", "events", "settings", "oom", "curves", "classes"} {
			get(t, h, host, "/api/"+ep+"?device="+itoa(d))
		}
	}
	f.mu.Lock()
	after := len(f.devs)
	f.mu.Unlock()
	if after != before {
		t.Errorf("refused devices cached: %d device entries, was %d", after, before)
	}
	// Huge but finite windows are answered in full JSON, not an empty 200.
	for _, u := range []string{"/api/fragcurve?x0=-1e308&x1=1e308", "/api/peak?x=1e308", "/api/peak?x=-1e308"} {
		w := get(t, h, host, u)
		var v map[string]any
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &v) != nil {
			t.Errorf("%s: %d %q; want 200 with JSON", u, w.Code, w.Body.String())
		}
	}
}
