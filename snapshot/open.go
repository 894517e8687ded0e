package snapshot

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/gpumem/gpumem/internal/pickle"
	"github.com/gpumem/gpumem/internal/units"
)

// Options tunes decoding. A nil *Options means defaults.
type Options struct {
	// Progress, when set, is called now and then with the bytes of the
	// (possibly compressed) input consumed so far and the total (-1 when
	// unknown, e.g. stdin).
	Progress func(done, total int64)
	// MaxBytes caps the decompressed input size. 0 is the default: no cap
	// for an uncompressed input (its own size bounds it), and for a gzip or
	// zstd one ExpansionFloor plus ExpansionRatio times its compressed
	// size, counted as it is read (a snapshot compresses 15-80 times; a
	// decompression bomb, thousands). Negative: no cap.
	MaxBytes int64
	// LimitFlag, when set, names the option that raises MaxBytes
	// ("--max-decompressed SIZE"); the error refusing an input over the
	// limit mentions it.
	LimitFlag string
	// Early, when set, is called once the snapshot is decoded but for the
	// address versions (Trace.Version, the Version fields of its blocks
	// and segments), which the decoder fills in after Early returns
	// (the last tenth or so of decoding). It may hand the snapshot to
	// other goroutines that neither read those nor change it: a viewer
	// shows a timeline sooner that way.
	Early func(*Snapshot)
	// Pause, when set with Early, is called every 65,536 trace entries of
	// the address versions' pass that follows Early, and may block. The
	// pass runs while the viewer answers its first zooms: a server pauses
	// it while it answers a request the user waits on (on two cores it
	// took a core from the first zooms of a 1 GB snapshot).
	Pause func()
	// Feed, when set, is handed an EventFeed as a pickle decode starts
	// (JSON input has none), in which the trace entries appear as they
	// are decoded. It must return at once: a reader runs on its own
	// goroutine.
	Feed func(*EventFeed)
	// NoVersions leaves out memory_viz's address versions: the traces
	// have none (Trace.HasVersions), the Version fields of blocks and
	// segments stay 0. A caller that never reads them (gpumem stats, info, peak and oom, whose answers do not
	// depend on them) saves their pass, a hash-table lookup per trace
	// entry: 0.3 s of CPU on a 1 GB snapshot, taken from the second core
	// the decode splits onto. Snapshot.Annotate adds them later.
	NoVersions bool
	// EagerGC makes the collector run more often (GOGC eagerGCPercent) while an
	// input over 64 MB decodes, so that peak memory stays near the size
	// of the typed model. The GC setting is the process's, so this is the
	// caller's choice (gpumem's commands and viewer make it); off, the
	// default, a decode leaves the setting alone.
	EagerGC bool
}

// eagerGC is eagerGC(size) when the caller chose it (o.EagerGC).
func (o *Options) eagerGC(size int64) (restore func()) {
	if o == nil || !o.EagerGC {
		return func() {}
	}
	return eagerGC(size)
}

// versioned finishes a decode with memory_viz's annotation: one pass,
// or, when opt.Early is set, all but the address versions, then Early,
// then the versions.
func versioned(s *Snapshot, err error, opt *Options) (*Snapshot, error) {
	if err != nil {
		return nil, err
	}
	// Annotation is the decode's last garbage: collected as eagerly, but
	// for what comes before Early (a collection started there would slow
	// Early down).
	withVersions := opt == nil || !opt.NoVersions
	if opt == nil || opt.Early == nil {
		defer opt.eagerGC(s.Source.Size)()
		annotate(s, true, withVersions, nil)
		return s, nil
	}
	annotate(s, true, false, nil)
	opt.Early(s)
	if withVersions {
		defer opt.eagerGC(s.Source.Size)()
		annotate(s, false, true, opt.Pause)
	}
	return s, nil
}

// eagerGCMin is the input size from which a decode collects eagerly.
var eagerGCMin int64 = 64 << 20

// eagerGC makes the collector run more often (eagerGCPercent) while a big
// input (over 64 MB) is decoded (when Options.EagerGC asks), so that peak memory stays near the size of the
// typed model; it returns what restores the setting. The setting is the
// process's: concurrent decodes (a server loading one file while another
// is uploaded) share it, and the last one to finish restores the value the
// first one found.
func eagerGC(size int64) (restore func()) {
	if size <= eagerGCMin {
		return func() {}
	}
	gcState.Lock()
	if gcState.users == 0 {
		gcState.saved = debug.SetGCPercent(eagerGCPercent)
	}
	gcState.users++
	gcState.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			gcState.Lock()
			defer gcState.Unlock()
			if gcState.users--; gcState.users == 0 {
				debug.SetGCPercent(gcState.saved)
			}
		})
	}
}

// gcState counts the decodes running under eagerGC and keeps the GC
// percentage they replaced.
var gcState struct {
	sync.Mutex
	users int
	saved int
}

// Open reads and decodes the snapshot at path ("-" = standard input).
func Open(path string, opt *Options) (*Snapshot, error) {
	if path == "-" {
		return Decode(os.Stdin, "-", opt)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if opt == nil {
		opt = &Options{}
	}
	if !st.Mode().IsRegular() {
		// A pipe, FIFO or device (<(cat x), /dev/stdin) has no size: Stat's
		// 0 is not its length. It is read as a stream, as "-" is.
		s, err := decode(f, path, -1, opt)
		return versioned(s, err, opt)
	}
	if s, ok, err := decodeMapped(f, path, st.Size(), opt); ok {
		return versioned(s, err, opt)
	}
	s, err := decode(f, path, st.Size(), opt)
	return versioned(s, err, opt)
}

// Decode decodes a snapshot from r; name is used in errors and Source.Name.
func Decode(r io.Reader, name string, opt *Options) (*Snapshot, error) {
	s, err := decode(r, name, -1, opt)
	return versioned(s, err, opt)
}

// DecodeBytes decodes an in-memory snapshot.
func DecodeBytes(b []byte, name string, opt *Options) (*Snapshot, error) {
	if opt == nil {
		opt = &Options{}
	}
	kind := sniff(b)
	switch kind {
	case "pickle":
		if opt.MaxBytes > 0 && int64(len(b)) > opt.MaxBytes {
			return nil, decodeError(name, fmt.Errorf("input is %d bytes, more than the %d-byte limit", len(b), opt.MaxBytes))
		}
		s, err := decodePickleBytes(b, name, nil, nil, opt)
		if err != nil {
			return nil, err
		}
		if opt.Progress != nil {
			opt.Progress(int64(len(b)), int64(len(b)))
		}
		return versioned(s, nil, opt)
	}
	s, err := decode(bytes.NewReader(b), name, int64(len(b)), opt)
	return versioned(s, err, opt)
}

// mapWindow is how much of an in-memory pickle the decoder is handed at a
// time when it reports progress; for a mapped file, pages more than one
// window behind it are given back.
const mapWindow = 4 << 20

// decodePickleBytes decodes an in-memory pickle, calling progress (when
// set) with the offset reached every few MB.
// release, when set, gives back the mapped pages of b[lo:hi].
func decodePickleBytes(b []byte, name string, progress func(off int64), release func(lo, hi int), opt *Options) (*Snapshot, error) {
	defer opt.eagerGC(int64(len(b)))()
	s := &Snapshot{Source: Source{Name: name, Size: int64(len(b)), FileSize: int64(len(b)), Encoding: "pickle"}}
	b2 := newBuilder(s, int64(len(b)))
	b2.startFeed(opt)
	d := pickle.NewBytesDecoder(b, b2)
	if progress != nil {
		d.SetProgress(mapWindow, progress)
	}
	startSplit(b2, d, b, release)
	if err := decodePickle(d, b2); err != nil {
		return nil, decodeError(name, err)
	}
	return s, nil
}

// countingReader reports progress on the raw input.
type countingReader struct {
	r        io.Reader
	n, total int64
	next     int64
	progress func(done, total int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.progress != nil && (c.n >= c.next || err != nil) {
		c.progress(c.n, c.total)
		c.next = c.n + 4<<20
	}
	return n, err
}

// The default bound on a compressed input's decompressed size (see
// Options.MaxBytes): real snapshots compress 15-80 times with gzip -9 or
// zstd -19; a gzip of one repeated byte, about a thousand times.
const (
	ExpansionRatio = 200
	ExpansionFloor = 64 << 20
)

// expansionLimit is the default decompressed bound for compressed bytes.
func expansionLimit(compressed int64) int64 {
	return ExpansionFloor + ExpansionRatio*max(compressed, 0)
}

// limitReader fails once more than max bytes were read (with the default
// rule, more than expansionLimit of the compressed bytes read so far); err
// keeps the first error of the reader it reads (a decompressor's
// "unexpected EOF").
type limitReader struct {
	r   io.Reader
	n   int64
	max int64
	err error
	// compressed, for the default rule on a stream of unknown size, counts
	// the compressed bytes read.
	compressed func() int64
	deflt      bool // max is the default rule's
	kind, flag string
}

func (l *limitReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if err != nil && err != io.EOF && l.err == nil {
		l.err = err
	}
	limit := l.max
	if l.compressed != nil {
		limit = expansionLimit(l.compressed())
	}
	if limit > 0 && l.n > limit {
		return n, &LimitError{Kind: l.kind, Limit: limit, Default: l.deflt, Offset: -1, Flag: l.flag}
	}
	return n, err
}

// LimitError refuses an input that decompresses to more than the limit
// (Options.MaxBytes), or a string or bytes value longer than what the
// limit leaves.
type LimitError struct {
	Kind    string // "gzip", "zstd" or "" (uncompressed)
	Limit   int64  // the bound on the decompressed size
	Default bool   // the limit is the default rule's, not MaxBytes
	// Offset is that of a value claiming Need bytes (-1 when the stream
	// itself went past the limit).
	Offset, Need int64
	Flag         string // the option that raises the limit, when known
}

func (e *LimitError) Error() string {
	what := "decompressed input"
	if e.Kind != "" {
		what = e.Kind + " input"
	}
	rule := ""
	if e.Default {
		rule = fmt.Sprintf(" (%s plus %d times the compressed size)", units.Human(ExpansionFloor), ExpansionRatio)
	}
	msg := fmt.Sprintf("%s expands past the %s limit%s", what, units.Human(uint64(e.Limit)), rule)
	if e.Offset >= 0 {
		msg = fmt.Sprintf("value at byte %d claims %s, more than the %s limit on what the %s may expand to%s",
			e.Offset, units.Human(uint64(e.Need)), units.Human(uint64(e.Limit)), what, rule)
	}
	if e.Flag != "" {
		msg += "; " + e.Flag + " raises it"
	}
	return msg
}

func decode(r io.Reader, name string, size int64, opt *Options) (*Snapshot, error) {
	if opt == nil {
		opt = &Options{}
	}
	cr := &countingReader{r: r, total: size, progress: opt.Progress}
	s, err := decodeStream(cr, name, size, opt)
	if err != nil {
		return nil, decodeError(name, err)
	}
	s.Source.Name = name
	if size >= 0 {
		s.Source.FileSize = size
	} else {
		s.Source.FileSize = cr.n
	}
	if opt.Progress != nil {
		opt.Progress(cr.n, size)
	}
	return s, nil
}

func decodeStream(r io.Reader, name string, size int64, opt *Options) (s *Snapshot, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(512)
	compression := ""
	var src io.Reader = br
	innerSize := size
	switch sniff(head) {
	case "gzip":
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, prefixed("gzip", err)
		}
		defer zr.Close()
		src, compression, innerSize = zr, "gzip", -1
	case "zstd":
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, prefixed("zstd", err)
		}
		defer zr.Close()
		src, compression, innerSize = zr, "zstd", -1
	}
	lr := &limitReader{r: src, max: opt.MaxBytes, kind: compression, flag: opt.LimitFlag}
	limit := opt.MaxBytes // the decompressed bound, known before reading (-1: none)
	if compression != "" && opt.MaxBytes == 0 {
		lr.deflt = true
		if limit = -1; size >= 0 {
			limit = expansionLimit(size)
			lr.max = limit
		} else if cr, ok := r.(*countingReader); ok {
			// A stream of unknown size: bounded by what was read so far.
			lr.compressed = func() int64 { return cr.n }
		}
	}
	// Whatever the decoder makes of a compressed stream that ends early, the
	// cause is the truncation.
	defer func() {
		if err != nil && compression != "" && errors.Is(lr.err, io.ErrUnexpectedEOF) {
			te := &truncatedError{kind: compression, out: lr.n, err: err}
			if cr, ok := r.(*countingReader); ok {
				te.at = cr.n
			}
			s, err = nil, te
		}
	}()
	ibr := br
	if compression != "" {
		ibr = bufio.NewReaderSize(lr, 64<<10)
	} else if opt.MaxBytes > 0 {
		if size > opt.MaxBytes {
			return nil, fmt.Errorf("input is %d bytes, more than the %d-byte limit", size, opt.MaxBytes)
		}
		ibr = bufio.NewReaderSize(lr, 64<<10)
	}
	head, _ = ibr.Peek(512)
	kind := sniff(head)
	switch kind {
	case "pickle":
		defer opt.eagerGC(innerSize)()
		s = &Snapshot{Source: Source{Encoding: "pickle"}}
		b := newBuilder(s, innerSize)
		b.startFeed(opt)
		d := pickle.NewDecoder(ibr, b)
		d.SetSizeHint(innerSize)
		if compression != "" && limit > 0 {
			// A string longer than the input may expand to is refused
			// before its buffer is grown towards it.
			d.SetSizeLimit(limit, func(off, need int64) error {
				return &LimitError{Kind: compression, Limit: limit, Default: opt.MaxBytes == 0, Offset: off, Need: need, Flag: opt.LimitFlag}
			})
		}
		err = decodePickle(d, b)
		s.Source.Size = d.Offset() + 1
	case "json":
		if profiler := profilerDecoder(ibr); profiler != nil {
			s, err = profiler(ibr)
		} else {
			s, err = decodeJSON(ibr, innerSize)
		}
	case "gzip", "zstd":
		return nil, errors.New("nested compression is not supported")
	case "empty":
		return nil, errors.New("empty input")
	default:
		if msg := htmlExport(head); msg != "" {
			return nil, notSnapshot("%s", msg)
		}
		return nil, notSnapshot("unrecognized format (starts with % x)", head[:min(len(head), 8)])
	}
	if err != nil {
		return nil, err
	}
	s.Source.Compression = compression
	return s, nil
}

// prefixed is err with "kind: " in front unless its text starts so
// already (compress/gzip's "gzip: invalid header").
func prefixed(kind string, err error) error {
	if strings.HasPrefix(err.Error(), kind+": ") {
		return err
	}
	return fmt.Errorf("%s: %w", kind, err)
}

// decodePickle runs the VM and assembles the snapshot.
func decodePickle(d *pickle.Decoder, b *builder) error {
	b.attach(d)
	if debugSplit {
		debugLock()
		defer debugMark("decoder done")
	}
	// However the decode ends, the feed's reader and the versioner are
	// let go; a failed one feeds nothing whole.
	defer b.feed.publish(nil, true)
	defer b.ver.finish(nil)
	defer func() { b.split.finish() }() // nil once its part is taken
	root, err := d.Decode()
	b.pf.stop()
	b.pf = nil
	if err != nil {
		return err
	}
	b.feed.publish(b.events, true)
	b.s.Source.Protocol = d.Protocol()
	b.s.Source.Size = d.Offset() + 1
	return b.assemble(root)
}

// sniff names the input format from its first bytes.
func sniff(b []byte) string {
	if len(b) == 0 {
		return "empty"
	}
	if len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b {
		return "gzip"
	}
	if len(b) >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd {
		return "zstd"
	}
	switch b[0] {
	case 0x80, '(', ']', '}', 'l', 'd', ')', 'N', 'I', 'L', 'F', 'S', 'V', 'c', 'K', 'J', 'M', 'X':
		// 0x80 is PROTO (protocol 2+); the rest start protocol 0/1 pickles.
		// A JSON '{' or '[' is distinct from pickle's '}' and ']'.
		return "pickle"
	}
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[':
			return "json"
		}
		break
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "empty"
	}
	return "unknown"
}
