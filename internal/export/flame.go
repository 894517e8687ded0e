package export

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/pickle"
	"github.com/gpumem/gpumem/internal/units"
)

// Flame is a tree of stack frames weighted by bytes, the input of the
// flamegraph SVG and of folded-stack output. Paths are added root first
// (outermost frame first). For a differential flamegraph each path has
// two weights: A (before) and B (after); widths are B's and colours the
// change, as flamegraph.pl's difffolded.pl.
type Flame struct {
	Root FlameNode
	Diff bool // paths carry A and B weights
}

// FlameNode is one frame: its name, the bytes of every path through it
// (B for a diff) and, for a diff, the bytes of A.
type FlameNode struct {
	Name     string
	Value    int64 // B for a diff
	ValueA   int64 // diff only
	children map[string]*FlameNode
	order    []*FlameNode // sorted by name when the tree is rendered
	self     int64        // bytes ending here (B)
	selfA    int64
}

// NewFlame makes an empty flamegraph whose root frame is called root.
func NewFlame(root string) *Flame { return &Flame{Root: FlameNode{Name: root}} }

// Add adds bytes to the path (outermost frame first). Zero-byte paths are
// ignored.
func (f *Flame) Add(path []string, bytes int64) { f.AddDiff(path, 0, bytes) }

// AddDiff adds a path with its bytes before (a) and after (b); it makes
// the flamegraph a diff.
func (f *Flame) AddDiff(path []string, a, b int64) {
	if a == 0 && b == 0 {
		return
	}
	if a != 0 {
		f.Diff = true
	}
	n := &f.Root
	n.Value += b
	n.ValueA += a
	for _, name := range path {
		c := n.children[name]
		if c == nil {
			if n.children == nil {
				n.children = map[string]*FlameNode{}
			}
			c = &FlameNode{Name: name}
			n.children[name] = c
			n.order = append(n.order, c)
		}
		c.Value += b
		c.ValueA += a
		n = c
	}
	n.self += b
	n.selfA += a
}

// Children returns n's children sorted by name (flamegraph.pl's order).
func (n *FlameNode) Children() []*FlameNode {
	if len(n.order) > 1 && !sort.SliceIsSorted(n.order, func(i, j int) bool { return n.order[i].Name < n.order[j].Name }) {
		sort.Slice(n.order, func(i, j int) bool { return n.order[i].Name < n.order[j].Name })
	}
	return n.order
}

// WriteFolded writes the tree as folded stacks, one line per path with
// bytes ending there: "frame;frame;frame BYTES" (flamegraph.pl, speedscope
// and inferno read it), or "frame;frame A B" for a diff (difffolded.pl's
// output). The root frame is not written. The lines' bytes sum to the
// root's.
func WriteFolded(w io.Writer, f *Flame) error {
	bw := bufio.NewWriter(w)
	var path []string
	var walk func(n *FlameNode)
	walk = func(n *FlameNode) {
		if len(path) > 0 && (n.self != 0 || n.selfA != 0) {
			bw.WriteString(strings.Join(path, ";"))
			if f.Diff {
				bw.WriteString(" " + strconv.FormatInt(n.selfA, 10))
			}
			bw.WriteString(" " + strconv.FormatInt(n.self, 10) + "\n")
		}
		for _, c := range n.Children() {
			path = append(path, foldedName(c.Name))
			walk(c)
			path = path[:len(path)-1]
		}
	}
	walk(&f.Root)
	return bw.Flush()
}

// WriteFlameJSON writes the tree as nested JSON objects {"name",
// "value", "children"} (d3-flame-graph's format), with "before" for a
// diff's A bytes. Children are sorted by name.
func WriteFlameJSON(w io.Writer, f *Flame) error {
	bw := bufio.NewWriter(w)
	var buf []byte
	var walk func(n *FlameNode)
	walk = func(n *FlameNode) {
		buf = pickle.AppendJSONString(buf[:0], n.Name)
		bw.WriteString(`{"name":`)
		bw.Write(buf)
		bw.WriteString(`,"value":` + strconv.FormatInt(n.Value, 10))
		if f.Diff {
			bw.WriteString(`,"before":` + strconv.FormatInt(n.ValueA, 10))
		}
		bw.WriteString(`,"children":[`)
		for i, c := range n.Children() {
			if i > 0 {
				bw.WriteByte(',')
			}
			walk(c)
		}
		bw.WriteString("]}")
	}
	walk(&f.Root)
	bw.WriteString("\n")
	return bw.Flush()
}

// foldedName keeps a frame name from breaking the folded format: ';'
// separates frames and the last space starts the count.
func foldedName(s string) string {
	return strings.NewReplacer(";", ":", "\n", " ").Replace(s)
}

// FlameOptions tunes WriteFlameSVG.
type FlameOptions struct {
	Title    string
	Subtitle string
	Width    int // pixels (default 1200)
	// MinWidth is the narrowest frame drawn, in pixels (default 0.1, as
	// flamegraph.pl); narrower frames are left out of the SVG but counted
	// in their parents.
	MinWidth float64
}

const (
	flameFrameH = 16
	flameTop    = 60 // title, subtitle, controls
	flameBottom = 30 // details line
	flamePad    = 10
)

// WriteFlameSVG writes f as a self-contained interactive SVG flamegraph
// (root at the bottom, as flamegraph.pl): hover shows a frame's bytes and
// share in the details line, click zooms to a frame, "Search" (or Ctrl-F)
// highlights frames matching a regular expression and reports their share,
// "Reset Zoom" and Esc go back. Its script is inline; it loads nothing.
func WriteFlameSVG(w io.Writer, f *Flame, o FlameOptions) error {
	if o.Width <= 0 {
		o.Width = 1200
	}
	if o.MinWidth <= 0 {
		o.MinWidth = 0.1
	}
	total := f.Root.Value
	if f.Diff {
		total = max(total, 1)
	}
	plotW := float64(o.Width - 2*flamePad)
	scale := 0.0
	if total > 0 {
		scale = plotW / float64(total)
	}
	depth := f.depth(&f.Root, 0, scale, o.MinWidth)
	height := flameTop + (depth+1)*flameFrameH + flameBottom
	maxDelta := f.maxDelta(&f.Root)

	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg" data-total="%d" data-diff="%t">
<style>
text { font-family: Verdana, sans-serif; font-size: 12px; fill: #000; }
#title { font-size: 17px; text-anchor: middle; }
#subtitle { text-anchor: middle; fill: #555; }
.ctl { cursor: pointer; fill: #225; }
.ctl:hover { text-decoration: underline; }
.f { cursor: pointer; }
.f:hover rect { stroke: #000; stroke-width: 0.5; }
.f text { pointer-events: none; font-size: 11px; }
.hide { display: none; }
.match rect { fill: rgb(230,0,230) !important; }
.parent rect { opacity: 0.5; }
</style>
<rect x="0" y="0" width="100%%" height="100%%" fill="#fdfdf6"/>
`, o.Width, height, o.Width, height, total, f.Diff)
	fmt.Fprintf(bw, `<text id="title" x="%d" y="24">%s</text>
`, o.Width/2, xmlEscape(o.Title))
	if o.Subtitle != "" {
		fmt.Fprintf(bw, `<text id="subtitle" x="%d" y="42">%s</text>
`, o.Width/2, xmlEscape(o.Subtitle))
	}
	fmt.Fprintf(bw, `<text id="reset" class="ctl hide" x="%d" y="24">Reset Zoom</text>
<text id="search" class="ctl" x="%d" y="24" text-anchor="end">Search</text>
<text id="matched" x="%d" y="%d" text-anchor="end"></text>
<text id="details" x="%d" y="%d"> </text>
<g id="frames">
`, flamePad, o.Width-flamePad, o.Width-flamePad, height-10, flamePad, height-10)

	// Frames, depth-first: each <g> carries its byte offset from the left
	// (data-o), bytes (data-v), depth (data-d) and for a diff A's bytes
	// (data-a); the script lays them out again when zooming.
	var walk func(n *FlameNode, off int64, d int)
	walk = func(n *FlameNode, off int64, d int) {
		wpx := float64(n.Value) * scale
		if d > 0 && wpx < o.MinWidth {
			return
		}
		x := flamePad + float64(off)*scale
		y := height - flameBottom - (d+1)*flameFrameH
		fill := flameColor(n, f.Diff, maxDelta)
		fmt.Fprintf(bw, `<g class="f" data-o="%d" data-v="%d" data-d="%d"`, off, n.Value, d)
		if f.Diff {
			fmt.Fprintf(bw, ` data-a="%d"`, n.ValueA)
		}
		fmt.Fprintf(bw, `><title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" rx="2"/><text x="%.2f" y="%d"></text></g>
`, xmlEscape(n.Name), x, y, wpx, flameFrameH-1, fill, x+3, y+flameFrameH-4)
		for _, c := range n.Children() {
			walk(c, off, d+1)
			off += c.Value
		}
	}
	walk(&f.Root, 0, 0)
	bw.WriteString("</g>\n<script><![CDATA[\n")
	fmt.Fprintf(bw, "var W = %d, PAD = %d;\n", o.Width, flamePad)
	bw.WriteString(units.ScriptJS())
	bw.WriteString(flameScript)
	bw.WriteString("]]></script>\n</svg>\n")
	return bw.Flush()
}

// depth returns the deepest level drawn.
func (f *Flame) depth(n *FlameNode, d int, scale, minW float64) int {
	best := d
	for _, c := range n.order {
		if float64(c.Value)*scale >= minW {
			best = max(best, f.depth(c, d+1, scale, minW))
		}
	}
	return best
}

func (f *Flame) maxDelta(n *FlameNode) int64 {
	m := abs64(n.Value - n.ValueA)
	for _, c := range n.order {
		m = max(m, f.maxDelta(c))
	}
	return m
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// flameColor is flamegraph.pl's palette: warm colours varied by a hash of
// the name (Python frames warm, C++ and PyTorch internals yellow-green,
// bookkeeping frames grey); for a diff, red for growth and blue for
// shrinkage, deeper with the change.
func flameColor(n *FlameNode, diff bool, maxDelta int64) string {
	if diff {
		d := n.Value - n.ValueA
		if d == 0 || maxDelta == 0 {
			return "rgb(250,250,250)"
		}
		k := int(200 * math.Sqrt(float64(abs64(d))/float64(maxDelta)))
		if d > 0 {
			return fmt.Sprintf("rgb(255,%d,%d)", 220-k, 220-k)
		}
		return fmt.Sprintf("rgb(%d,%d,255)", 220-k, 220-k)
	}
	h := fnv.New32a()
	h.Write([]byte(n.Name))
	v := h.Sum32()
	r1, r2 := float64(v&0xff)/255, float64(v>>8&0xff)/255
	switch {
	case strings.HasPrefix(n.Name, "<") || strings.HasPrefix(n.Name, "stream_") || strings.HasPrefix(n.Name, "seg_") ||
		strings.HasPrefix(n.Name, "active_") || n.Name == "inactive" || strings.HasPrefix(n.Name, "only_"):
		g := 190 + int(40*r1)
		return fmt.Sprintf("rgb(%d,%d,%d)", g, g, g+10)
	case strings.Contains(n.Name, ".py:"):
		return fmt.Sprintf("rgb(%d,%d,%d)", 205+int(50*r1), 80+int(120*r2), 40+int(40*r1))
	default:
		return fmt.Sprintf("rgb(%d,%d,%d)", 180+int(55*r1), 180+int(55*r2), 50+int(30*r1))
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '&':
			b.WriteString("&amp;")
		case r == '"':
			b.WriteString("&quot;")
		case r < 0x20 && r != '\t' && r != '\n' && r != '\r', r == 0xFFFE, r == 0xFFFF:
			b.WriteRune('\uFFFD') // not allowed in XML 1.0
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// flameScript lays frames out for the current zoom and handles hover,
// click-to-zoom, search and reset. Frames are <g class="f"> in depth-first
// order with data-o (byte offset), data-v (bytes) and data-d (depth).
const flameScript = `
var svg = document.documentElement, TOTAL = +svg.getAttribute('data-total'), DIFF = svg.getAttribute('data-diff') === 'true';
var frames = Array.prototype.slice.call(document.querySelectorAll('g.f'));
var details = document.getElementById('details'), resetBtn = document.getElementById('reset');
var searchBtn = document.getElementById('search'), matched = document.getElementById('matched');
var zoomed = null, query = null;
function info(g) {
  var v = +g.getAttribute('data-v'), name = g.querySelector('title').textContent;
  var s = name + ' (' + human(v) + ', ' + v + ' bytes, ' + (TOTAL ? (100 * v / TOTAL).toFixed(2) : '0') + '%';
  if (DIFF) { var a = +g.getAttribute('data-a'); s += '; before ' + human(a) + ', change ' + humanSigned(v - a); }
  return s + ')';
}
function layout() {
  var o0 = 0, v0 = TOTAL, d0 = 0;
  if (zoomed) { o0 = +zoomed.getAttribute('data-o'); v0 = +zoomed.getAttribute('data-v'); d0 = +zoomed.getAttribute('data-d'); }
  var sc = v0 > 0 ? (W - 2 * PAD) / v0 : 0;
  frames.forEach(function (g) {
    var o = +g.getAttribute('data-o'), v = +g.getAttribute('data-v'), d = +g.getAttribute('data-d');
    var r = g.querySelector('rect'), t = g.querySelector('text');
    var inside = o >= o0 && o + v <= o0 + v0 && d >= d0, parent = d < d0 && o <= o0 && o + v >= o0 + v0;
    g.classList.toggle('parent', parent && zoomed !== null);
    var x, w;
    if (parent) { x = PAD; w = W - 2 * PAD; }
    else if (inside) { x = PAD + (o - o0) * sc; w = v * sc; }
    else { g.classList.add('hide'); return; }
    g.classList.toggle('hide', w < 0.1);
    r.setAttribute('x', x.toFixed(2)); r.setAttribute('width', w.toFixed(2));
    t.setAttribute('x', (x + 3).toFixed(2));
    var name = g.querySelector('title').textContent, fit = Math.floor((w - 6) / 7);
    t.textContent = fit < 3 ? '' : (name.length <= fit ? name : name.slice(0, fit - 2) + '..');
  });
  resetBtn.classList.toggle('hide', zoomed === null);
}
function zoom(g) { zoomed = (g && +g.getAttribute('data-d') > 0) ? g : null; layout(); if (query) search(query); }
function search(re) {
  query = re || null; var rx = null, bytes = 0, seen = [];
  if (query) { try { rx = new RegExp(query); } catch (e) { rx = new RegExp(query.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')); } }
  frames.forEach(function (g) {
    var m = rx !== null && rx.test(g.querySelector('title').textContent);
    g.classList.toggle('match', m);
    if (!m) return;
    // Count a matching frame once: not when an ancestor already matched.
    var o = +g.getAttribute('data-o'), v = +g.getAttribute('data-v');
    for (var i = 0; i < seen.length; i++) if (o >= seen[i][0] && o + v <= seen[i][1]) return;
    seen.push([o, o + v]); bytes += v;
  });
  matched.textContent = query ? 'Matched: ' + human(bytes) + ' (' + (TOTAL ? (100 * bytes / TOTAL).toFixed(1) : '0') + '%)' : '';
  searchBtn.textContent = query ? 'Reset Search' : 'Search';
  return bytes;
}
frames.forEach(function (g) {
  g.addEventListener('mouseover', function () { details.textContent = info(g); });
  g.addEventListener('mouseout', function () { details.textContent = ' '; });
  g.addEventListener('click', function (e) { e.stopPropagation(); zoom(g); });
});
resetBtn.addEventListener('click', function () { zoom(null); });
searchBtn.addEventListener('click', function () {
  if (query) { search(null); return; }
  var q = window.prompt('Search frames (regular expression):', '');
  if (q) search(q);
});
window.addEventListener('keydown', function (e) {
  if (e.key === 'Escape') { zoom(null); search(null); }
  if ((e.ctrlKey || e.metaKey) && e.key === 'f') { e.preventDefault(); var q = window.prompt('Search frames (regular expression):', ''); if (q) search(q); }
});
window.flame = { zoom: zoom, search: search, layout: layout };
layout();
`
