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
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

//go:embed static
var staticFS embed.FS

// Options configure a Server.
type Options struct {
	// Decode turns uploaded bytes into a snapshot; nil disables uploads.
	Decode func(name string, data []byte) (*snapshot.Snapshot, error)
	// MaxUpload caps an upload's size in bytes (default 4 GiB).
	MaxUpload int64
	// Addr is the bound host:port; requests must name it, localhost,
	// 127.0.0.1 or [::1] in their Host header.
	Addr string
}

// Server holds the loaded snapshots and what was computed from them.
type Server struct {
	opt   Options
	mu    sync.Mutex
	files []*file
	// lastLoad is closed when the most recently queued Load has finished;
	// loads run one after another so that the first file is ready first.
	lastLoad chan struct{}
	watch    watchLogs // gpumem watch logs, drawn by watch.html
}

// A file goes from loading to shown (decoded but for its address
// versions: the requests that need none are answered) to ready (decoded,
// or failed).
type file struct {
	ID   int
	Name string
	// Snap is set before shown is closed and never after; loadErr before
	// ready is closed, and before shown when Snap is nil.
	Snap    *snapshot.Snapshot
	loadErr error
	shown   chan struct{}
	ready   chan struct{}
	// published says that showEarly, called on the loading goroutine,
	// has shown Snap.
	published bool
	// Decoding progress, for the page's loading message.
	doneBytes, totalBytes atomic.Int64
	// warm is set by Warm: lay out the first view as soon as possible.
	warm atomic.Bool

	mu        sync.Mutex
	devs      map[int]*deviceData
	timelines map[tlKey]*tlEntry

	infoOnce sync.Once
	info     fileInfo
}

type tlKey struct {
	device int
	view   string
}

type tlEntry struct {
	once sync.Once
	tl   *timeline
}

// New returns a server with no files.
func New(opt Options) *Server {
	if opt.MaxUpload <= 0 {
		opt.MaxUpload = 4 << 30
	}
	return &Server{opt: opt}
}

// SetAddr records the address the listener is bound to (for the Host check).
func (s *Server) SetAddr(addr string) { s.opt.Addr = addr }

// Add registers a decoded snapshot under a display name and returns its id.
func (s *Server) Add(name string, snap *snapshot.Snapshot) int {
	f := s.addPending(name)
	f.finish(snap, nil)
	return f.ID
}

// A Loader decodes one file for Load. It reports its progress with
// progress and, when it can, passes early to the decoder as
// snapshot.Options.Early, so that the server starts laying out the first
// view while the decoder finishes.
type Loader func(progress func(done, total int64), early func(*snapshot.Snapshot)) (*snapshot.Snapshot, error)

// Load registers a file under name at once and decodes it in the
// background with load, after the files queued before it. Until it is
// shown the page lists it as loading with load's progress, and requests
// for it wait (those that show address versions until it is ready). The
// returned channel receives load's error (nil on success) when it is done.
//
// gpumem serve loads this way so that the browser fetches the page while
// the snapshot is decoded, and a big file shows its progress.
func (s *Server) Load(name string, load Loader) (int, <-chan error) {
	f := s.addPending(name)
	s.mu.Lock()
	prev, next := s.lastLoad, make(chan struct{})
	s.lastLoad = next
	s.mu.Unlock()
	errc := make(chan error, 1)
	go func() {
		defer close(next)
		if prev != nil {
			<-prev
		}
		snap, err := loadSafe(load, func(done, total int64) {
			f.doneBytes.Store(done)
			f.totalBytes.Store(total)
		}, f.showEarly)
		f.finish(snap, err)
		errc <- err
	}()
	return f.ID, errc
}

// loadSafe keeps the server alive if a decoder panics on bad input.
func loadSafe(load Loader, progress func(done, total int64), early func(*snapshot.Snapshot)) (snap *snapshot.Snapshot, err error) {
	defer func() {
		if p := recover(); p != nil {
			snap, err = nil, fmt.Errorf("decoder failed: %v", p)
		}
	}()
	snap, err = load(progress, early)
	if err == nil && snap == nil {
		err = errors.New("decoder returned no snapshot")
	}
	return snap, err
}

func (f *file) finish(snap *snapshot.Snapshot, err error) {
	f.loadErr = err
	if !f.published {
		f.Snap = snap
		close(f.shown)
	}
	close(f.ready)
}

// isShown reports whether the file is shown (or failed).
func (f *file) isShown() bool {
	select {
	case <-f.shown:
		return true
	default:
		return false
	}
}

// waitShown blocks until the file is shown or failed, or ctx ends.
func (f *file) waitShown(ctx context.Context) error {
	select {
	case <-f.shown:
	case <-ctx.Done():
		return ctx.Err()
	}
	if f.Snap == nil {
		return f.loadErr
	}
	return nil
}

// wait blocks until the file is ready or ctx ends.
func (f *file) wait(ctx context.Context) error {
	select {
	case <-f.ready:
		return f.loadErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) addPending(name string) *file {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Duplicate names get " (n)" like memory_viz.
	base, n := name, 1
	for taken := true; taken; {
		taken = false
		for _, f := range s.files {
			if f.Name == name {
				n++
				name = fmt.Sprintf("%s (%d)", base, n)
				taken = true
				break
			}
		}
	}
	f := &file{ID: len(s.files), Name: name, shown: make(chan struct{}), ready: make(chan struct{}), devs: map[int]*deviceData{}, timelines: map[tlKey]*tlEntry{}}
	s.files = append(s.files, f)
	return f
}

// Warm builds, in the background and once the file is loaded, what the
// first paint needs: the default device's Active Memory Timeline.
// Everything else (curves, markers, the time axis, other views) is built
// on first use, so that the first window is answered as early as possible.
func (s *Server) Warm(id int) {
	f := s.file(id)
	if f == nil {
		return
	}
	f.warm.Store(true)
	go func() {
		defer func() { _ = recover() }() // a request for it will report the failure
		if f.waitShown(context.Background()) == nil {
			f.timeline(f.Snap.DefaultDevice(), ViewActive)
		}
	}()
}

// showEarly is the file's snapshot.Options.Early, called by the decoder
// before its last step, the address versions. It shows the snapshot to
// the requests that need no versions (the file list, the timelines'
// windows, curves and markers) and, when the file is to be warmed, lays
// out its first view before the decoder goes on: the page draws while
// the versions are filled in.
func (f *file) showEarly(snap *snapshot.Snapshot) {
	f.Snap = snap
	f.published = true
	close(f.shown)
	if f.warm.Load() {
		defer func() { _ = recover() }() // as in Warm
		f.timelineOf(snap, snap.DefaultDevice(), ViewActive)
	}
}

func (s *Server) file(id int) *file {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || id >= len(s.files) {
		return nil
	}
	return s.files[id]
}

func (f *file) device(d int) *deviceData {
	f.mu.Lock()
	defer f.mu.Unlock()
	dd := f.devs[d]
	if dd == nil {
		dd = newDeviceData(f.Snap, d)
		f.devs[d] = dd
	}
	return dd
}

func (f *file) timeline(d int, view string) *timeline {
	return f.timelineOf(f.Snap, d, view)
}

// timelineOf is timeline for the file's snapshot snap, which showEarly
// has before the file is shown.
func (f *file) timelineOf(snap *snapshot.Snapshot, d int, view string) *timeline {
	k := tlKey{d, view}
	f.mu.Lock()
	e := f.timelines[k]
	if e == nil {
		e = &tlEntry{}
		f.timelines[k] = e
	}
	f.mu.Unlock()
	e.once.Do(func() { e.tl = newTimeline(snap, d, view) })
	return e.tl
}

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
	mux.HandleFunc("GET /api/window", s.handleWindow)
	mux.HandleFunc("GET /api/curves", s.handleCurves)
	mux.HandleFunc("GET /api/markers", s.handleMarkers)
	mux.HandleFunc("GET /api/elem", s.handleElem)
	mux.HandleFunc("GET /api/search", s.handleSearch)
	mux.HandleFunc("GET /api/events", s.handleEvents)
	mux.HandleFunc("GET /api/state", s.handleState)
	mux.HandleFunc("GET /api/flame", s.handleFlame)
	mux.HandleFunc("GET /api/settings", s.handleSettings)
	mux.HandleFunc("GET /api/classes", s.handleClasses)
	mux.HandleFunc("GET /api/peak", s.handlePeak)
	mux.HandleFunc("GET /api/oom", s.handleOOM)
	mux.HandleFunc("POST /api/upload", s.handleUpload)
	mux.HandleFunc("GET /api/watch", s.handleWatch)
	return s.hostCheck(mux)
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
	return p, p.f.timeline(p.device, p.view), true
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

type deviceInfo struct {
	Device   int  `json:"device"`
	Events   int  `json:"events"`
	Segments int  `json:"segments"`
	HasTime  bool `json:"hasTime"`
}

type fileInfo struct {
	ID            int          `json:"id"`
	Name          string       `json:"name"`
	Generation    string       `json:"generation"`
	Size          int64        `json:"size"`
	Devices       []deviceInfo `json:"devices"`
	DefaultDevice int          `json:"defaultDevice"`
	HasSettings   bool         `json:"hasSettings"`
	// While the file is decoded: Loading, and Done of Size bytes read
	// (Size -1 when unknown).
	Loading bool   `json:"loading,omitempty"`
	Done    int64  `json:"done,omitempty"`
	Error   string `json:"error,omitempty"`
}

// fileInfoOf describes a file; computed once (it scans every event).
func fileInfoOf(f *file) fileInfo {
	f.infoOnce.Do(func() { f.info = computeFileInfo(f) })
	return f.info
}

func computeFileInfo(f *file) fileInfo {
	s := f.Snap
	fi := fileInfo{ID: f.ID, Name: f.Name, Generation: string(s.Source.Generation), Size: s.Source.FileSize,
		DefaultDevice: s.DefaultDevice(), HasSettings: s.AllocatorSettings != nil, Devices: []deviceInfo{}}
	devs := s.Devices()
	if len(devs) == 0 {
		devs = []int{0}
	}
	for _, d := range devs {
		di := deviceInfo{Device: d}
		if d < len(s.Traces) {
			di.Events = len(s.Traces[d].Events)
			di.HasTime = di.Events > 0
			for i := range s.Traces[d].Events {
				if s.Traces[d].Events[i].Flags&snapshot.FlagHasTime == 0 {
					di.HasTime = false
					break
				}
			}
		}
		for i := range s.Segments {
			if int(s.Segments[i].Device) == d {
				di.Segments++
			}
		}
		fi.Devices = append(fi.Devices, di)
	}
	return fi
}

// loadErrText is a load error as one line that starts with the file name.
func loadErrText(name string, err error) string {
	var de *snapshot.DecodeError
	if errors.As(err, &de) {
		return err.Error() // names the file already
	}
	return name + ": " + err.Error()
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
	s.mu.Lock()
	files := append([]*file(nil), s.files...)
	s.mu.Unlock()
	out := struct {
		Files  []fileInfo `json:"files"`
		Upload bool       `json:"upload"`
	}{Files: []fileInfo{}, Upload: s.opt.Decode != nil}
	for _, f := range files {
		switch {
		case !f.isShown():
			fi := fileInfo{ID: f.ID, Name: f.Name, Loading: true, Devices: []deviceInfo{}, Done: f.doneBytes.Load(), Size: f.totalBytes.Load()}
			out.Files = append(out.Files, fi)
		case f.Snap == nil:
			out.Files = append(out.Files, fileInfo{ID: f.ID, Name: f.Name, Error: loadErrText(f.Name, f.loadErr), Devices: []deviceInfo{}})
		default:
			out.Files = append(out.Files, fileInfoOf(f))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// metaJSON describes one view of one device.
type metaJSON struct {
	View      string     `json:"view"`
	Device    int        `json:"device"`
	Elements  int        `json:"elements"`
	Envelopes int        `json:"envelopes"`
	Detail    int        `json:"detail"`
	Steps     int        `json:"steps"`
	Events    int        `json:"events"`
	Peak      float64    `json:"peak"`
	HasTime   bool       `json:"hasTime"`
	XEvent    [2]float64 `json:"xEvent"`
	XTime     [2]float64 `json:"xTime"`
	Empty     bool       `json:"empty"`
	Message   string     `json:"message,omitempty"`
}

// meta describes a view. It builds the view's timeline but not its time
// axis unless the page asks for the time mode.
func (s *Server) meta(p *params) *metaJSON {
	dd := p.f.device(p.device)
	m := &metaJSON{View: p.view, Device: p.device, Events: len(dd.viz), HasTime: dd.HasTime, Detail: p.detail}
	if isTimeline(p.view) {
		tl := p.f.timeline(p.device, p.view)
		m.Elements = tl.tl.Len()
		m.Envelopes = tl.tl.Envelopes()
		m.Steps = tl.tl.Timesteps()
		m.Peak = float64(tl.tl.PeakBytes())
		m.XEvent[0], m.XEvent[1] = tl.xRange("event")
		if p.mode == "time" && dd.HasTime {
			m.XTime[0], m.XTime[1] = tl.xRange("time")
		}
		if tl.tl.Len() == 0 {
			m.Empty = true
			m.Message = fmt.Sprintf("Device %d has no allocations in its trace or snapshot.", p.device)
		}
	} else if p.view == ViewState && len(dd.viz) == 0 {
		m.Empty = true
		m.Message = fmt.Sprintf("Device %d has no trace events; the state shown is the snapshot's.", p.device)
	}
	return m
}

func (s *Server) handleMeta(w http.ResponseWriter, r *http.Request) {
	p, ok := s.paramsWhen(w, r, false)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.meta(p))
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
}

func (s *Server) handleCurves(w http.ResponseWriter, r *http.Request) {
	p, tl, ok := s.timelineParamsWhen(w, r, "has no curves", false)
	if !ok {
		return
	}
	lo, hi := tl.xRange(p.mode)
	writeBin(w, p.f.device(p.device).curvesWindow(tl, floatParam(r, "x0", lo), floatParam(r, "x1", hi), intParam(r, "w", 1000), p.mode))
}

func (s *Server) handleMarkers(w http.ResponseWriter, r *http.Request) {
	p, tl, ok := s.timelineParamsWhen(w, r, "has no markers", false)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"markers": p.f.device(p.device).markers(tl)})
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
	h := dd.stateHist().h
	for i := from; i < from+count && i < h.Len(); i++ {
		lines = append(lines, eventLine(h.Event(i)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": len(dd.viz), "from": from, "lines": lines})
}

func (s *Server) handleState(w http.ResponseWriter, r *http.Request) {
	p, ok := s.params(w, r)
	if !ok {
		return
	}
	dd := p.f.device(p.device)
	idx := intParam(r, "idx", len(dd.viz)-1)
	if idx < -1 || idx >= len(dd.viz) {
		writeErr(w, http.StatusBadRequest, "event index %d out of range [-1, %d)", idx, len(dd.viz))
		return
	}
	writeJSON(w, http.StatusOK, dd.stateHist().stateJSON(idx))
}

// settingsJSON returns allocator_settings as a JSON object (nil if absent).
func settingsJSON(s *snapshot.Snapshot) json.RawMessage {
	if s.AllocatorSettings == nil {
		return nil
	}
	var b strings.Builder
	b.WriteString("{")
	for i, kv := range s.AllocatorSettings.Raw {
		if i > 0 {
			b.WriteString(",")
		}
		k, _ := json.Marshal(kv.Key)
		b.Write(k)
		b.WriteString(":")
		v := kv.JSON
		if !json.Valid([]byte(v)) {
			q, _ := json.Marshal(v)
			v = string(q)
		}
		b.WriteString(v)
	}
	b.WriteString("}")
	return json.RawMessage(b.String())
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
	snap, err := loadSafe(func(func(int64, int64), func(*snapshot.Snapshot)) (*snapshot.Snapshot, error) {
		return s.opt.Decode(name, data)
	}, nil, nil)
	if err != nil {
		writeErr(w, http.StatusUnprocessableEntity, "%s", loadErrText(name, err))
		return
	}
	id := s.Add(name, snap)
	s.Warm(id) // the page opens it next
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "file": fileInfoOf(s.file(id))})
}

// eventLine is memory_viz's formatEvent on one line (the list shows one
// row per event).
func eventLine(e replay.EventInfo) string {
	return strings.Replace(e.Text, "\n              (stream", " (stream", 1)
}
