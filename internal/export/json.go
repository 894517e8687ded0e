package export

import (
	"bufio"
	"io"
	"strconv"

	"github.com/gpumem/gpumem/internal/pickle"
	"github.com/gpumem/gpumem/snapshot"
)

// JSONSchema names the version of the normalised JSON model written by
// WriteJSON. The layout is documented in docs/export.md ("gpumem export json").
const JSONSchema = "gpumem.snapshot/1"

// WriteJSON writes the normalised model of s (every generation in one
// shape): source, interned frames and stacks, streams, segments with their
// blocks, per-device trace events, allocator settings and annotations.
// device >= 0 keeps only that device's segments, events and annotations.
// Events and blocks are streamed, so memory stays that of the snapshot.
func WriteJSON(w io.Writer, s *snapshot.Snapshot, device int) error {
	j := &jsonWriter{w: bufio.NewWriterSize(w, 1<<16)}
	src := s.Source
	j.raw(`{"schema":"` + JSONSchema + `","source":{"name":`)
	j.str(src.Name)
	j.raw(`,"generation":`)
	j.str(string(src.Generation))
	j.raw(`,"encoding":`)
	j.str(src.Encoding)
	j.raw(`,"compression":`)
	j.str(src.Compression)
	j.raw(`,"pickle_protocol":` + itoa(int64(src.Protocol)) + `,"bytes":` + itoa(src.Size) + "},\n")

	j.raw(`"frames":[`)
	for i, f := range s.Frames {
		j.sep(i)
		j.raw(`{"filename":`)
		j.str(f.Filename)
		j.raw(`,"name":`)
		j.str(f.Name)
		j.raw(`,"line":` + itoa(f.Line) + "}")
	}
	j.raw("],\n" + `"stacks":[`)
	for i := 0; i < s.Stacks.Len(); i++ {
		j.sep(i)
		j.raw("[")
		for k, id := range s.Stacks.Frames(snapshot.StackID(i)) {
			j.sep(k)
			j.raw(itoa(int64(id)))
		}
		j.raw("]")
	}
	j.raw("],\n" + `"streams":[`)
	for i, v := range s.Streams {
		j.sep(i)
		j.raw(itoa(v))
	}
	j.raw("],\n" + `"segments":[`)
	n := 0
	for i := range s.Segments {
		seg := &s.Segments[i]
		if device >= 0 && int(seg.Device) != device {
			continue
		}
		j.sep(n)
		n++
		j.segment(s, i)
	}
	j.raw("],\n" + `"devices":[`)
	n = 0
	for d := range s.Traces {
		if device >= 0 && d != device {
			continue
		}
		j.sep(n)
		n++
		j.raw(`{"device":` + itoa(int64(d)) + `,"events":[`)
		metas := s.Traces[d].Metas()
		for k := range s.Traces[d].Events {
			j.sep(k)
			j.event(s, &s.Traces[d].Events[k], s.Meta(metas.At(k)))
		}
		j.raw("]}")
	}
	j.raw("],\n" + `"allocator_settings":`)
	if as := s.AllocatorSettings; as != nil {
		j.raw("{")
		for i, kv := range as.Raw {
			j.sep(i)
			j.str(kv.Key)
			j.raw(":" + kv.JSON)
		}
		j.raw("}")
	} else {
		j.raw("null")
	}
	j.raw(",\n" + `"annotations":[`)
	n = 0
	for _, a := range s.Annotations {
		if device >= 0 && int(a.Device) != device {
			continue
		}
		j.sep(n)
		n++
		j.raw(`{"device":` + itoa(int64(a.Device)) + `,"time_us":` + itoa(a.TimeUS) + `,"name":`)
		j.str(a.Name)
		j.raw(`,"stage":`)
		j.str(a.Stage)
		j.raw("}")
	}
	j.raw("]}\n")
	return j.w.Flush()
}

type jsonWriter struct {
	w   *bufio.Writer
	buf []byte
}

func (j *jsonWriter) raw(s string) { j.w.WriteString(s) }

func (j *jsonWriter) str(s string) {
	j.buf = pickle.AppendJSONString(j.buf[:0], s)
	j.w.Write(j.buf)
}

// sep writes the comma before every list item but the first.
func (j *jsonWriter) sep(i int) {
	if i > 0 {
		j.w.WriteByte(',')
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func utoa(v uint64) string { return strconv.FormatUint(v, 10) }

func (j *jsonWriter) segment(s *snapshot.Snapshot, i int) {
	seg := &s.Segments[i]
	pool := "small"
	if seg.Large {
		pool = "large"
	}
	j.raw("\n" + `{"device":` + itoa(int64(seg.Device)) + `,"address":` + utoa(seg.Address) +
		`,"total_size":` + utoa(seg.TotalSize) + `,"allocated_size":` + utoa(seg.AllocatedSize) +
		`,"active_size":` + utoa(seg.ActiveSize) + `,"requested_size":` + utoa(seg.RequestedSize) +
		`,"stream":` + itoa(int64(seg.Stream)) + `,"segment_type":"` + pool + `","pool_id":`)
	if seg.HasPoolID {
		j.raw("[" + itoa(seg.PoolID[0]) + "," + itoa(seg.PoolID[1]) + "]")
	} else {
		j.raw("null")
	}
	j.raw(`,"is_expandable":` + strconv.FormatBool(seg.IsExpandable) + `,"stack":` + itoa(int64(seg.Stack)) + `,"blocks":[`)
	for k, b := range s.SegmentBlocks(i) {
		j.sep(k)
		j.raw(`{"address":` + utoa(b.Addr) + `,"size":` + utoa(b.Size) + `,"requested_size":`)
		if b.HasRequestedSize {
			j.raw(utoa(b.RequestedSize))
		} else {
			j.raw("null")
		}
		j.raw(`,"state":"` + b.State.String() + `","stack":` + itoa(int64(b.Stack)))
		if b.NumHistory > 0 {
			j.raw(`,"history":[`)
			for h, it := range s.BlockHistory(&b) {
				j.sep(h)
				j.raw(`{"address":` + utoa(it.Addr) + `,"real_size":` + utoa(it.RealSize) + `,"stack":` + itoa(int64(it.Stack)) + "}")
			}
			j.raw("]")
		}
		j.raw("}")
	}
	j.raw("]}")
}

func (j *jsonWriter) event(s *snapshot.Snapshot, e *snapshot.Event, em snapshot.EventMeta) {
	j.raw("\n" + `{"action":"` + e.Action.String() + `","address":` + utoa(e.Addr) + `,"size":` + utoa(e.Size) +
		`,"stream":` + itoa(int64(e.Stream)) + `,"time_us":`)
	if e.Flags&snapshot.FlagHasTime != 0 {
		j.raw(itoa(e.TimeUS))
	} else {
		j.raw("null")
	}
	j.raw(`,"stack":` + itoa(int64(e.Stack)))
	if cc := s.Text(em.CompileContext); cc != "" {
		j.raw(`,"compile_context":`)
		j.str(cc)
	}
	if um := s.Text(em.UserMetadata); um != "" {
		j.raw(`,"user_metadata":`)
		j.str(um)
	}
	j.raw("}")
}
