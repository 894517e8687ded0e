package web

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// TestFailedTimelineAnswersError: when building a timeline panics (in
// Warm, ahead of any request, and again on request), every request that
// needs it answers an error naming the file and the failure, and the
// rest of the API keeps working.
func TestFailedTimelineAnswersError(t *testing.T) {
	calls := 0
	s := New(Options{Addr: "127.0.0.1:8123", Timeline: func(*snapshot.Snapshot, int, replay.Kind) *replay.Timeline {
		calls++
		panic("index out of range [7] with length 3")
	}})
	id := s.Add("tiny.pickle", tinySnapshot())
	s.Warm(id)
	h := s.Handler()
	for _, url := range []string{
		"/api/meta?file=0&view=active", "/api/window?file=0&view=active", "/api/curves?file=0&view=active",
		"/api/markers?file=0&view=active", "/api/elem?file=0&view=active&id=0", "/api/search?file=0&view=active&addr=1000",
		"/api/meta?file=0&view=active", // asked again: the same error, not a nil timeline
	} {
		w := get(t, h, "127.0.0.1:8123", url)
		var e apiError
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusInternalServerError {
			t.Fatalf("%s: status %d, body %q; want 500 with a JSON error", url, w.Code, w.Body)
		}
		if want := "tiny.pickle: building the active timeline of device 0 failed: index out of range"; !strings.HasPrefix(e.Error, want) {
			t.Errorf("%s: error %q, want it to start with %q", url, e.Error, want)
		}
	}
	if calls != 1 {
		t.Errorf("the failing build ran %d times, want once", calls)
	}
	for _, url := range []string{"/api/files", "/api/settings?file=0", "/api/state?file=0&view=state&idx=1", "/api/meta?file=0&view=state"} {
		if w := get(t, h, "127.0.0.1:8123", url); w.Code != http.StatusOK {
			t.Errorf("%s: status %d (%s), want 200", url, w.Code, w.Body)
		}
	}
}

// TestStoreKnowsNoHTTP: the store and what it computes (loading, caching,
// timelines, curves, state history, the offline page) import no net/http;
// HTTP lives in the handler files (server.go and the handlers added beside
// it).
func TestStoreKnowsNoHTTP(t *testing.T) {
	for _, name := range []string{"store.go", "device.go", "timeline.go", "state.go", "window.go", "axes.go", "export.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "net/http" || strings.HasPrefix(p, "net/http/") {
				t.Errorf("%s imports %s; HTTP belongs in the handlers", name, p)
			}
		}
	}
}

// TestAnalysisTakesTimelineLifetimes: once the Active Memory Timeline is
// built, the device's analysis takes its lifetimes from it, and they are
// those the analysis makes on its own (NewLifetimes), on the demo and on
// real snapshots; before it is built, nothing builds it for them.
func TestAnalysisTakesTimelineLifetimes(t *testing.T) {
	snaps := []*snapshot.Snapshot{}
	if s, err := demo.Open(); err != nil {
		t.Fatal(err)
	} else {
		snaps = append(snaps, s)
	}
	for _, path := range corpus.Files(t)[:8] {
		s, err := snapshot.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, s)
	}
	for _, s := range snaps {
		st := NewStore()
		f := st.file(st.Add(s.Source.Name, s))
		d := s.DefaultDevice()
		dd := f.device(d)
		if dd.activeTimeline() != nil {
			t.Fatalf("%s: a timeline before any was built", s.Source.Name)
		}
		if _, err := f.timeline(d, ViewActive); err != nil {
			t.Fatal(err)
		}
		if dd.activeTimeline() == nil {
			t.Fatalf("%s: the built timeline not found", s.Source.Name)
		}
		dv, err := dd.analysisDevice()
		if err != nil {
			t.Fatal(err)
		}
		got, want := dv.Active, replay.NewLifetimes(s, d, replay.KindActive)
		if got.Len() != want.Len() || !slices.Equal(got.Events, want.Events) || got.PeakBytes != want.PeakBytes || got.PeakAction != want.PeakAction {
			t.Fatalf("%s: the analysis's lifetimes differ from NewLifetimes' (%d elements, want %d)", s.Source.Name, got.Len(), want.Len())
		}
		for i := range got.Len() {
			if got.Item(i) != want.Item(i) {
				t.Fatalf("%s: element %d is %+v, want %+v", s.Source.Name, i, got.Item(i), want.Item(i))
			}
		}
		for k := range got.Events {
			if got.Timestep(k) != want.Timestep(k) {
				t.Fatalf("%s: action %d at timestep %d, want %d", s.Source.Name, k, got.Timestep(k), want.Timestep(k))
			}
		}
	}
}
