// Package web serves gpumem's local viewer: an HTTP API over loaded
// snapshots that returns only the visible part of each view as binary
// arrays, and the embedded browser UI that draws them.
package web

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/loopback"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

//go:embed static
var staticFS embed.FS

// Options configure a Server.
type Options struct {
	// Timeline, when set, builds a view's timeline instead of
	// replay.NewTimeline: tests make a build fail with it.
	Timeline func(s *snapshot.Snapshot, device int, kind replay.Kind) *replay.Timeline
	// Decode turns uploaded bytes into a snapshot; nil disables uploads.
	Decode func(name string, data []byte) (*snapshot.Snapshot, error)
	// MaxUpload caps an upload's size in bytes (default 4 GiB).
	MaxUpload int64
	// MaxUploads and MaxUploadBytes cap how many uploads the server keeps
	// and their total size (defaults 8 and twice MaxUpload): a new upload
	// past either drops the oldest ones.
	MaxUploads     int
	MaxUploadBytes int64
	// Addr is the bound host:port; requests must name it, localhost,
	// 127.0.0.1 or [::1] in their Host header.
	Addr string
	// Categories are a --categories file's rules for the answers.
	Categories *analysis.UserRules
	// AllowHosts are more host names (no port) that requests may name,
	// for a server bound beyond loopback (gpumem serve --allow-host).
	// Bound there, the loopback names are taken only from loopback
	// clients.
	AllowHosts []string
}

// Server is the viewer's HTTP layer over a Store (Add, Load and Warm are
// the store's): each handler reads its parameters, asks the store, and
// encodes the answer or the error.
type Server struct {
	*Store
	opt   Options
	watch watchLogs // gpumem watch logs, drawn by watch.html
	user  userRequests

	upMu    sync.Mutex
	uploads []upload // kept, oldest first
}

// upload is a file the page uploaded: its id and size.
type upload struct {
	id   int
	size int64
}

// New returns a server with no files.
func New(opt Options) *Server {
	if opt.MaxUpload <= 0 {
		opt.MaxUpload = 4 << 30
	}
	if opt.MaxUploads <= 0 {
		opt.MaxUploads = 8
	}
	if opt.MaxUploadBytes <= 0 {
		opt.MaxUploadBytes = 2 * opt.MaxUpload
	}
	st := NewStore()
	st.rules = opt.Categories
	if opt.Timeline != nil {
		st.build = opt.Timeline
	}
	srv := &Server{Store: st, opt: opt}
	st.userBusy = srv.user.busy
	st.answerWaiting = srv.user.answerWaiting
	st.userAnswered = srv.user.waitAnsweredUnless
	return srv
}

// SetAddr records the address the listener is bound to (for the Host check).
func (s *Server) SetAddr(addr string) { s.opt.Addr = addr }

// Handler returns the HTTP handler: static UI plus /api/.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /", http.FileServerFS(sub))
	mux.HandleFunc("GET /sizes.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		io.WriteString(w, units.SizesJS)
	})
	// The page itself comes with its style and script inlined: two fewer
	// requests for the browser to make while it competes with the decoder
	// for the CPU (10 ms sooner to the first paint of an 80 MB file).
	index, err := page("", nil)
	if err != nil {
		panic(err) // the embedded files are part of the binary
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		io.WriteString(w, index)
	})
	mux.HandleFunc("GET /api/files", s.handleFiles)
	mux.HandleFunc("GET /api/meta", s.handleMeta)
	mux.HandleFunc("GET /api/window", s.user.track(s.handleWindow))
	mux.HandleFunc("GET /api/curves", s.whenIdle(soon, s.handleCurves))
	mux.HandleFunc("GET /api/markers", s.handleMarkers)
	mux.HandleFunc("GET /api/elem", s.handleElem)
	mux.HandleFunc("GET /api/search", s.handleSearch)
	mux.HandleFunc("GET /api/events", s.handleEvents)
	mux.HandleFunc("GET /api/state", s.user.track(s.handleState))
	mux.HandleFunc("GET /api/flame", s.answer(s.handleFlame))
	mux.HandleFunc("GET /api/settings", s.handleSettings)
	mux.HandleFunc("GET /api/classes", s.answer(s.handleClasses))
	mux.HandleFunc("GET /api/peak", s.answer(s.handlePeak))
	mux.HandleFunc("GET /api/oom", s.answer(s.handleOOM))
	mux.HandleFunc("GET /api/fragcurve", s.answer(s.handleFragCurve))
	mux.HandleFunc("GET /api/diff", s.handleDiff) // answers_cli.go
	mux.HandleFunc("GET /api/sim", s.handleSim)
	mux.HandleFunc("GET /api/steps", s.handleSteps)
	mux.HandleFunc("GET /api/ranks", s.handleRanks)
	mux.HandleFunc("GET /api/moment", s.handleMoment)
	mux.HandleFunc("POST /api/sites", s.handleSites)
	mux.HandleFunc("GET /api/totals", s.handleTotals) // totals.go
	mux.HandleFunc("GET /api/sitecurve", s.handleSiteCurve)
	mux.HandleFunc("POST /api/upload", s.handleUpload)
	mux.HandleFunc("DELETE /api/files/{id}", s.handleRemove)
	mux.HandleFunc("GET /api/watch", s.handleWatch)
	return s.hostCheck(mux)
}

// whenIdle wraps the handlers of what the page loads after its first
// paint, or on a click, and computes on first use: h runs in the
// background at priority p once the user has paused (see inBackground and
// userRequests).
func (s *Server) whenIdle(p priority, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.user.waitIdle(r.Context())
		inBackground(p, func() { h(w, r) })
	}
}

// answer wraps the handlers of the answers (peak, OOM, colour classes,
// fragmentation curve, flamegraph): they wait for the user to pause, as
// what the page loads after its first paint does, but at most 250 ms;
// then they run in the background at priority soon (not later), and the
// device's analysis (built once, see analysisDevice) stops pausing for
// windows and state steps while one is open. Under 32 concurrent mixed
// requests they had waited behind that traffic for 7-10 s at the median;
// run at the request's own priority instead, they took 0.3 s but made
// the windows' median 5 times slower (bench/RESULTS.md).
func (s *Server) answer(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.user.waitIdleAtMost(r.Context(), s.user.pauseLen())
		s.user.answers.Add(1)
		defer s.user.answers.Add(-1)
		inBackground(soon, func() { h(w, r) })
	}
}

// hostCheck rejects requests whose Host is not this server (DNS rebinding).
func (s *Server) hostCheck(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.allowedHost(r.Host, r.RemoteAddr) {
			http.Error(w, "gpumem: forbidden host "+strconv.Quote(r.Host), http.StatusForbidden)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// boundBeyondLoopback reports whether the server listens on an address
// other machines can reach (0.0.0.0, a LAN address).
func (s *Server) boundBeyondLoopback() bool {
	return s.opt.Addr != "" && loopback.Beyond(s.opt.Addr)
}

func (s *Server) allowedHost(host, remote string) bool {
	if host == "" {
		return false
	}
	if s.opt.Addr != "" && strings.EqualFold(host, s.opt.Addr) {
		return true
	}
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		h, port = host, ""
	}
	h = strings.Trim(strings.ToLower(h), "[]")
	switch {
	case h == "localhost" || h == "127.0.0.1" || h == "::1":
		// A client elsewhere naming localhost is not on this machine.
		if s.boundBeyondLoopback() && !loopback.Host(remote) {
			return false
		}
	case slices.ContainsFunc(s.opt.AllowHosts, func(a string) bool { return strings.EqualFold(strings.Trim(a, "[]"), h) }):
	default:
		return false
	}
	if s.opt.Addr == "" {
		return true
	}
	_, boundPort, err := net.SplitHostPort(s.opt.Addr)
	return err != nil || port == "" || port == boundPort
}

type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	// Encoded before the header goes out: a value JSON cannot hold (a NaN)
	// is a 500 with its error, not a 200 with an empty body.
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		_ = json.NewEncoder(&buf).Encode(apiError{"encoding the answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func writeErr(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, apiError{fmt.Sprintf(format, args...)})
}

func writeBin(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/octet-stream")
	// Sized: net/http sends a body larger than its buffer in chunks
	// otherwise, and a window answer is up to a megabyte.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// params reads the common query parameters.
type params struct {
	f      *file
	device int
	view   string
	detail int
	mode   string
}

func (s *Server) params(w http.ResponseWriter, r *http.Request) (*params, bool) {
	return s.paramsWhen(w, r, true)
}

// paramsWhen is params; versions false answers as soon as the file is
// shown, for requests that read no address versions.
func (s *Server) paramsWhen(w http.ResponseWriter, r *http.Request, versions bool) (*params, bool) {
	q := r.URL.Query()
	id := 0
	if v := q.Get("file"); v != "" {
		var err error
		if id, err = strconv.Atoi(v); err != nil || id < 0 {
			writeErr(w, http.StatusBadRequest, "bad file %q: want a file id (0, 1, ...)", v)
			return nil, false
		}
	}
	f := s.file(id)
	if f == nil {
		writeErr(w, http.StatusNotFound, "no file %q", q.Get("file"))
		return nil, false
	}
	var err error
	wait := f.wait
	if !versions {
		wait = f.waitShown
	} else {
		f.markDrawn() // this request waits for the versions: no more delay
	}
	if err := wait(r.Context()); err != nil {
		writeErr(w, http.StatusUnprocessableEntity, "%s", loadErrText(f.Name, err))
		return nil, false
	}
	p := &params{f: f, view: q.Get("view"), mode: q.Get("mode"), detail: DefaultDetail}
	if p.view == "" {
		p.view = ViewActive
	}
	switch p.view {
	case ViewActive, ViewPrivate, ViewSegments, ViewState, ViewSettings:
	default:
		writeErr(w, http.StatusBadRequest, "unknown view %q", p.view)
		return nil, false
	}
	switch p.mode {
	case "", "event", "time":
	default:
		writeErr(w, http.StatusBadRequest, "bad mode %q: want event or time", p.mode)
		return nil, false
	}
	if v := q.Get("device"); v != "" {
		p.device, err = strconv.Atoi(v)
		if err != nil || p.device < 0 {
			writeErr(w, http.StatusBadRequest, "bad device %q: want a device number (0, 1, ...)", v)
			return nil, false
		}
		// As the command line says it; and nothing is built or kept for
		// a device the file does not have.
		if devs := f.devices(); !slices.Contains(devs, p.device) {
			writeErr(w, http.StatusBadRequest, "bad device %q: %s has no device %d (devices: %s)", v, f.Name, p.device, units.List(devs))
			return nil, false
		}
	} else {
		p.device = f.defaultDevice()
	}
	if v := q.Get("detail"); v != "" {
		p.detail, err = strconv.Atoi(v)
		if err != nil || p.detail < 0 {
			writeErr(w, http.StatusBadRequest, "bad detail %q: want a count (0, 1, ...)", v)
			return nil, false
		}
	}
	return p, true
}

// timelineParams is params for the requests only timelines answer; what
// completes the error for other views ("has no curves").
func (s *Server) timelineParams(w http.ResponseWriter, r *http.Request, what string) (*params, *timeline, bool) {
	return s.timelineParamsWhen(w, r, what, true)
}

// timelineParamsWhen is timelineParams; versions as for paramsWhen.
func (s *Server) timelineParamsWhen(w http.ResponseWriter, r *http.Request, what string, versions bool) (*params, *timeline, bool) {
	p, ok := s.paramsWhen(w, r, versions)
	if !ok {
		return nil, nil, false
	}
	if !isTimeline(p.view) {
		writeErr(w, http.StatusBadRequest, "view %q %s", p.view, what)
		return nil, nil, false
	}
	tl, err := p.f.timeline(p.device, p.view)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return nil, nil, false
	}
	return p, tl, true
}

// query reads a request's parameters. The first bad one is kept: bad
// answers it with 400 and a JSON error naming it, before anything is
// computed or cached for the request.
type query struct {
	v   url.Values
	err error
}

func newQuery(r *http.Request) *query { return &query{v: r.URL.Query()} }

func (q *query) fail(name, want string) {
	if q.err == nil {
		q.err = fmt.Errorf("bad %s %q: want %s", name, q.v.Get(name), want)
	}
}

// float reads a finite number (def when absent).
func (q *query) float(name string, def float64) float64 {
	s := q.v.Get(name)
	if s == "" {
		return def
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		q.fail(name, "a finite number")
		return def
	}
	return v
}

// int reads an integer in [lo, hi] (def when absent).
func (q *query) int(name string, def, lo, hi int) int {
	s := q.v.Get(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		q.fail(name, fmt.Sprintf("an integer from %d to %d", lo, hi))
		return def
	}
	return v
}

// bad answers the first bad parameter, if any, and reports whether it did.
func (q *query) bad(w http.ResponseWriter) bool {
	if q.err == nil {
		return false
	}
	writeErr(w, http.StatusBadRequest, "%v", q.err)
	return true
}

// maxPixels bounds the w and h parameters (the views clamp to less).
const maxPixels = 1 << 20

// handleFiles lists the files. A file still being decoded is listed with
// loading and its progress, one that failed with its error. With
// ?wait=ID the answer waits until that file is ready, so that the page
// need not poll for it.
func (s *Server) handleFiles(w http.ResponseWriter, r *http.Request) {
	if v := r.URL.Query().Get("wait"); v != "" {
		id, err := strconv.Atoi(v)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "bad wait %q: want a file id (0, 1, ...)", v)
			return
		}
		if f := s.file(id); f != nil {
			if f.waitShown(r.Context()) == context.Canceled {
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Files  []fileInfo `json:"files"`
		Upload bool       `json:"upload"`
	}{s.fileList(), s.opt.Decode != nil})
}

func (s *Server) handleMeta(w http.ResponseWriter, r *http.Request) {
	p, ok := s.paramsWhen(w, r, false)
	if !ok {
		return
	}
	m, err := p.f.meta(p.device, p.view, p.detail, p.mode)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

func (s *Server) handleWindow(w http.ResponseWriter, r *http.Request) {
	p, tl, ok := s.timelineParamsWhen(w, r, "has no timeline", false)
	if !ok {
		return
	}
	lo, hi := tl.xRange(p.mode)
	qp := newQuery(r)
	q := windowQuery{X0: qp.float("x0", lo), X1: qp.float("x1", hi), W: qp.int("w", 1000, 0, maxPixels),
		H: qp.int("h", 500, 0, maxPixels), Y0: qp.float("y0", 0), Y1: qp.float("y1", 0), Mode: p.mode, Detail: p.detail,
		Slides: qp.v.Get("enc") == "slides"}
	if qp.bad(w) {
		return
	}
	tl.beforeWindow(&s.user)
	// The answer's time on the server, in a Server-Timing header that the
	// page's resource timings show (the viewer bench reads it): wall and,
	// on the query's own thread, CPU; and how far the window index was
	// built when it started.
	index := tl.tl.IndexBuilt() // as the answer starts
	win, wall, cpu, cpuOK := timedWindow(tl, q)
	timing := fmt.Sprintf("window;dur=%.1f", float64(wall.Microseconds())/1000)
	if cpuOK {
		timing += fmt.Sprintf(", cpu;dur=%.1f", float64(cpu.Microseconds())/1000)
	}
	timing += fmt.Sprintf(", index;desc=%s", index)
	w.Header().Set("Server-Timing", timing)
	writeBin(w, win)
	putAnswer(win)
	tl.afterWindow()
}

// timedWindow answers q with its goroutine locked to its thread, so that
// the thread's CPU time (cpuOK where it can be read) is the answer's.
// The unlock is deferred: a goroutine that ends locked ends its thread.
func timedWindow(tl *timeline, q windowQuery) (win []byte, wall, cpu time.Duration, cpuOK bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := time.Now()
	c0, ok := threadCPU()
	win = tl.window(q)
	c1, _ := threadCPU()
	return win, time.Since(t0), c1 - c0, ok
}

func (s *Server) handleCurves(w http.ResponseWriter, r *http.Request) {
	p, tl, ok := s.timelineParamsWhen(w, r, "has no curves", false)
	if !ok {
		return
	}
	p.f.markDrawn() // asked for once the first window is drawn
	lo, hi := tl.xRange(p.mode)
	q := newQuery(r)
	x0, x1, width := q.float("x0", lo), q.float("x1", hi), q.int("w", 1000, 0, maxPixels)
	if q.bad(w) {
		return
	}
	b, err := p.f.device(p.device).curvesWindow(tl, x0, x1, width, p.mode)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return
	}
	writeBin(w, b)
}

func (s *Server) handleMarkers(w http.ResponseWriter, r *http.Request) {
	p, tl, ok := s.timelineParamsWhen(w, r, "has no markers", false)
	if !ok {
		return
	}
	p.f.markDrawn() // asked for once the first window is drawn
	// The page asks for the markers once its first window is painted: the
	// state view's first answer is prepared from then on, without waiting
	// for the user to pause (it takes seconds on a big file); the markers
	// wait.
	p.f.warmState(p.device)
	s.user.waitIdle(r.Context())
	var m []marker
	inBackground(soon, func() { m = p.f.device(p.device).markers(tl) })
	writeJSON(w, http.StatusOK, map[string]any{"markers": m})
}

type elemJSON struct {
	ID   int     `json:"id"`
	Text string  `json:"text"`
	Size float64 `json:"size"`
	Addr string  `json:"addr"`
	// Category and CategoryReason, for an allocation of the allocation
	// views once the device's categories are made (answers.go).
	Category       string `json:"category,omitempty"`
	CategoryReason string `json:"category_reason,omitempty"`
}

func elemInfo(tl *timeline, id int) elemJSON {
	e := tl.tl.Element(id)
	return elemJSON{ID: id, Text: tl.tl.Context(id), Size: float64(e.Size), Addr: e.Addr}
}

func (s *Server) handleElem(w http.ResponseWriter, r *http.Request) {
	p, tl, ok := s.timelineParams(w, r, "has no elements")
	if !ok {
		return
	}
	q := newQuery(r)
	id := q.int("id", -1, 0, math.MaxInt32)
	if q.v.Get("id") == "" {
		q.fail("id", "an element id")
	}
	if q.bad(w) {
		return
	}
	if id >= tl.tl.Len()+tl.tl.Envelopes() {
		writeErr(w, http.StatusNotFound, "no element %q", r.URL.Query().Get("id"))
		return
	}
	e := elemInfo(tl, id)
	if dv := p.f.device(p.device).classifiedDevice(); dv != nil && allocationView(p, tl) && id < dv.Active.Len() {
		e.Category, e.CategoryReason = dv.Category(id).String(), dv.CategoryReason(id)
	}
	writeJSON(w, http.StatusOK, e)
}

type searchJSON struct {
	Count int     `json:"count"`
	IDs   []int32 `json:"ids"`
}

// maxSearchIDs bounds the ids one search answer lists (the count is exact).
const maxSearchIDs = 200000

func toSearchJSON(ids []int) searchJSON {
	out := searchJSON{Count: len(ids), IDs: make([]int32, 0, min(len(ids), maxSearchIDs))}
	for _, id := range ids[:min(len(ids), maxSearchIDs)] {
		out.IDs = append(out.IDs, int32(id))
	}
	return out
}

func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	_, tl, ok := s.timelineParams(w, r, "cannot be searched")
	if !ok {
		return
	}
	addr, frame := strings.TrimSpace(r.URL.Query().Get("addr")), strings.TrimSpace(r.URL.Query().Get("frame"))
	var a, fr []int
	// Addresses are shown as b'hex_version: a pasted 0x prefix still matches.
	addr = strings.TrimPrefix(strings.ToLower(addr), "0x")
	if addr != "" {
		a = tl.tl.Search(addr, "")
	}
	if frame != "" {
		fr = tl.tl.Search("", frame)
	}
	writeJSON(w, http.StatusOK, map[string]searchJSON{"addr": toSearchJSON(a), "frame": toSearchJSON(fr)})
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	p, ok := s.params(w, r)
	if !ok {
		return
	}
	q := newQuery(r)
	from, count := q.int("from", 0, 0, math.MaxInt32), min(q.int("count", 100, 0, math.MaxInt32), 5000)
	if q.bad(w) {
		return
	}
	dd := p.f.device(p.device)
	lines := []string{}
	// The texts need no history: the view's list shows at once.
	h := dd.dumpSource()
	for i := from; i < from+count && i < h.Len(); i++ {
		lines = append(lines, eventLine(h.Event(i)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": len(dd.viz), "from": from, "lines": lines})
}

// eventParam reads idx, a memory_viz event of the device (default its
// last; -1 is before the first event), or answers 400.
func eventParam(w http.ResponseWriter, r *http.Request, dd *deviceData) (int, bool) {
	q := newQuery(r)
	idx := q.int("idx", len(dd.viz)-1, -1, math.MaxInt32)
	if q.bad(w) {
		return 0, false
	}
	if idx >= len(dd.viz) {
		writeErr(w, http.StatusBadRequest, "event index %d out of range [-1, %d)", idx, len(dd.viz))
		return 0, false
	}
	return idx, true
}

// eventParams is params for the answers about one moment of the state
// view: the device's data and the memory_viz event index ?idx.
func (s *Server) eventParams(w http.ResponseWriter, r *http.Request) (*params, *deviceData, int, bool) {
	p, ok := s.params(w, r)
	if !ok {
		return nil, nil, 0, false
	}
	dd := p.f.device(p.device)
	idx, ok := eventParam(w, r, dd)
	return p, dd, idx, ok
}

func (s *Server) handleState(w http.ResponseWriter, r *http.Request) {
	p, dd, idx, ok := s.eventParams(w, r)
	if !ok {
		return
	}
	var st *stateJSON
	if idx == len(dd.viz)-1 {
		// The view opens here: the dump, without waiting for the history.
		var err error
		if st, err = dd.dumpState(); err != nil {
			writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
			return
		}
	} else {
		hist, err := dd.stateHist()
		if err != nil {
			writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
			return
		}
		st = hist.stateJSON(idx)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = st.writeTo(w)
}

func (s *Server) handleSettings(w http.ResponseWriter, r *http.Request) {
	p, ok := s.params(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"settings": settingsJSON(p.f.Snap)})
}

// sameOrigin reports why a state-changing request may come from another
// site, or "" when it comes from the viewer's own page. Any page the user
// visits can send a simple POST (text/plain, no preflight) to loopback:
// the browser's Sec-Fetch-Site and Origin say where it came from, and a
// content type other than the three simple ones makes a cross-site fetch
// ask first (a preflight this server never grants).
func sameOrigin(r *http.Request) string {
	if v := r.Header.Get("Sec-Fetch-Site"); v != "" && v != "same-origin" {
		return "Sec-Fetch-Site " + strconv.Quote(v)
	}
	if o := r.Header.Get("Origin"); o != "" && !strings.EqualFold(o, "http://"+r.Host) {
		return "Origin " + strconv.Quote(o)
	}
	return ""
}

func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	if s.opt.Decode == nil {
		writeErr(w, http.StatusForbidden, "uploads are disabled")
		return
	}
	if why := sameOrigin(r); why != "" {
		writeErr(w, http.StatusForbidden, "upload refused: %s is not this viewer's page", why)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/octet-stream" {
		writeErr(w, http.StatusUnsupportedMediaType, "upload refused: Content-Type %q, want application/octet-stream", ct)
		return
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		name = "upload"
	}
	if r.ContentLength > s.opt.MaxUpload {
		writeErr(w, http.StatusRequestEntityTooLarge, "%s: %d bytes exceeds the upload limit of %d bytes", name, r.ContentLength, s.opt.MaxUpload)
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.opt.MaxUpload)
	data, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeErr(w, http.StatusRequestEntityTooLarge, "%s: exceeds the upload limit of %d bytes", name, s.opt.MaxUpload)
			return
		}
		writeErr(w, http.StatusBadRequest, "%s: reading upload: %v", name, err)
		return
	}
	snap, err := loadSafe(func(*snapshot.Options) (*snapshot.Snapshot, error) {
		return s.opt.Decode(name, data)
	}, nil)
	if err != nil {
		writeErr(w, http.StatusUnprocessableEntity, "%s", loadErrText(name, err))
		return
	}
	id := s.Add(name, snap)
	s.keepUpload(id, int64(len(data)))
	s.Warm(id) // the page opens it next
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "file": fileInfoOf(s.file(id))})
}

// keepUpload records upload id and drops the oldest uploads while more
// than MaxUploads, or more than MaxUploadBytes together, are kept.
func (s *Server) keepUpload(id int, size int64) {
	s.upMu.Lock()
	defer s.upMu.Unlock()
	s.uploads = append(s.uploads, upload{id, size})
	total := int64(0)
	for _, u := range s.uploads {
		total += u.size
	}
	for len(s.uploads) > 1 && (len(s.uploads) > s.opt.MaxUploads || total > s.opt.MaxUploadBytes) {
		total -= s.uploads[0].size
		s.Remove(s.uploads[0].id)
		s.uploads = s.uploads[1:]
	}
}

// handleRemove answers DELETE /api/files/{id}: the file is forgotten (the
// page's "Close file"). DELETE is not a simple method: another site's
// page cannot send it without a preflight, which is never granted.
func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request) {
	if why := sameOrigin(r); why != "" {
		writeErr(w, http.StatusForbidden, "remove refused: %s is not this viewer's page", why)
		return
	}
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || !s.Remove(id) {
		writeErr(w, http.StatusNotFound, "file: no file %q", r.PathValue("id"))
		return
	}
	s.upMu.Lock()
	s.uploads = slices.DeleteFunc(s.uploads, func(u upload) bool { return u.id == id })
	s.upMu.Unlock()
	writeJSON(w, http.StatusOK, struct {
		Files []fileInfo `json:"files"`
	}{s.fileList()})
}

// fileDevices are the devices a file's views can show (as its file list
// says): those with data, or device 0 when none has.
func fileDevices(s *snapshot.Snapshot) []int {
	if devs := s.Devices(); len(devs) > 0 {
		return devs
	}
	return []int{0}
}
