package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gpumem/gpumem/internal/analysis"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// Store holds the loaded snapshots and computes, once and on first use,
// what the viewer shows of them; it knows nothing of HTTP (the handlers in
// server.go only encode its answers). A computation that fails (a panic
// in replay on an input it does not expect) is kept as an error that every
// request for it answers.
type Store struct {
	mu    sync.Mutex
	files []*file
	// lastLoad is closed when the most recently queued Load has finished;
	// loads run one after another so that the first file is ready first.
	lastLoad chan struct{}
	build    timelineBuilder
	// userBusy, when set, says that the user is waiting on requests (see
	// userRequests): the state history's background build pauses then.
	userBusy func() bool
	// answerWaiting, when set, says that an answer request waits on the
	// analysis: it stops pausing for the user then.
	answerWaiting func() bool
	// userAnswered, when set, returns once no request the user waits on
	// is being answered or wanted says to go on: the address versions'
	// pass pauses on it (file.pauseVersions).
	userAnswered func(wanted func() bool)
	// versionsWait bounds how long a loaded file's address versions wait
	// for the page to draw its first view (markDrawn).
	versionsWait time.Duration
	// rules are serve --categories' rules, for every device's answers.
	rules *analysis.UserRules
}

// versionsWait is the Store's default: a page that has not drawn by then
// (none was opened, or it opened another view) does not hold them up.
const versionsWait = 500 * time.Millisecond

// timelineBuilder makes the timeline of one view in tests (else
// replay.NewTimelineFed).
type timelineBuilder func(s *snapshot.Snapshot, device int, kind replay.Kind) *replay.Timeline

// NewStore returns a store with no files.
func NewStore() *Store { return &Store{versionsWait: versionsWait} }

// lazy is a value computed once. A panic in the computation becomes the
// error every caller gets, where sync.Once alone would leave the next
// callers a nil value.
type lazy[T any] struct {
	once sync.Once
	done atomic.Bool // computed (or failed)
	v    T
	err  error
}

// get computes the value with f on the first call; what and args name the
// computation in its error.
func (l *lazy[T]) get(f func() T, what string, args ...any) (T, error) {
	l.once.Do(func() {
		defer l.done.Store(true)
		defer func() {
			if p := recover(); p != nil {
				l.err = fmt.Errorf("%s failed: %v", fmt.Sprintf(what, args...), p)
			}
		}()
		l.v = f()
	})
	return l.v, l.err
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

	// build makes a view's timeline in tests (nil: replay.NewTimelineFed
	// with fed).
	build timelineBuilder
	rules *analysis.UserRules // the Store's
	// fed lays the trace out while the decoder runs; set by the decoder's
	// Feed before the file is shown.
	fed *replay.FedLayout
	// userBusy and answerWaiting are the store's.
	userBusy, answerWaiting func() bool
	// drawn is closed when the page has drawn the first view (markDrawn);
	// the decoder fills in the address versions after that.
	drawn     chan struct{}
	drawnOnce sync.Once
	// versionsWait and userAnswered are the store's.
	versionsWait time.Duration
	userAnswered func(wanted func() bool)
	// readyWaiters counts the requests waiting for the file to be ready
	// (wait): the versions' pass does not pause while there are any.
	readyWaiters atomic.Int32

	infoOnce sync.Once
	info     fileInfo
	// devList and defaultDev are the file's devices (fileDevices: shared,
	// never changed) and its DefaultDevice, each computed once (devices,
	// defaultDevice): each scans every segment (2-10 ms on a 1 GB
	// snapshot's 760,000), and every window request asks for one of them.
	devsOnce, defaultOnce sync.Once
	devList               []int
	defaultDev            int
}

type tlKey struct {
	device int
	view   string
}

// tlEntry is a timeline built once, or the failure of that build.
type tlEntry = lazy[*timeline]

// Add registers a decoded snapshot under a display name and returns its id.
func (s *Store) Add(name string, snap *snapshot.Snapshot) int {
	f := s.addPending(name)
	f.finish(snap, nil)
	return f.ID
}

// A Loader decodes one file for Load, with opt as its snapshot.Options
// (more may be set): Progress for the page's loading message, and Early
// and Feed, so that the server starts laying out the first view while the
// decoder runs.
type Loader func(opt *snapshot.Options) (*snapshot.Snapshot, error)

// Load registers a file under name at once and decodes it in the
// background with load, after the files queued before it. Until it is
// shown the page lists it as loading with load's progress, and requests
// for it wait (those that show address versions until it is ready). The
// returned channel receives load's error (nil on success) when it is done.
//
// gpumem serve loads this way so that the browser fetches the page while
// the snapshot is decoded, and a big file shows its progress.
func (s *Store) Load(name string, load Loader) (int, <-chan error) {
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
		snap, err := loadSafe(load, &snapshot.Options{
			Progress: func(done, total int64) {
				f.doneBytes.Store(done)
				f.totalBytes.Store(total)
			},
			Early: f.showEarly,
			// The versions' pass starts as the page draws its first
			// view and the user's first zooms come: it gives them the
			// core while they are answered, as the window index's
			// build does (a first zoom on a 1 GB snapshot waited
			// 100-300 ms for a core beside it on two cores).
			Pause: f.pauseVersions,
			Feed: func(feed *snapshot.EventFeed) {
				f.fed = replay.LayoutFeed(feed, func(layout func()) { go layout() })
			},
		})
		f.finish(snap, err)
		errc <- err
	}()
	return f.ID, errc
}

// loadSafe keeps the server alive if a decoder panics on bad input.
func loadSafe(load Loader, opt *snapshot.Options) (snap *snapshot.Snapshot, err error) {
	defer func() {
		if p := recover(); p != nil {
			snap, err = nil, fmt.Errorf("decoder failed: %v", p)
		}
	}()
	snap, err = load(opt)
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
	default:
	}
	// A request waiting here may be one the user waits on: the versions'
	// pass must not pause for it (pauseVersions).
	f.readyWaiters.Add(1)
	defer f.readyWaiters.Add(-1)
	select {
	case <-f.ready:
		return f.loadErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) addPending(name string) *file {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Duplicate names get " (n)" like memory_viz.
	base, n := name, 1
	for taken := true; taken; {
		taken = false
		for _, f := range s.files {
			if f != nil && f.Name == name {
				n++
				name = fmt.Sprintf("%s (%d)", base, n)
				taken = true
				break
			}
		}
	}
	f := &file{ID: len(s.files), Name: name, shown: make(chan struct{}), ready: make(chan struct{}), devs: map[int]*deviceData{},
		timelines: map[tlKey]*tlEntry{}, build: s.build, userBusy: s.userBusy, answerWaiting: s.answerWaiting, rules: s.rules,
		drawn: make(chan struct{}), versionsWait: s.versionsWait, userAnswered: s.userAnswered}
	s.files = append(s.files, f)
	return f
}

// Warm builds, in the background and once the file is loaded, what the
// first paint needs: the default device's Active Memory Timeline.
// Everything else (curves, markers, the time axis, other views) is built
// on first use, so that the first window is answered as early as possible.
func (s *Store) Warm(id int) {
	f := s.file(id)
	if f == nil {
		return
	}
	f.warm.Store(true)
	go func() {
		// A failed build is kept: the requests for it answer its error.
		if f.waitShown(context.Background()) == nil {
			_, _ = f.timeline(f.defaultDevice(), ViewActive)
		}
	}()
}

// devices are the devices the file's views can show (fileDevices), and
// defaultDevice the one shown when none is asked for; the file must be
// shown (Snap set), and its snapshot is not changed after. Each is
// computed once, on its own: the first view's layout waits for the
// default device, not for the list.
func (f *file) devices() []int {
	f.devsOnce.Do(func() { f.devList = fileDevices(f.Snap) })
	return f.devList
}

func (f *file) defaultDevice() int {
	f.defaultOnce.Do(func() { f.defaultDev = f.Snap.DefaultDevice() })
	return f.defaultDev
}

// showEarly is the file's snapshot.Options.Early, called by the decoder
// before its last step, the address versions. It shows the snapshot to
// the requests that need no versions (the file list, the timelines'
// windows, curves and markers) and, when the file is to be warmed, lays
// out its first view and lets the decoder go on once the page has drawn
// it (markDrawn) or after versionsWait.
func (f *file) showEarly(snap *snapshot.Snapshot) {
	f.Snap = snap
	f.published = true
	close(f.shown)
	if f.warm.Load() {
		_, _ = f.timelineOf(snap, f.defaultDevice(), ViewActive) // as in Warm
		// The versions (a pass over every event) wait for the first view
		// to be drawn: run beside the page's raster, they took a core from
		// it and the first paint came 10 ms later on two cores.
		t := time.NewTimer(f.versionsWait)
		defer t.Stop()
		select {
		case <-f.drawn:
		case <-t.C:
		}
	}
}

// pauseVersions is the file's snapshot.Options.Pause: the address
// versions' pass waits while the server answers a request the user waits
// on (a window, a state step), unless a request waits for the versions
// (one of those may be it).
func (f *file) pauseVersions() {
	if f.userAnswered != nil {
		f.userAnswered(func() bool { return f.readyWaiters.Load() > 0 })
	}
}

// markDrawn says that the page has drawn the first view, or needs the
// address versions now: the decoder goes on with them.
func (f *file) markDrawn() {
	f.drawnOnce.Do(func() { close(f.drawn) })
}

// Remove forgets file id (requests already running finish with it); ids
// are not reused. It reports whether there was such a file.
func (s *Store) Remove(id int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id < 0 || id >= len(s.files) || s.files[id] == nil {
		return false
	}
	s.files[id] = nil
	return true
}

func (s *Store) file(id int) *file {
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
		dd.userBusy, dd.answerWaiting, dd.userAnswered, dd.rules = f.userBusy, f.answerWaiting, f.userAnswered, f.rules
		dd.activeTimeline = func() *replay.Timeline { return f.builtTimeline(d, ViewActive) }
		f.devs[d] = dd
	}
	return dd
}

// builtTimeline is the file's timeline of view on device d when it is
// built already (without error), else nil: it starts no build.
func (f *file) builtTimeline(d int, view string) *replay.Timeline {
	f.mu.Lock()
	e := f.timelines[tlKey{d, view}]
	f.mu.Unlock()
	if e == nil || !e.done.Load() || e.err != nil {
		return nil
	}
	return e.v.tl
}

// timeline is the file's timeline of view on device d, built on first
// use; a build that failed (a panic in replay) is an error, kept for every
// later request.
func (f *file) timeline(d int, view string) (*timeline, error) {
	return f.timelineOf(f.Snap, d, view)
}

// timelineOf is timeline for the file's snapshot snap, which showEarly
// has before the file is shown.
func (f *file) timelineOf(snap *snapshot.Snapshot, d int, view string) (*timeline, error) {
	k := tlKey{d, view}
	f.mu.Lock()
	e := f.timelines[k]
	if e == nil {
		e = &tlEntry{}
		f.timelines[k] = e
	}
	build, fed := f.build, f.fed
	f.mu.Unlock()
	return e.get(func() *timeline {
		t := newTimeline(snap, d, view, build, fed)
		t.drawn, t.drawnWait = f.drawn, f.versionsWait
		return t
	}, "building the %s timeline of device %d", view, d)
}

type deviceInfo struct {
	Device int `json:"device"`
	// Name is "cuda:N", or for a torch.profiler output "cpu" or
	// "exported device".
	Name     string `json:"name"`
	Events   int    `json:"events"`
	Segments int    `json:"segments"`
	HasTime  bool   `json:"hasTime"`
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
	// Source names a torch.profiler format (empty for a snapshot); Notes
	// are what it lacks; Unavailable maps each view it cannot show to why
	// (the page says so instead of drawing nothing).
	Source      string            `json:"source,omitempty"`
	Notes       []string          `json:"notes,omitempty"`
	Unavailable map[string]string `json:"unavailable,omitempty"`
	Loading     bool              `json:"loading,omitempty"`
	Done        int64             `json:"done,omitempty"`
	Error       string            `json:"error,omitempty"`
}

// fileInfoOf describes a file; computed once (it scans every event).
func fileInfoOf(f *file) fileInfo {
	f.infoOnce.Do(func() { f.info = computeFileInfo(f) })
	return f.info
}

func computeFileInfo(f *file) fileInfo {
	s := f.Snap
	fi := fileInfo{ID: f.ID, Name: f.Name, Generation: string(s.Source.Generation), Size: s.Source.FileSize,
		DefaultDevice: f.defaultDevice(), HasSettings: s.AllocatorSettings != nil, Devices: []deviceInfo{}}
	for _, d := range f.devices() {
		di := deviceInfo{Device: d, Name: s.DeviceName(d)}
		if d < len(s.Traces) {
			di.Events = len(s.Traces[d].Events)
		}
		di.HasTime = f.device(d).HasTime
		for i := range s.Segments {
			if int(s.Segments[i].Device) == d {
				di.Segments++
			}
		}
		fi.Devices = append(fi.Devices, di)
	}
	if p := s.Profiler; p != nil {
		fi.Source = snapshot.ProfilerFormatName(s.Source.Generation)
		fi.Notes = p.Notes
		fi.Unavailable = profilerViews(s)
	}
	return fi
}

// profilerViews says which views a torch.profiler output cannot show and
// why: those drawn from allocator segments, which it does not record.
func profilerViews(s *snapshot.Snapshot) map[string]string {
	segs := s.Unavailable("segments")
	return map[string]string{
		"segments": "The Active Cached Segment Timeline needs allocator segments: " + segs + ".",
		"state":    "The Allocator State History needs allocator segments: " + segs + ".",
		"private":  "Private pools are allocator segments (CUDA graphs, MemPools): " + segs + ". The Active Memory Timeline shows every allocation.",
		"settings": "A " + snapshot.ProfilerFormatName(s.Source.Generation) + " records no allocator settings (PYTORCH_CUDA_ALLOC_CONF); a memory snapshot from PyTorch 2.4 or later does.",
	}
}

// fileList describes every file: one being decoded with its progress, one
// that failed with its error.
func (s *Store) fileList() []fileInfo {
	s.mu.Lock()
	files := append([]*file(nil), s.files...)
	s.mu.Unlock()
	out := []fileInfo{}
	for _, f := range files {
		switch {
		case f == nil: // removed
		case !f.isShown():
			out = append(out, fileInfo{ID: f.ID, Name: f.Name, Loading: true, Devices: []deviceInfo{}, Done: f.doneBytes.Load(), Size: f.totalBytes.Load()})
		case f.Snap == nil:
			out = append(out, fileInfo{ID: f.ID, Name: f.Name, Error: loadErrText(f.Name, f.loadErr), Devices: []deviceInfo{}})
		default:
			out = append(out, fileInfoOf(f))
		}
	}
	return out
}

// loadErrText is a load error as one line that starts with the file name.
func loadErrText(name string, err error) string {
	var de *snapshot.DecodeError
	if errors.As(err, &de) {
		return err.Error() // names the file already
	}
	return name + ": " + err.Error()
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
func (f *file) meta(device int, view string, detail int, mode string) (*metaJSON, error) {
	dd := f.device(device)
	m := &metaJSON{View: view, Device: device, Events: len(dd.viz), HasTime: dd.HasTime, Detail: detail}
	if isTimeline(view) {
		tl, err := f.timeline(device, view)
		if err != nil {
			return nil, err
		}
		m.Elements = tl.tl.Len()
		m.Envelopes = tl.tl.Envelopes()
		m.Steps = tl.tl.Timesteps()
		m.Peak = float64(tl.tl.PeakBytes())
		m.XEvent[0], m.XEvent[1] = tl.xRange("event")
		if mode == "time" && dd.HasTime {
			m.XTime[0], m.XTime[1] = tl.xRange("time")
		}
		if tl.tl.Len() == 0 {
			m.Empty = true
			m.Message = fmt.Sprintf("Device %d has no allocations in its trace or snapshot.", device)
		}
	} else if view == ViewState && len(dd.viz) == 0 {
		m.Empty = true
		m.Message = fmt.Sprintf("Device %d has no trace events; the state shown is the snapshot's.", device)
	}
	return m, nil
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

// eventLine is memory_viz's formatEvent on one line (the list shows one
// row per event).
func eventLine(e replay.EventInfo) string {
	return strings.Replace(e.Text, "\n              (stream", " (stream", 1)
}
