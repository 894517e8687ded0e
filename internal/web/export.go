package web

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// MaxHTMLStateEvents caps the trace a page embeds for its state history
// (about 200 bytes per event in the page: the event's line, what undoing
// it changes and the totals after it).
const MaxHTMLStateEvents = 250_000

// HTMLOptions choose what a self-contained page embeds.
type HTMLOptions struct {
	View   string // initial view; "" embeds every view
	Device int    // -1: memory_viz's default device
	Detail int    // 0: DefaultDetail
	// Width is the number of pixel columns precomputed for each timeline.
	Width int
}

// MaxWidth is the most pixel columns (and rows) the viewer computes for
// a timeline or curve: wider requests are clamped to it.
const MaxWidth = 16384

// Validate checks options a command line gives: the page treats 0 as
// "the default" and the viewer draws at most MaxWidth columns, so values
// outside would be silently replaced. The messages name html's flags.
func (o *HTMLOptions) Validate() error {
	if o.Width < 1 || o.Width > MaxWidth {
		return fmt.Errorf("--width must be between 1 and %d pixel columns, got %d", MaxWidth, o.Width)
	}
	if o.Detail < 1 {
		return fmt.Errorf("--detail must be at least 1 polygon, got %d", o.Detail)
	}
	switch o.View {
	case "", "active", "timeline", "private", "segments", "state", "settings":
		return nil
	}
	return fmt.Errorf("unknown --view %q (want active, private, segments, state or settings)", o.View)
}

// WriteHTML writes one HTML page that shows snap with no server and no
// network: the UI's script and style inline, and each view precomputed at
// a fixed resolution.
func WriteHTML(w io.Writer, name string, snap *snapshot.Snapshot, opt HTMLOptions) error {
	if opt.Detail <= 0 {
		opt.Detail = DefaultDetail
	}
	if opt.Width <= 0 {
		opt.Width = 4000
	}
	device := opt.Device
	if device < 0 {
		device = snap.DefaultDevice()
	}
	switch opt.View {
	case "", ViewActive, ViewPrivate, ViewSegments, ViewState, ViewSettings:
	case "timeline":
		opt.View = ViewActive
	default:
		return fmt.Errorf("unknown view %q (want active, private, segments, state or settings)", opt.View)
	}
	st := NewStore()
	f := st.file(st.Add(name, snap))
	fi := fileInfoOf(f)
	found := false
	for _, d := range fi.Devices {
		found = found || d.Device == device
	}
	if !found {
		return fmt.Errorf("device %d is not in this snapshot (devices: %v)", device, snap.Devices())
	}

	type viewData struct {
		Meta *metaJSON `json:"meta"`
		// Window is the index in Windows of the full-range window (the
		// views without private pools have the same as the active one).
		Window int            `json:"window"`
		Curves map[string]any `json:"curves"`
		// Elems maps an element id to its size and its text: the indexes
		// in Stacks of its first line (address, sizes, time) and of the
		// rest (the stack, shared by many).
		Elems   map[int][3]any `json:"elems"`
		Markers []marker       `json:"markers"`
	}
	data := struct {
		Files    map[string]any       `json:"files"`
		Initial  map[string]any       `json:"initial"`
		Views    map[string]*viewData `json:"views"`
		Windows  []string             `json:"windows"` // base64 of /api/window answers
		Stacks   []string             `json:"stacks"`
		Events   map[string]any       `json:"events"`
		States   map[string]any       `json:"states"`
		Settings json.RawMessage      `json:"settings"`
	}{
		Files:   map[string]any{"files": []fileInfo{fi}, "upload": false},
		Views:   map[string]*viewData{},
		Stacks:  []string{},
		Events:  map[string]any{},
		States:  map[string]any{},
		Initial: map[string]any{"view": opt.View, "device": device, "detail": opt.Detail},
	}
	if opt.View == "" {
		data.Initial["view"] = ViewActive
	}
	data.Settings = settingsJSON(snap)
	textIdx, winIdx := map[string]int{}, map[string]int{}
	intern := func(text string) int {
		i, ok := textIdx[text]
		if !ok {
			i = len(data.Stacks)
			textIdx[text] = i
			data.Stacks = append(data.Stacks, text)
		}
		return i
	}
	want := func(v string) bool { return opt.View == "" || opt.View == v }

	for _, view := range []string{ViewActive, ViewPrivate, ViewSegments} {
		if !want(view) {
			continue
		}
		tl, err := f.timeline(device, view)
		if err != nil {
			return err
		}
		modes := []string{"event"}
		if tl.hasTime() {
			modes = append(modes, "time")
		}
		for _, mode := range modes {
			lo, hi := tl.xRange(mode)
			win := tl.window(windowQuery{X0: lo, X1: hi, W: opt.Width, H: 1000, Mode: mode, Detail: opt.Detail})
			dd := f.device(device)
			m, err := f.meta(device, view, opt.Detail, mode)
			if err != nil {
				return err
			}
			curves, err := dd.curvesWindow(tl, lo, hi, opt.Width, mode)
			if err != nil {
				return err
			}
			b64 := base64.StdEncoding.EncodeToString(win)
			wi, ok := winIdx[b64]
			if !ok {
				wi = len(data.Windows)
				winIdx[b64] = wi
				data.Windows = append(data.Windows, b64)
			}
			vd := &viewData{Meta: m, Window: wi, Elems: map[int][3]any{},
				Markers: dd.markers(tl),
				Curves:  map[string]any{"x0": lo, "x1": hi, "data": base64.StdEncoding.EncodeToString(curves)}}
			// Details for every polygon the page can show; identical first
			// lines and stacks are stored once.
			nS := windowPolygons(win)
			for i := 0; i < nS; i++ {
				id := int(int32(binary.LittleEndian.Uint32(win[windowHeader+4*i:])))
				if _, ok := vd.Elems[id]; ok {
					continue
				}
				text := tl.tl.Context(id)
				head, rest := text, ""
				if nl := strings.IndexByte(text, '\n'); nl >= 0 {
					head, rest = text[:nl], text[nl:]
				}
				vd.Elems[id] = [3]any{float64(tl.tl.Element(id).Size), intern(head), intern(rest)}
			}
			data.Views[fmt.Sprintf("%s|%d|%s", view, device, mode)] = vd
		}
	}
	if dd := f.device(device); want(ViewState) && len(dd.viz) > MaxHTMLStateEvents {
		if opt.View == ViewState {
			return fmt.Errorf("device %d has %d trace events; an HTML page embeds the state history only up to %d (use gpumem serve)",
				device, len(dd.viz), MaxHTMLStateEvents)
		}
		// Every view was asked for: leave the state history out; the page
		// says so when it is opened.
	} else if want(ViewState) {
		hist, err := dd.stateHist()
		if err != nil {
			return err
		}
		h := hist.h
		lines := make([]string, h.Len())
		for i := range lines {
			lines[i] = eventLine(h.Event(i))
		}
		data.Events[fmt.Sprint(device)] = map[string]any{"lines": lines}
		data.States[fmt.Sprint(device)] = buildOfflineStates(h)
	}

	blob, err := json.Marshal(data) // escapes <, > and & so it cannot end the script
	if err != nil {
		return err
	}
	out, err := page(name, blob)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, out)
	return err
}

// page returns index.html with style.css and the viewer's modules (app.js
// and its imports, bundled: bundle.go) inlined, so that it loads in one
// request (or from file://); with data (a JSON bundle) it is the
// self-contained export, titled after name.
func page(name string, data []byte) (string, error) {
	js, err := appScript()
	if err != nil {
		return "", err
	}
	css, err := staticFS.ReadFile("static/style.css")
	if err != nil {
		return "", err
	}
	html, err := staticFS.ReadFile("static/index.html")
	if err != nil {
		return "", err
	}
	if strings.Contains(js, "</script") || bytes.Contains(css, []byte("</style")) {
		return "", fmt.Errorf("internal error: the viewer's script or style.css would end its inline element")
	}
	out := string(html)
	if name != "" {
		out = strings.Replace(out, `<title>gpumem</title>`, `<title>gpumem: `+htmlEscape(name)+`</title>`, 1)
	}
	out = strings.Replace(out, `<link rel="stylesheet" href="style.css">`, "<style>\n"+string(css)+"</style>", 1)
	// The size formats (internal/units' sizes.js) first, as a classic
	// script: the modules' imports from sizes.js are its globals, and an
	// offline page can import nothing.
	// The served page's module holds its first frame (blocking=render):
	// a module script runs after the parse, and Chromium drew a frame of
	// the bare page (layout, paint, commit: 10-15 ms of its CPU beside the
	// decode) before it, then another with the plot's placeholder that
	// the module draws. An exported page's module first inflates its
	// data, so it keeps the bare page's frame meanwhile.
	blocking := ` blocking="render"`
	if data != nil {
		blocking = ""
	}
	script := "<script>\n" + units.ScriptJS() + "</script>\n<script type=\"module\"" + blocking + ">\n" + js + "</script>"
	if data != nil {
		// The bundle travels gzipped in base64 (the page inflates it with
		// the browser's DecompressionStream): its JSON numbers, texts and
		// base64 arrays shrink several times. Base64 cannot end the script.
		var z bytes.Buffer
		zw, err := gzip.NewWriterLevel(&z, gzipLevel)
		if err != nil {
			return "", err
		}
		if _, err := zw.Write(data); err != nil {
			return "", err
		}
		if err := zw.Close(); err != nil {
			return "", err
		}
		script = `<script id="gpumem-data" type="application/octet-stream" data-encoding="gzip+base64">` +
			base64.StdEncoding.EncodeToString(z.Bytes()) + "</script>\n" + script
	}
	out = strings.Replace(out, `<script type="module" src="app.js"></script>`, script, 1)
	return out, nil
}

// gzipLevel trades the page's size for the export's time.
var gzipLevel = gzip.DefaultCompression

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
