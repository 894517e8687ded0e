package web

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"sync"
)

// The state answer is written by hand: a state of the 1 GB tile sends
// 20,000 segments and 27,000 blocks (2.5 MB), and encoding/json took
// 12-16 ms of a 150-200 ms step on it, with five boxed values per block.

// blockJSON is one block of a state answer, sent as the array [offset,
// size, requested, pending, version].
type blockJSON struct {
	Offset, Size, Requested float64
	Pending                 bool
	Version                 int32
}

func (b blockJSON) MarshalJSON() ([]byte, error) { return b.appendJSON(nil), nil }

func (b *blockJSON) UnmarshalJSON(data []byte) error {
	var a [5]json.RawMessage
	if err := json.Unmarshal(data, &a); err != nil {
		return err
	}
	for i, dst := range []any{&b.Offset, &b.Size, &b.Requested, &b.Pending, &b.Version} {
		if err := json.Unmarshal(a[i], dst); err != nil {
			return fmt.Errorf("block field %d: %w", i, err)
		}
	}
	return nil
}

func (b *blockJSON) appendJSON(out []byte) []byte {
	out = append(out, '[')
	out = appendNumber(out, b.Offset)
	out = append(out, ',')
	out = appendNumber(out, b.Size)
	out = append(out, ',')
	out = appendNumber(out, b.Requested)
	out = append(out, ',')
	out = strconv.AppendBool(out, b.Pending)
	out = append(out, ',')
	out = strconv.AppendInt(out, int64(b.Version), 10)
	return append(out, ']')
}

// stateBufs holds the buffers state answers are written into: a step of
// the 1 GB tile writes 2.5 MB, which took 40-46 ms into a fresh buffer
// (its pages faulted in) against 4-15 ms into a reused one.
var stateBufs sync.Pool

// writeTo writes st and a newline to w.
func (st *stateJSON) writeTo(w io.Writer) error {
	buf, _ := stateBufs.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	*buf = append(st.appendJSON((*buf)[:0]), '\n')
	_, err := w.Write(*buf)
	stateBufs.Put(buf)
	return err
}

// appendJSON appends st as encoding/json would write it (the same names,
// values and order), but for the escaping of <, > and &.
func (st *stateJSON) appendJSON(out []byte) []byte {
	out = append(out, `{"index":`...)
	out = strconv.AppendInt(out, int64(st.Index), 10)
	out = appendField(out, "event")
	out = appendString(out, st.Event)
	out = appendField(out, "stack")
	out = appendString(out, st.Stack)
	for _, f := range []struct {
		name string
		v    float64
	}{{"allocated", st.Allocated}, {"reserved", st.Reserved}, {"blockBytes", st.BlockBytes}, {"rounding", st.Rounding},
		{"free", st.FreeBytes}, {"largestFree", st.LargestFree}, {"fragmentation", st.Frag}} {
		out = appendField(out, f.name)
		out = appendNumber(out, f.v)
	}
	out = appendField(out, "segments")
	if st.Segments == nil {
		out = append(out, "null"...)
	} else {
		out = append(out, '[')
		for i := range st.Segments {
			if i > 0 {
				out = append(out, ',')
			}
			out = st.Segments[i].appendJSON(out)
		}
		out = append(out, ']')
	}
	out = appendField(out, "text")
	out = appendString(out, st.Text)
	if st.Omitted != 0 {
		out = appendField(out, "omitted")
		out = strconv.AppendInt(out, int64(st.Omitted), 10)
	}
	return append(out, '}')
}

func (s *segJSON) appendJSON(out []byte) []byte {
	out = append(out, `{"addr":`...)
	out = appendString(out, s.Addr)
	out = appendField(out, "size")
	out = appendNumber(out, s.Size)
	out = appendField(out, "stream")
	out = strconv.AppendInt(out, int64(s.Stream), 10)
	if len(s.Pool) > 0 {
		out = appendField(out, "pool")
		out = append(out, '[')
		for i, v := range s.Pool {
			if i > 0 {
				out = append(out, ',')
			}
			out = strconv.AppendInt(out, v, 10)
		}
		out = append(out, ']')
	}
	out = appendField(out, "version")
	out = strconv.AppendInt(out, int64(s.Version), 10)
	out = appendField(out, "blocks")
	if s.Blocks == nil {
		return append(out, "null}"...)
	}
	out = append(out, '[')
	for i := range s.Blocks {
		if i > 0 {
			out = append(out, ',')
		}
		out = s.Blocks[i].appendJSON(out)
	}
	return append(out, "]}"...)
}

// appendField appends ,"name":.
func appendField(out []byte, name string) []byte {
	out = append(out, ',', '"')
	out = append(out, name...)
	return append(out, '"', ':')
}

// appendNumber formats v as encoding/json does (non-finite values, which
// it refuses, as 0).
func appendNumber(out []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(out, '0')
	}
	if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
		b, _ := json.Marshal(v)
		return append(out, b...)
	}
	return strconv.AppendFloat(out, v, 'f', -1, 64)
}

// appendString appends s as a JSON string: printable ASCII as is, the
// rest through encoding/json.
func appendString(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			b, _ := json.Marshal(s)
			return append(out, b...)
		}
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}
