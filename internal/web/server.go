// Package web serves gpumem's local viewer: an HTTP API over loaded
// snapshots that returns only the visible part of each view as binary
// arrays, and the embedded browser UI that draws them.
package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/replay"
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
	// Addr is the bound host:port; requests must name it, localhost,
	// 127.0.0.1 or [::1] in their Host header.
	Addr string
}

// Server is the viewer's HTTP layer over a Store (Add, Load and Warm are
// the store's): each handler reads its parameters, asks the store, and
// encodes the answer or the error.
type Server struct {
	*Store
	opt   Options
	watch watchLogs // gpumem watch logs, drawn by watch.html
	user  userRequests
}

// New returns a server with no files.
func New(opt Options) *Server {
	if opt.MaxUpload <= 0 {
		opt.MaxUpload = 4 << 30
	}
	st := NewStore()
	if opt.Timeline != nil {
		st.build = opt.Timeline
	}
	srv := &Server{Store: st, opt: opt}
	st.userBusy = srv.user.busy
	return srv
}

// SetAddr records the address the listener is bound to (for the Host check).
func (s *Server) SetAddr(addr string) { s.opt.Addr = addr }

// Handler returns the HTTP handler: static UI plus /api/.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /", http.FileServerFS(sub))
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
	mux.HandleFunc("GET /api/flame", s.whenIdle(later, s.handleFlame))
	mux.HandleFunc("GET /api/settings", s.handleSettings)
	mux.HandleFunc("GET /api/classes", s.whenIdle(later, s.handleClasses))
	mux.HandleFunc("GET /api/peak", s.whenIdle(later, s.handlePeak))
	mux.HandleFunc("GET /api/oom", s.whenIdle(later, s.handleOOM))
	mux.HandleFunc("GET /api/fragcurve", s.whenIdle(later, s.handleFragCurve))
	mux.HandleFunc("GET /api/diff", s.handleDiff) // answers_cli.go
	mux.HandleFunc("GET /api/sim", s.handleSim)
	mux.HandleFunc("GET /api/steps", s.handleSteps)
	mux.HandleFunc("GET /api/ranks", s.handleRanks)
	mux.HandleFunc("GET /api/moment", s.handleMoment)
	mux.HandleFunc("POST /api/sites", s.handleSites)
	mux.HandleFunc("GET /api/totals", s.handleTotals) // totals.go
	mux.HandleFunc("POST /api/upload", s.handleUpload)
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

// hostCheck rejects requests whose Host is not this server (DNS rebinding).
func (s *Server) hostCheck(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.allowedHost(r.Host) {
			http.Error(w, "gpumem: forbidden host "+strconv.Quote(r.Host), http.StatusForbidden)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) allowedHost(host string) bool {
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
	if h != "localhost" && h != "127.0.0.1" && h != "::1" {
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, apiError{fmt.Sprintf(format, args...)})
}

func writeBin(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/octet-stream")
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
	id, err := strconv.Atoi(q.Get("file"))
	if err != nil {
		id = 0
	}
	f := s.file(id)
	if f == nil {
		writeErr(w, http.StatusNotFound, "no file %q", q.Get("file"))
		return nil, false
	}
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
	if v := q.Get("device"); v != "" {
		p.device, err = strconv.Atoi(v)
		if err != nil || p.device < 0 || p.device > 1<<16 {
			writeErr(w, http.StatusBadRequest, "bad device %q", v)
			return nil, false
		}
	} else {
		p.device = f.Snap.DefaultDevice()
	}
	if v := q.Get("detail"); v != "" {
		p.detail, err = strconv.Atoi(v)
		if err != nil || p.detail < 0 {
			writeErr(w, http.StatusBadRequest, "bad detail %q", v)
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

func floatParam(r *http.Request, name string, def float64) float64 {
	v, err := strconv.ParseFloat(r.URL.Query().Get(name), 64)
	if err != nil {
		return def
	}
	return v
}

func intParam(r *http.Request, name string, def int) int {
	v, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil {
		return def
	}
	return v
}

// handleFiles lists the files. A file still being decoded is listed with
// loading and its progress, one that failed with its error. With
// ?wait=ID the answer waits until that file is ready, so that the page
// need not poll for it.
func (s *Server) handleFiles(w http.ResponseWriter, r *http.Request) {
	if v := r.URL.Query().Get("wait"); v != "" {
		id, err := strconv.Atoi(v)
		if f := s.file(id); err == nil && f != nil {
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
	q := windowQuery{X0: floatParam(r, "x0", lo), X1: floatParam(r, "x1", hi), W: intParam(r, "w", 1000),
		H: intParam(r, "h", 500), Y0: floatParam(r, "y0", 0), Y1: floatParam(r, "y1", 0), Mode: p.mode, Detail: p.detail}
	writeBin(w, tl.window(q))
	// The indexes of windows narrower than the whole trace are built from
	// the first window's answer on: built beside its query they slowed the
	// first paint of an 80 MB snapshot by about 10 ms. (Started once the
	// page had drawn, they made a 1 GB snapshot's first zoom wait for them,
	// 400-490 ms against 260-290.)
	tl.tl.StartIndexes()
}

func (s *Server) handleCurves(w http.ResponseWriter, r *http.Request) {
	p, tl, ok := s.timelineParamsWhen(w, r, "has no curves", false)
	if !ok {
		return
	}
	p.f.markDrawn() // asked for once the first window is drawn
	lo, hi := tl.xRange(p.mode)
	b, err := p.f.device(p.device).curvesWindow(tl, floatParam(r, "x0", lo), floatParam(r, "x1", hi), intParam(r, "w", 1000), p.mode)
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
}

func elemInfo(tl *timeline, id int) elemJSON {
	e := tl.tl.Element(id)
	return elemJSON{ID: id, Text: tl.tl.Context(id), Size: float64(e.Size), Addr: e.Addr}
}

func (s *Server) handleElem(w http.ResponseWriter, r *http.Request) {
	_, tl, ok := s.timelineParams(w, r, "has no elements")
	if !ok {
		return
	}
	id := intParam(r, "id", -1)
	if id < 0 || id >= tl.tl.Len()+tl.tl.Envelopes() {
		writeErr(w, http.StatusNotFound, "no element %q", r.URL.Query().Get("id"))
		return
	}
	writeJSON(w, http.StatusOK, elemInfo(tl, id))
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
	dd := p.f.device(p.device)
	from := max(intParam(r, "from", 0), 0)
	count := min(max(intParam(r, "count", 100), 0), 5000)
	lines := []string{}
	hist, err := dd.stateHist()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return
	}
	h := hist.h
	for i := from; i < from+count && i < h.Len(); i++ {
		lines = append(lines, eventLine(h.Event(i)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": len(dd.viz), "from": from, "lines": lines})
}

// eventParam reads idx, a memory_viz event of the device (default its
// last; -1 is before the first event), or answers 400.
func eventParam(w http.ResponseWriter, r *http.Request, dd *deviceData) (int, bool) {
	idx := intParam(r, "idx", len(dd.viz)-1)
	if idx < -1 || idx >= len(dd.viz) {
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
	hist, err := dd.stateHist()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = hist.stateJSON(idx).writeTo(w)
}

func (s *Server) handleSettings(w http.ResponseWriter, r *http.Request) {
	p, ok := s.params(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"settings": settingsJSON(p.f.Snap)})
}

func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	if s.opt.Decode == nil {
		writeErr(w, http.StatusForbidden, "uploads are disabled")
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
	s.Warm(id) // the page opens it next
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "file": fileInfoOf(s.file(id))})
}
