package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/cli"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/web"
	"github.com/gpumem/gpumem/snapshot"
)

// TestEndpointsEqualCLI: /api/diff, /api/sim, /api/steps and /api/ranks
// answer, byte for byte, what gpumem diff/sim/steps/ranks --json print on
// the same real files (the viewer's views draw these answers).
func TestEndpointsEqualCLI(t *testing.T) {
	ctx128 := corpus.File(t, "cs336-kkaitlyn111__memory_ctx128_forward.pickle")
	ctx256 := corpus.File(t, "cs336-kkaitlyn111__memory_ctx256_forward.pickle")
	stepped := corpus.File(t, "cs336-silmont2000__memory_forward_fp32_128.pickle")
	oom := corpus.File(t, "flexgen-Yiyi__oom_snapshot.pickle")
	// A run that stopped at an OOM on a 3 GiB device (no real file has an
	// OOM in its trace): sim --capacity oom's answer, curves included.
	synthOOM := filepath.Join(t.TempDir(), "oom.pickle")
	var serr bytes.Buffer
	if code := cli.Main([]string{"synth", "--model", "mlp", "--layers", "8", "--hidden", "8192", "--capacity", "3GiB", "-o", synthOOM}, strings.NewReader(""), &bytes.Buffer{}, &serr); code != 0 {
		t.Fatalf("synth: %s", serr.String())
	}
	files := []string{ctx128, ctx256, stepped, oom, synthOOM}
	srv := web.New(web.Options{Addr: "127.0.0.1:8123"})
	for _, p := range files {
		s, err := snapshot.Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv.Add(p, s)
	}
	h := srv.Handler()
	for _, tc := range []struct {
		url string
		cli []string
	}{
		{"/api/diff?a=0&b=1", []string{"diff", "--json", ctx128, ctx256}},
		{"/api/diff?a=1&b=0&at=end&depth=3", []string{"diff", "--json", "--at", "end", "--depth", "3", ctx256, ctx128}},
		{"/api/diff?a=0&b=1&at=e1000", []string{"diff", "--json", "--at", "e1000", ctx128, ctx256}},
		{"/api/sim?file=0", []string{"sim", "--json", ctx128}},
		{"/api/sim?file=0&device=0&config=expandable_segments:True", []string{"sim", "--json", "--device", "0", "--config", "expandable_segments:True", ctx128}},
		{"/api/sim?file=0&sweep=1", []string{"sim", "--json", "--sweep", ctx128}},
		{"/api/sim?file=3&capacity=oom", []string{"sim", "--json", "--capacity", "oom", oom}},
		{"/api/sim?file=2&sweep=1&from_empty=0&capacity=8GiB", []string{"sim", "--json", "--sweep", "--from-empty=false", "--capacity", "8GiB", stepped}},
		{"/api/sim?file=0&sweep=1&curve=300", []string{"sim", "--json", "--sweep", "--curve", "300", ctx128}},
		{"/api/sim?file=0&config=max_split_size_mb:128&curve=64", []string{"sim", "--json", "--config", "max_split_size_mb:128", "--curve", "64", ctx128}},
		{"/api/sim?file=3&capacity=oom&curve=100", []string{"sim", "--json", "--capacity", "oom", "--curve", "100", oom}},
		{"/api/sim?file=4&capacity=oom&curve=100", []string{"sim", "--json", "--capacity", "oom", "--curve", "100", synthOOM}},
		{"/api/sim?file=4&capacity=oom&sweep=1&curve=33", []string{"sim", "--json", "--capacity", "oom", "--sweep", "--curve", "33", synthOOM}},
		{"/api/steps?file=2", []string{"steps", "--json", stepped}},
		{"/api/steps?file=1", []string{"steps", "--json", ctx256}},
		{"/api/ranks", []string{"ranks", "--json", ctx128, ctx256, stepped, oom, synthOOM}},
	} {
		var out, errb bytes.Buffer
		code := cli.Main(tc.cli, strings.NewReader(""), &out, &errb)
		r := httptest.NewRequest("GET", tc.url, nil)
		r.Host = "127.0.0.1:8123"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if code != 0 {
			// The CLI fails: so must the endpoint, with the same message.
			if w.Code == 200 || !strings.Contains(w.Body.String(), strings.TrimPrefix(strings.TrimSpace(errb.String()), "gpumem "+tc.cli[0]+": ")) {
				t.Errorf("%s: CLI exit %d (%s); endpoint %d %s", tc.url, code, errb.String(), w.Code, w.Body.String())
			}
			continue
		}
		if w.Code != 200 {
			t.Errorf("%s: %d %s", tc.url, w.Code, w.Body.String())
			continue
		}
		if got, want := w.Body.String(), out.String(); got != want {
			t.Errorf("%s: endpoint differs from %q:\n%s", tc.url, tc.cli, firstDiff(got, want))
		}
	}
}

// firstDiff shows where two texts first differ.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-200)
	return "endpoint: ..." + a[lo:min(len(a), i+200)] + "\n     cli: ..." + b[lo:min(len(b), i+200)]
}

// TestSitesAndMoments: /api/sites prints sites as analysis.SiteString
// does (the views never re-implement it) and refuses what is not a list
// of frame lists; /api/moment places events on the timestep axis as the
// peak answer does.
func TestSitesAndMoments(t *testing.T) {
	p := corpus.File(t, "cs336-silmont2000__memory_forward_fp32_128.pickle")
	s, err := snapshot.Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := web.New(web.Options{Addr: "127.0.0.1:8123"})
	srv.Add(p, s)
	h := srv.Handler()
	do := func(method, url, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, url, strings.NewReader(body))
		r.Host = "127.0.0.1:8123"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	frames := [][]string{{"/a/b/train.py:141:log_metrics", "/a/b/train.py:158:train_step"}, {}, {"??:0:at::native::foo(int)"}}
	body, _ := json.Marshal(frames)
	w := do("POST", "/api/sites", string(body))
	var got []string
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 || len(got) != len(frames) {
		t.Fatalf("/api/sites: %d %s", w.Code, w.Body.String())
	}
	for i, f := range frames {
		if got[i] != analysis.SiteString(f) {
			t.Errorf("site %q: %q, want %q", f, got[i], analysis.SiteString(f))
		}
	}
	if w := do("POST", "/api/sites", `{"not": "a list"}`); w.Code != 400 {
		t.Errorf("/api/sites with an object: %d", w.Code)
	}
	w = do("GET", "/api/moment?file=0&at=e100,peak", "")
	var ms []struct {
		Spec     string
		Event    int
		Timestep int
	}
	if err := json.Unmarshal(w.Body.Bytes(), &ms); err != nil || len(ms) != 2 {
		t.Fatalf("/api/moment: %d %s", w.Code, w.Body.String())
	}
	d := analysis.NewDevice(s, s.DefaultDevice())
	for i, spec := range []string{"e100", "peak"} {
		m, _ := d.Resolve(spec)
		if ms[i].Event != m.Event || ms[i].Timestep != m.Timestep {
			t.Errorf("moment %s: %+v, want event %d timestep %d", spec, ms[i], m.Event, m.Timestep)
		}
	}
	if w := do("GET", "/api/moment?file=0&at=e99999999", ""); w.Code != 400 {
		t.Errorf("a moment past the trace: %d", w.Code)
	}
}

// TestTotalsPeaks: /api/totals, the Compare view's curves, reaches the
// peaks gpumem info gives (replay.Peaks) on real files, in its buckets'
// order of events and times.
func TestTotalsPeaks(t *testing.T) {
	for _, name := range []string{"cs336-kkaitlyn111__memory_ctx128_forward.pickle", "cs336-silmont2000__memory_forward_fp32_128.pickle"} {
		p := corpus.File(t, name)
		s, err := snapshot.Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := web.New(web.Options{Addr: "127.0.0.1:8123"})
		srv.Add(p, s)
		r := httptest.NewRequest("GET", "/api/totals?file=0&n=50", nil)
		r.Host = "127.0.0.1:8123"
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, r)
		var got struct {
			Events    int
			First     []int32  `json:"first_event"`
			TimeUS    []int64  `json:"time_us_from_start"`
			Requested []uint64 `json:"requested_max"`
			Reserved  []uint64 `json:"reserved_max"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 {
			t.Fatalf("%s: %d %s", name, w.Code, w.Body.String())
		}
		active, reserved := replay.Peaks(s, s.DefaultDevice())
		if len(got.First) < 2 || len(got.First) > 50 || slices.Max(got.Requested) != active || slices.Max(got.Reserved) != reserved ||
			!slices.IsSorted(got.First) || !slices.IsSorted(got.TimeUS) || len(got.TimeUS) != len(got.First) {
			t.Errorf("%s: %d buckets, max requested %d (peak active %d), max reserved %d (%d), times %d",
				name, len(got.First), slices.Max(got.Requested), active, slices.Max(got.Reserved), reserved, len(got.TimeUS))
		}
	}
}

// TestSiteCurveEndpoint: /api/sitecurve, the Compare view's highlight of
// a site, lies on /api/totals' buckets, never above the requested total,
// reaches the bytes the diff gives the site at its moment, and refuses
// bad parameters.
func TestSiteCurveEndpoint(t *testing.T) {
	srv := web.New(web.Options{Addr: "127.0.0.1:8123"})
	for _, name := range []string{"cs336-kkaitlyn111__memory_ctx128_forward.pickle", "cs336-kkaitlyn111__memory_ctx256_forward.pickle"} {
		p := corpus.File(t, name)
		s, err := snapshot.Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv.Add(p, s)
	}
	h := srv.Handler()
	get := func(url string, v any) int {
		r := httptest.NewRequest("GET", url, nil)
		r.Host = "127.0.0.1:8123"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if v != nil && w.Code == 200 {
			if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
				t.Fatalf("%s: %v", url, err)
			}
		}
		return w.Code
	}
	var diff analysis.Diff
	if code := get("/api/diff?a=0&b=1", &diff); code != 200 || len(diff.Sites) < 3 {
		t.Fatalf("diff: %d, %d sites", code, len(diff.Sites))
	}
	for _, site := range diff.Sites[:3] {
		q := ""
		for _, f := range site.Frames {
			q += "&frame=" + url.QueryEscape(f)
		}
		for file, want := range []uint64{site.ABytes, site.BBytes} {
			var c analysis.SiteCurve
			var tot struct {
				First     []int32  `json:"first_event"`
				Requested []uint64 `json:"requested_max"`
			}
			if code := get(fmt.Sprintf("/api/sitecurve?file=%d&n=120%s", file, q), &c); code != 200 {
				t.Fatalf("sitecurve: %d", code)
			}
			get(fmt.Sprintf("/api/totals?file=%d&n=120", file), &tot)
			if !slices.Equal(c.FirstEvent, tot.First) || len(c.BytesMax) != len(tot.Requested) || slices.Max(c.BytesMax) < want || want > 0 && c.Allocations == 0 {
				t.Errorf("file %d site %q: %d buckets from %v (totals' %v), highest %d, the diff's %d, %d allocations",
					file, site.Frames, len(c.BytesMax), c.FirstEvent[:3], tot.First[:3], slices.Max(c.BytesMax), want, c.Allocations)
				continue
			}
			for b := range c.BytesMax {
				if c.BytesMax[b] > tot.Requested[b] {
					t.Errorf("file %d site %q bucket %d: %d above the requested total %d", file, site.Frames, b, c.BytesMax[b], tot.Requested[b])
				}
			}
		}
	}
	for _, bad := range []string{"/api/sitecurve?file=0&depth=0", "/api/sitecurve?file=0&n=x", "/api/sitecurve?file=9", "/api/sitecurve?file=0&depth=1&frame=a&frame=b"} {
		if code := get(bad, nil); code/100 != 4 {
			t.Errorf("%s: %d", bad, code)
		}
	}
}
