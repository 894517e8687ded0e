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
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/gpumem/gpumem/internal/pickle"
)

// Options tunes decoding. A nil *Options means defaults.
type Options struct {
	// Progress, when set, is called now and then with the bytes of the
	// (possibly compressed) input consumed so far and the total (-1 when
	// unknown, e.g. stdin).
	Progress func(done, total int64)
	// MaxBytes caps the decompressed input size (0 = no cap).
	MaxBytes int64
	// Early, when set, is called once the snapshot is decoded but for the
	// Version fields of its events, blocks and segments, which the decoder
	// fills in after Early returns (the last tenth or so of decoding). It
	// may hand the snapshot to other goroutines that neither read those
	// fields nor change it: a viewer shows a timeline sooner that way.
	Early func(*Snapshot)
	// Feed, when set, is handed an EventFeed as a pickle decode starts
	// (JSON input has none), in which the trace entries appear as they
	// are decoded. It must return at once: a reader runs on its own
	// goroutine.
	Feed func(*EventFeed)
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
	if opt == nil || opt.Early == nil {
		defer eagerGC(s.Source.Size)()
		annotate(s, true, true)
		return s, nil
	}
	annotate(s, true, false)
	opt.Early(s)
	defer eagerGC(s.Source.Size)()
	annotate(s, false, true)
	return s, nil
}

// eagerGCMin is the input size from which a decode collects eagerly.
var eagerGCMin int64 = 64 << 20

// eagerGC makes the collector run more often (eagerGCPercent) while a big input
// (over 64 MB) is decoded, so that peak memory stays near the size of the
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
	if st.Mode().IsRegular() {
		if s, ok, err := decodeMapped(f, path, st.Size(), opt); ok {
			return versioned(s, err, opt)
		}
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
		s, err := decodePickleBytes(b, name, nil, opt)
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
func decodePickleBytes(b []byte, name string, progress func(off int64), opt *Options) (*Snapshot, error) {
	defer eagerGC(int64(len(b)))()
	s := &Snapshot{Source: Source{Name: name, Size: int64(len(b)), FileSize: int64(len(b)), Encoding: "pickle"}}
	b2 := newBuilder(s, int64(len(b)))
	b2.startFeed(opt)
	d := pickle.NewBytesDecoder(b, b2)
	if progress != nil {
		d.SetProgress(mapWindow, progress)
	}
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

// limitReader fails once more than max bytes were read; err keeps the
// first error of the reader it reads (a decompressor's "unexpected EOF").
type limitReader struct {
	r   io.Reader
	n   int64
	max int64
	err error
}

func (l *limitReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if err != nil && err != io.EOF && l.err == nil {
		l.err = err
	}
	if l.max > 0 && l.n > l.max {
		return n, fmt.Errorf("decompressed input exceeds the %d-byte limit", l.max)
	}
	return n, err
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
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		src, compression, innerSize = zr, "gzip", -1
	case "zstd":
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		src, compression, innerSize = zr, "zstd", -1
	}
	lr := &limitReader{r: src, max: opt.MaxBytes}
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
		defer eagerGC(innerSize)()
		s = &Snapshot{Source: Source{Encoding: "pickle"}}
		b := newBuilder(s, innerSize)
		b.startFeed(opt)
		d := pickle.NewDecoder(ibr, b)
		d.SetSizeHint(innerSize)
		err = decodePickle(d, b)
		s.Source.Size = d.Offset() + 1
	case "json":
		s, err = decodeJSON(ibr, innerSize)
	case "gzip", "zstd":
		return nil, errors.New("nested compression is not supported")
	case "empty":
		return nil, errors.New("empty input")
	default:
		return nil, notSnapshot("unrecognized format (starts with % x)", head[:min(len(head), 8)])
	}
	if err != nil {
		return nil, err
	}
	s.Source.Compression = compression
	return s, nil
}

// decodePickle runs the VM and assembles the snapshot.
func decodePickle(d *pickle.Decoder, b *builder) error {
	b.attach(d)
	// However the decode ends, the feed's reader and the versioner are
	// let go; a failed one feeds nothing whole.
	defer b.feed.publish(nil, true)
	defer b.ver.finish(nil)
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
