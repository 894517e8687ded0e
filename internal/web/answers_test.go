package web

import (
	"encoding/base64"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// TestAnswersAPI checks the handlers that carry gpumem peak and gpumem
// oom to the page: colour classes, the peak panel and the OOM answer.
func TestAnswersAPI(t *testing.T) {
	s, h := newTestServer(t)
	dm, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	s.Add("demo", dm)
	frag, err := snapshot.Open(filepath.Join("..", "analysis", "testdata", "oom-fragmentation.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Add("frag.json", frag)
	const host = "127.0.0.1:8123"

	var cls struct {
		By      string
		Legend  []string
		Classes string
	}
	w := get(t, h, host, "/api/classes?file=1&device=0&view=active&by=category")
	decodeJSON(t, w, &cls)
	raw, err := base64.StdEncoding.DecodeString(cls.Classes)
	if err != nil {
		t.Fatal(err)
	}
	elems := replay.ComputeStats(dm, 0, replay.KindActive, 0).Elements
	if len(cls.Legend) != 8 || cls.Legend[0] != "parameter" || len(raw) != elems {
		t.Errorf("classes: legend %v, %d classes for %d elements", cls.Legend, len(raw), elems)
	}
	if w := get(t, h, host, "/api/classes?file=1&device=0&view=active&by=size"); w.Code != http.StatusBadRequest {
		t.Errorf("by=size: %d", w.Code)
	}
	if w := get(t, h, host, "/api/classes?file=1&device=0&view=segments&by=category"); w.Code != http.StatusBadRequest {
		t.Errorf("segments view: %d", w.Code)
	}

	var peak struct {
		Peak  uint64 `json:"peak_allocated_bytes"`
		Live  uint64 `json:"live_bytes"`
		At    struct{ Timestep int }
		Sites []struct {
			Bytes uint64
			Items []int32
		}
	}
	decodeJSON(t, get(t, h, host, "/api/peak?file=1&device=0&view=active&at=peak"), &peak)
	active, _ := replay.Peaks(dm, 0)
	if peak.Peak != active || peak.Live != active || len(peak.Sites) == 0 || len(peak.Sites[0].Items) == 0 {
		t.Errorf("peak %d live %d (want %d), sites %d", peak.Peak, peak.Live, active, len(peak.Sites))
	}
	// Once the categories are made, an allocation's details say its
	// category and why (the hover).
	var elem struct {
		Category string `json:"category"`
		Reason   string `json:"category_reason"`
	}
	id := int(peak.Sites[0].Items[0])
	decodeJSON(t, get(t, h, host, "/api/elem?file=1&device=0&view=active&id="+itoa(id)), &elem)
	dv := analysis.NewDevice(dm, 0)
	if elem.Category != dv.Category(id).String() || elem.Reason != dv.CategoryReason(id) || !strings.Contains(elem.Reason, ": ") {
		t.Errorf("element %d: category %q (%q), want %q (%q)", id, elem.Category, elem.Reason, dv.Category(id), dv.CategoryReason(id))
	}
	at := peak.At.Timestep
	decodeJSON(t, get(t, h, host, "/api/peak?file=1&device=0&view=active&mode=event&x="+itoa(at)), &peak)
	if peak.Live != active {
		t.Errorf("at x=%d: live %d, want the peak %d", at, peak.Live, active)
	}
	if w := get(t, h, host, "/api/peak?file=1&device=0&view=active&at=e99999"); w.Code != http.StatusBadRequest {
		t.Errorf("at=e99999: %d", w.Code)
	}

	var oom struct {
		Verdict   string
		Requested uint64 `json:"requested_bytes"`
		Settings  []struct {
			Config    string
			AvoidsOOM bool `json:"avoids_oom"`
		}
	}
	var fc struct {
		Xs       []float64
		Headline []float64
		Free     []uint64
	}
	decodeJSON(t, get(t, h, host, "/api/fragcurve?file=2&device=0&view=active&mode=event&x0=0&x1=1000000&w=60"), &fc)
	end := analysis.DumpFragmentation(frag, 0)
	if len(fc.Xs) != 10 || len(fc.Headline) != 10 || fc.Headline[9] != end.Headline || fc.Free[9] != end.Free || fc.Headline[0] != 0 {
		t.Errorf("fragmentation curve %+v; the dump's headline %v, free %d", fc, end.Headline, end.Free)
	}
	decodeJSON(t, get(t, h, host, "/api/oom?file=2&device=0"), &oom)
	if oom.Verdict != "fragmentation" || oom.Requested != 12<<20 || len(oom.Settings) == 0 {
		t.Errorf("oom %+v", oom)
	}
}

// TestAnswersUserCategories: with serve --categories' rules, the peak
// panel, the colour classes and the hover details use them.
func TestAnswersUserCategories(t *testing.T) {
	rules, err := analysis.ParseUserRules([]byte(`[{"match": "model\\.py:169:forward", "category": "attention"}]`), "rules.json")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Addr: "127.0.0.1:8123", Categories: rules})
	dm, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	s.Add("demo", dm)
	h := s.Handler()
	const host = "127.0.0.1:8123"
	var peak struct {
		Categories map[string]uint64 `json:"categories"`
		Sites      []struct {
			Category string  `json:"category"`
			Reason   string  `json:"category_reason"`
			Items    []int32 `json:"items"`
		} `json:"sites"`
	}
	decodeJSON(t, get(t, h, host, "/api/peak?file=0&device=0&view=active&at=peak"), &peak)
	if peak.Categories["attention"] == 0 {
		t.Fatalf("peak categories %v", peak.Categories)
	}
	var cls struct{ Legend []string }
	decodeJSON(t, get(t, h, host, "/api/classes?file=0&device=0&view=active&by=category"), &cls)
	if !strings.Contains(strings.Join(cls.Legend, ","), "attention") {
		t.Errorf("legend %v", cls.Legend)
	}
	for _, st := range peak.Sites {
		if st.Category != "attention" {
			continue
		}
		var e struct {
			Category string `json:"category"`
			Reason   string `json:"category_reason"`
		}
		decodeJSON(t, get(t, h, host, "/api/elem?file=0&device=0&view=active&id="+itoa(int(st.Items[0]))), &e)
		if e.Category != "attention" || !strings.HasPrefix(e.Reason, "user-rule-0: ") || e.Reason != st.Reason {
			t.Errorf("element %d: %q %q; site %q", st.Items[0], e.Category, e.Reason, st.Reason)
		}
		return
	}
	t.Errorf("no attention site: %+v", peak.Sites)
}
