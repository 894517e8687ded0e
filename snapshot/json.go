package snapshot

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gpumem/gpumem/internal/pickle"
)

// maxJSONDepth bounds nesting in JSON input.
const maxJSONDepth = 10000

// decodeJSON reads a JSON-encoded snapshot (json.dumps of the pickled
// dict, as memory_viz accepts) through the same builder as pickles. It
// scans the whole input in memory with a small hand-written scanner
// (encoding/json's tokenizer was ~6x slower).
func decodeJSON(r io.Reader, size int64) (*Snapshot, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Source: Source{Encoding: "json"}}
	b := newBuilder(s, size)
	d := pickle.NewBuilder(b)
	b.attach(d)
	sc := &jsonScanner{b: data, d: d}
	root, err := sc.parse()
	if err != nil {
		return nil, err
	}
	root, err = d.FinishValue(root)
	if err != nil {
		return nil, err
	}
	if err := b.assemble(root); err != nil {
		return nil, err
	}
	s.Source.Size = int64(len(data))
	return s, nil
}

type jsonScanner struct {
	b   []byte
	i   int
	d   *pickle.Decoder
	buf []byte
}

func (sc *jsonScanner) errorf(format string, args ...any) error {
	return &jsonError{off: int64(sc.i), msg: fmt.Sprintf(format, args...)}
}

func (sc *jsonScanner) skipSpace() {
	for sc.i < len(sc.b) {
		switch sc.b[sc.i] {
		case ' ', '\t', '\r', '\n':
			sc.i++
		default:
			return
		}
	}
}

type jsonFrame struct {
	v      pickle.Value
	isDict bool
	key    pickle.Value
}

// parse reads one value with an explicit stack (no recursion).
func (sc *jsonScanner) parse() (pickle.Value, error) {
	var stack []jsonFrame
	var root pickle.Value
	d := sc.d
	for {
		sc.skipSpace()
		if sc.i >= len(sc.b) {
			if len(stack) == 0 {
				return root, errors.New("json: no value")
			}
			return root, sc.errorf("unexpected end of input")
		}
		// In a dict, read the key first.
		if n := len(stack); n > 0 && stack[n-1].isDict {
			if sc.b[sc.i] == '}' {
				sc.i++
				v := stack[n-1].v
				stack = stack[:n-1]
				done, err := sc.place(&stack, &root, v)
				if err != nil || done {
					return root, err
				}
				continue
			}
			if sc.b[sc.i] != '"' {
				return root, sc.errorf("want a string key")
			}
			k, err := sc.str()
			if err != nil {
				return root, err
			}
			stack[n-1].key = k
			sc.skipSpace()
			if sc.i >= len(sc.b) || sc.b[sc.i] != ':' {
				return root, sc.errorf("want ':'")
			}
			sc.i++
			sc.skipSpace()
			if sc.i >= len(sc.b) {
				return root, sc.errorf("unexpected end of input")
			}
		}
		c := sc.b[sc.i]
		var v pickle.Value
		switch {
		case c == '{' || c == '[':
			if len(stack) >= maxJSONDepth {
				return root, sc.errorf("nesting too deep")
			}
			sc.i++
			k := pickle.List
			if c == '{' {
				k = pickle.Dict
			}
			stack = append(stack, jsonFrame{v: d.NewContainer(k), isDict: c == '{'})
			if c == '[' {
				sc.skipSpace()
				if sc.i < len(sc.b) && sc.b[sc.i] == ']' {
					sc.i++
					v = stack[len(stack)-1].v
					stack = stack[:len(stack)-1]
					break
				}
			}
			continue
		case c == ']':
			n := len(stack)
			if n == 0 || stack[n-1].isDict {
				return root, sc.errorf("unexpected ']'")
			}
			sc.i++
			v = stack[n-1].v
			stack = stack[:n-1]
		case c == '"':
			var err error
			if v, err = sc.str(); err != nil {
				return root, err
			}
		case c == '-' || (c >= '0' && c <= '9') || c == 'N' || c == 'I':
			var err error
			if v, err = sc.number(); err != nil {
				return root, err
			}
		case c == 't' || c == 'f' || c == 'n':
			lit, val := "null", pickle.Value{Kind: pickle.None}
			if c == 't' {
				lit, val = "true", pickle.MakeBool(true)
			} else if c == 'f' {
				lit, val = "false", pickle.MakeBool(false)
			}
			if len(sc.b)-sc.i < len(lit) || string(sc.b[sc.i:sc.i+len(lit)]) != lit {
				return root, sc.errorf("invalid literal")
			}
			sc.i += len(lit)
			v = val
		default:
			return root, sc.errorf("unexpected %q", c)
		}
		done, err := sc.place(&stack, &root, v)
		if err != nil || done {
			return root, err
		}
	}
}

// place adds a complete value to its parent and consumes the separator
// after it; done reports that the top-level value is complete.
func (sc *jsonScanner) place(stack *[]jsonFrame, root *pickle.Value, v pickle.Value) (bool, error) {
	st := *stack
	if len(st) == 0 {
		*root = v
		sc.skipSpace()
		if sc.i != len(sc.b) {
			return true, sc.errorf("extra data after the top-level value")
		}
		return true, nil
	}
	top := &st[len(st)-1]
	var err error
	if top.isDict {
		err = sc.d.Add(top.v, top.key, v)
	} else {
		err = sc.d.Add(top.v, v)
	}
	if err != nil {
		return false, sc.errorf("%v", err)
	}
	sc.skipSpace()
	if sc.i >= len(sc.b) {
		return false, sc.errorf("unexpected end of input")
	}
	switch sc.b[sc.i] {
	case ',':
		sc.i++
	case '}', ']':
	default:
		return false, sc.errorf("want ',' or a closing bracket")
	}
	return false, nil
}

// str reads a JSON string at sc.i.
func (sc *jsonScanner) str() (pickle.Value, error) {
	start := sc.i + 1
	for j := start; j < len(sc.b); j++ {
		switch c := sc.b[j]; {
		case c == '"':
			sc.i = j + 1
			return sc.d.MakeStringBytes(sc.b[start:j]), nil
		case c == '\\':
			return sc.slowStr(start)
		case c < 0x20:
			sc.i = j
			return pickle.Value{}, sc.errorf("control character in string")
		}
	}
	return pickle.Value{}, sc.errorf("unterminated string")
}

// jsonEscapes maps the letter after a backslash in a JSON string to the
// byte it stands for (0: not a one-letter escape).
var jsonEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func (sc *jsonScanner) slowStr(start int) (pickle.Value, error) {
	out := sc.buf[:0]
	j := start
	for j < len(sc.b) {
		c := sc.b[j]
		switch {
		case c == '"':
			sc.i = j + 1
			sc.buf = out
			return sc.d.MakeStringBytes(out), nil
		case c < 0x20:
			sc.i = j
			return pickle.Value{}, sc.errorf("control character in string")
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(sc.b) {
			break
		}
		e := sc.b[j+1]
		j += 2
		if b := jsonEscapes[e]; b != 0 {
			out = append(out, b)
			continue
		}
		switch e {
		case 'u':
			r, ok := sc.hex4(j)
			if !ok {
				sc.i = j
				return pickle.Value{}, sc.errorf("bad \\u escape")
			}
			j += 4
			if utf16.IsSurrogate(r) {
				if r2, ok := sc.hex4(j + 2); ok && j+1 < len(sc.b) && sc.b[j] == '\\' && sc.b[j+1] == 'u' {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						j += 6
					}
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			sc.i = j
			return pickle.Value{}, sc.errorf("bad escape \\%c", e)
		}
	}
	sc.i = j
	return pickle.Value{}, sc.errorf("unterminated string")
}

func (sc *jsonScanner) hex4(j int) (rune, bool) {
	if j+4 > len(sc.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(sc.b[j:j+4]), 16, 32)
	return rune(v), err == nil
}

// number reads a JSON number (and Python's NaN/Infinity spellings).
func (sc *jsonScanner) number() (pickle.Value, error) {
	for _, lit := range []string{"NaN", "Infinity", "-Infinity"} {
		if len(sc.b)-sc.i >= len(lit) && string(sc.b[sc.i:sc.i+len(lit)]) == lit {
			sc.i += len(lit)
			switch lit {
			case "NaN":
				return pickle.MakeFloat(math.NaN()), nil
			case "Infinity":
				return pickle.MakeFloat(math.Inf(1)), nil
			}
			return pickle.MakeFloat(math.Inf(-1)), nil
		}
	}
	start := sc.i
	j := sc.i
	if j < len(sc.b) && sc.b[j] == '-' {
		j++
	}
	isInt := true
	var u uint64
	digits := 0
	for ; j < len(sc.b); j++ {
		c := sc.b[j]
		if c >= '0' && c <= '9' {
			if digits < 19 {
				u = u*10 + uint64(c-'0')
			}
			digits++
			continue
		}
		if c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && j > start) {
			isInt = false
			continue
		}
		break
	}
	sc.i = j
	tok := sc.b[start:j]
	if digits == 0 {
		return pickle.Value{}, sc.errorf("bad number")
	}
	if isInt {
		neg := tok[0] == '-'
		if digits < 19 {
			if neg {
				return pickle.MakeInt(-int64(u)), nil
			}
			return pickle.MakeInt(int64(u)), nil
		}
		if len(tok) > 1000 {
			return pickle.Value{}, sc.errorf("number too long")
		}
		b, ok := new(big.Int).SetString(string(tok), 10)
		if !ok {
			return pickle.Value{}, sc.errorf("bad number %q", tok)
		}
		return sc.d.MakeBig(b), nil
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return pickle.Value{}, sc.errorf("bad number %q", tok)
	}
	return pickle.MakeFloat(f), nil
}
