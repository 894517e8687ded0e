package pickle

import (
	"encoding/hex"
	"errors"
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"
)

// Str returns the string of a String value.
func (d *Decoder) Str(v Value) (string, bool) {
	if v.Kind != String || v.X >= uint64(len(d.strs)) {
		return "", false
	}
	return d.strs[v.X], true
}

// StrID returns the interned id of a String value (compare with Intern).
func (d *Decoder) StrID(v Value) (uint32, bool) {
	if v.Kind != String {
		return 0, false
	}
	return uint32(v.X), true
}

// GlobalName returns "module.name" of a Global value.
func (d *Decoder) GlobalName(v Value) (string, bool) {
	if v.Kind != Global || v.X >= uint64(len(d.strs)) {
		return "", false
	}
	return d.strs[v.X], true
}

// BytesOf returns the payload of a Bytes value.
func (d *Decoder) BytesOf(v Value) ([]byte, bool) {
	if v.Kind != Bytes || v.X >= uint64(len(d.bytes)) {
		return nil, false
	}
	return d.bytes[v.X], true
}

// Big returns a BigInt value's integer, or an Int's as a big.Int.
func (d *Decoder) Big(v Value) (*big.Int, bool) {
	switch v.Kind {
	case Int, Bool:
		return big.NewInt(int64(v.X)), true
	case BigInt:
		if b := d.bigInt(v); b != nil {
			return b, true
		}
	}
	return nil, false
}

// Uint64 returns a non-negative integer that fits 64 bits.
func (d *Decoder) Uint64(v Value) (uint64, bool) {
	switch v.Kind {
	case Int:
		if int64(v.X) < 0 {
			return 0, false
		}
		return v.X, true
	case Bool:
		return v.X, true
	case BigInt:
		if b := d.bigInt(v); b != nil && b.Sign() >= 0 && b.IsUint64() {
			return b.Uint64(), true
		}
	}
	return 0, false
}

// Items returns the items of a list, tuple, set or frozenset, or the flat
// key, value pairs of a dict (and the SETITEMS pairs of an object). The
// slice must not be modified or kept past the next Decode step.
func (d *Decoder) Items(v Value) []Value {
	if c := d.cont(v); c != nil {
		return c.items
	}
	return nil
}

// Len returns the number of items (pairs for dicts) of a container.
func (d *Decoder) Len(v Value) int {
	c := d.cont(v)
	if c == nil {
		return 0
	}
	if c.kind == Dict {
		return len(c.items) / 2
	}
	return len(c.items)
}

// ObjectParts returns the class, arguments, BUILD state and APPENDS items
// of an Object value.
func (d *Decoder) ObjectParts(v Value) (cls, args, state Value, list []Value, ok bool) {
	c := d.cont(v)
	if c == nil || c.kind != Object {
		return
	}
	o := d.objs[uint32(v.X)]
	if o == nil {
		return
	}
	return o.cls, o.args, o.state, o.list, true
}

// ErrTooDeep is returned by AppendJSON for values nested too deeply.
var ErrTooDeep = errors.New("value nested too deeply")

// maxJSONDepth bounds AppendJSON's recursion.
const maxJSONDepth = 200

// AppendJSON appends a compact JSON rendering of v: dicts with string keys
// as objects (other dicts as {"__dict__": [[k, v], ...]}), sequences and
// sets as arrays, bytes as {"__bytes__": hex}, classes as
// {"__class__": "module.name"} and objects as {"__class__": ..., "args": ...,
// "state": ..., "items": ..., "list": ...}. Handles are rendered by handle
// (null when handle is nil).
func (d *Decoder) AppendJSON(buf []byte, v Value, handle func(buf []byte, v Value) []byte) ([]byte, error) {
	return d.appendJSON(buf, v, handle, 0)
}

func (d *Decoder) appendJSON(buf []byte, v Value, handle func([]byte, Value) []byte, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return buf, ErrTooDeep
	}
	var err error
	switch v.Kind {
	case None:
		return append(buf, "null"...), nil
	case Bool:
		return strconv.AppendBool(buf, v.X != 0), nil
	case Int:
		return strconv.AppendInt(buf, int64(v.X), 10), nil
	case BigInt:
		if b := d.bigInt(v); b != nil {
			return b.Append(buf, 10), nil
		}
		return append(buf, "null"...), nil
	case Float:
		f := math.Float64frombits(v.X)
		switch {
		case math.IsNaN(f):
			return append(buf, `"NaN"`...), nil
		case math.IsInf(f, 1):
			return append(buf, `"Infinity"`...), nil
		case math.IsInf(f, -1):
			return append(buf, `"-Infinity"`...), nil
		}
		return strconv.AppendFloat(buf, f, 'g', -1, 64), nil
	case String:
		s, _ := d.Str(v)
		return AppendJSONString(buf, s), nil
	case Bytes:
		b, _ := d.BytesOf(v)
		buf = append(buf, `{"__bytes__":"`...)
		buf = hex.AppendEncode(buf, b)
		return append(buf, `"}`...), nil
	case Global:
		s, _ := d.GlobalName(v)
		buf = append(buf, `{"__class__":`...)
		buf = AppendJSONString(buf, s)
		return append(buf, '}'), nil
	case Handle:
		if handle == nil {
			return append(buf, "null"...), nil
		}
		return handle(buf, v), nil
	case List, Tuple, Set, FrozenSet:
		buf = append(buf, '[')
		for i, it := range d.Items(v) {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, err = d.appendJSON(buf, it, handle, depth+1); err != nil {
				return buf, err
			}
		}
		return append(buf, ']'), nil
	case Dict:
		return d.appendPairs(buf, d.Items(v), handle, depth)
	case Object:
		cls, args, state, list, _ := d.ObjectParts(v)
		buf = append(buf, `{"__class__":`...)
		if s, ok := d.GlobalName(cls); ok {
			buf = AppendJSONString(buf, s)
		} else if buf, err = d.appendJSON(buf, cls, handle, depth+1); err != nil {
			return buf, err
		}
		buf = append(buf, `,"args":`...)
		if buf, err = d.appendJSON(buf, args, handle, depth+1); err != nil {
			return buf, err
		}
		if state.Kind != None {
			buf = append(buf, `,"state":`...)
			if buf, err = d.appendJSON(buf, state, handle, depth+1); err != nil {
				return buf, err
			}
		}
		if items := d.Items(v); len(items) > 0 {
			buf = append(buf, `,"items":`...)
			if buf, err = d.appendPairs(buf, items, handle, depth+1); err != nil {
				return buf, err
			}
		}
		if len(list) > 0 {
			buf = append(buf, `,"list":[`...)
			for i, it := range list {
				if i > 0 {
					buf = append(buf, ',')
				}
				if buf, err = d.appendJSON(buf, it, handle, depth+1); err != nil {
					return buf, err
				}
			}
			buf = append(buf, ']')
		}
		return append(buf, '}'), nil
	}
	return append(buf, "null"...), nil
}

func (d *Decoder) appendPairs(buf []byte, kv []Value, handle func([]byte, Value) []byte, depth int) ([]byte, error) {
	var err error
	strKeys := true
	for i := 0; i < len(kv); i += 2 {
		if kv[i].Kind != String {
			strKeys = false
			break
		}
	}
	if strKeys {
		buf = append(buf, '{')
		for i := 0; i+1 < len(kv); i += 2 {
			if i > 0 {
				buf = append(buf, ',')
			}
			s, _ := d.Str(kv[i])
			buf = AppendJSONString(buf, s)
			buf = append(buf, ':')
			if buf, err = d.appendJSON(buf, kv[i+1], handle, depth+1); err != nil {
				return buf, err
			}
		}
		return append(buf, '}'), nil
	}
	buf = append(buf, `{"__dict__":[`...)
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '[')
		if buf, err = d.appendJSON(buf, kv[i], handle, depth+1); err != nil {
			return buf, err
		}
		buf = append(buf, ',')
		if buf, err = d.appendJSON(buf, kv[i+1], handle, depth+1); err != nil {
			return buf, err
		}
		buf = append(buf, ']')
	}
	return append(buf, "]}"...), nil
}

// AppendJSONString appends s as a JSON string (invalid UTF-8 replaced).
func AppendJSONString(buf []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				buf = append(buf, '\\', c)
			case c == '\n':
				buf = append(buf, '\\', 'n')
			case c == '\r':
				buf = append(buf, '\\', 'r')
			case c == '\t':
				buf = append(buf, '\\', 't')
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			default:
				buf = append(buf, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&15])
		} else {
			buf = append(buf, s[i:i+size]...)
		}
		i += size
	}
	return append(buf, '"')
}

// NewBuilder returns a decoder with no input, for building values by hand
// (the JSON reader uses it so that JSON input goes through the same
// Finisher as pickles).
func NewBuilder(fin Finisher) *Decoder { return NewBytesDecoder(nil, fin) }

// MakeString returns an interned String value.
func (d *Decoder) MakeString(s string) Value { return Value{Kind: String, X: uint64(d.Intern(s))} }

// MakeInt returns an Int value.
func MakeInt(i int64) Value { return intValue(i) }

// MakeBig returns an Int or BigInt value.
func (d *Decoder) MakeBig(b *big.Int) Value { return d.bigValue(b) }

// MakeFloat returns a Float value.
func MakeFloat(f float64) Value { return Value{Kind: Float, X: math.Float64bits(f)} }

// MakeBool returns a Bool value.
func MakeBool(b bool) Value {
	if b {
		return Value{Kind: Bool, X: 1}
	}
	return Value{Kind: Bool}
}

// NewContainer returns a new empty List or Dict (or Tuple) value.
func (d *Decoder) NewContainer(k Kind) Value {
	v, _ := d.newCont(k, 0)
	return v
}

// Add appends items to a list (or key, value pairs to a dict), finishing
// each item first as the VM does.
func (d *Decoder) Add(target Value, items ...Value) error {
	if err := d.finishAll(items); err != nil {
		return err
	}
	c := d.cont(target)
	if c == nil {
		return errors.New("pickle: Add to a non-container")
	}
	c.items = append(c.items, items...)
	markCont(c, items)
	return nil
}

// FinishValue finishes a complete top-level value.
func (d *Decoder) FinishValue(v Value) (Value, error) { return d.finish(v) }

// SetOffset sets the offset reported by Errorf (for non-pickle input).
func (d *Decoder) SetOffset(off int64) { d.opOff = off }

// MakeStringBytes returns an interned String value for b (no allocation
// when the string is already interned).
func (d *Decoder) MakeStringBytes(b []byte) Value { return d.internBytes(b) }
