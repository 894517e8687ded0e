package pickle

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// canon renders a decoded value like testdata/gen.py's canon().
func canon(d *Decoder, v Value) any { return canonWith(d, v, nil) }

// canonWith is canon with handles rendered by handle.
func canonWith(d *Decoder, v Value, handle func(Value) any) any {
	canon := func(d *Decoder, v Value) any { return canonWith(d, v, handle) }
	switch v.Kind {
	case Handle:
		if handle != nil {
			return handle(v)
		}
	case None:
		return nil
	case Bool:
		return v.X != 0
	case Int:
		return map[string]any{"i": fmt.Sprint(int64(v.X))}
	case BigInt:
		b, _ := d.Big(v)
		return map[string]any{"i": b.String()}
	case Float:
		var buf [8]byte
		binary.BigEndian.PutUint64(buf[:], v.X)
		return map[string]any{"f": hex.EncodeToString(buf[:])}
	case String:
		s, _ := d.Str(v)
		return map[string]any{"s": s}
	case Bytes:
		b, _ := d.BytesOf(v)
		return map[string]any{"b": hex.EncodeToString(b)}
	case List, Tuple, Set, FrozenSet:
		tag := map[Kind]string{List: "l", Tuple: "t", Set: "set", FrozenSet: "fs"}[v.Kind]
		items := []any{}
		for _, it := range d.Items(v) {
			items = append(items, canon(d, it))
		}
		return map[string]any{tag: items}
	case Dict:
		pairs := []any{}
		kv := d.Items(v)
		for i := 0; i+1 < len(kv); i += 2 {
			pairs = append(pairs, []any{canon(d, kv[i]), canon(d, kv[i+1])})
		}
		return map[string]any{"d": pairs}
	case Global:
		s, _ := d.GlobalName(v)
		return map[string]any{"global": s}
	case Object:
		cls, args, state, _, _ := d.ObjectParts(v)
		return map[string]any{"object": []any{canon(d, cls), canon(d, args), canon(d, state)}}
	}
	return fmt.Sprintf("<%s>", v.Kind)
}

// TestDifferential decodes Python-written pickles of random values
// (protocols 0-5, testdata/gen.py) and compares with Python's rendering.
func TestDifferential(t *testing.T) {
	want := readExpected(t, "random")
	for p := 0; p <= 5; p++ {
		for i, rec := range readRecords(t, "random", p) {
			for _, in := range inputModes {
				d := newTestDecoder(rec, nil, in)
				v, err := d.Decode()
				if err != nil {
					t.Fatalf("protocol %d value %d (%s): %v", p, i, in, err)
				}
				if got := canon(d, v); !reflect.DeepEqual(got, want[i]) {
					g, _ := json.Marshal(got)
					w, _ := json.Marshal(want[i])
					t.Fatalf("protocol %d value %d (%s):\n got %.600s\nwant %.600s", p, i, in, g, w)
				}
			}
		}
	}
}

// dictTaker is a DictFinisher that turns every dict fastDict offers into
// a handle (when accept is set) or declines it, and keeps every other
// container as it is.
type dictTaker struct {
	accept bool
	dicts  [][]Value
	offers int
}

func (f *dictTaker) Finish(d *Decoder, v Value) (Value, error) { return v, nil }

func (f *dictTaker) FinishDict(d *Decoder, kv []Value) (Value, bool, error) {
	f.offers++
	if !f.accept {
		return Value{}, false, nil
	}
	f.dicts = append(f.dicts, append([]Value(nil), kv...))
	return MakeHandle(1, uint64(len(f.dicts)-1)), true, nil
}

// TestFastDictDifferential decodes the Python-written pickles again with a
// DictFinisher, so that dicts go through fastDict (taken as handles, or
// declined and handed back to the VM), and compares with Python.
// testdata/gen_fastdict.py writes the fastdict_* fixtures: snapshot-like
// dict shapes.
func TestFastDictDifferential(t *testing.T) {
	offers := 0
	for _, set := range []struct {
		name   string
		protos []int
	}{{"random", []int{0, 1, 2, 3, 4, 5}}, {"fastdict", []int{2, 4}}} {
		offers += fastDictDifferential(t, set.name, set.protos)
	}
	if offers == 0 {
		t.Fatal("no dict took the fast path")
	}
	t.Logf("%d dicts offered", offers)
}

func fastDictDifferential(t *testing.T, name string, protos []int) (offers int) {
	want := readExpected(t, name)
	for _, p := range protos {
		for i, rec := range readRecords(t, name, p) {
			for _, accept := range []bool{false, true} {
				for _, in := range inputModes {
					f := &dictTaker{accept: accept}
					d := newTestDecoder(rec, f, in)
					v, err := d.Decode()
					if err != nil {
						t.Fatalf("protocol %d value %d (accept %v, %s): %v", p, i, accept, in, err)
					}
					var handle func(Value) any
					handle = func(h Value) any {
						pairs := []any{}
						kv := f.dicts[h.X]
						for i := 0; i+1 < len(kv); i += 2 {
							pairs = append(pairs, []any{canonWith(d, kv[i], handle), canonWith(d, kv[i+1], handle)})
						}
						return map[string]any{"d": pairs}
					}
					if got := canonWith(d, v, handle); !reflect.DeepEqual(got, want[i]) {
						g, _ := json.Marshal(got)
						w, _ := json.Marshal(want[i])
						t.Fatalf("%s protocol %d value %d (accept %v, %s):\n got %.600s\nwant %.600s", name, p, i, accept, in, g, w)
					}
					offers += f.offers
				}
			}
		}
	}
	return offers
}

// readExpected reads testdata/NAME_expected.json: Python's rendering of
// each value of the NAME fixtures (testdata/gen*.py).
func readExpected(t *testing.T, name string) []any {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name + "_expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var want []any
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	return want
}

// readRecords reads testdata/NAME_pP.bin: the values pickled with protocol
// P, each behind its little-endian uint32 length.
func readRecords(t testing.TB, name string, p int) [][]byte {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("testdata/%s_p%d.bin", name, p))
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	for len(data) >= 4 {
		n := binary.LittleEndian.Uint32(data)
		if uint64(len(data)-4) < uint64(n) {
			t.Fatalf("%s protocol %d: record %d is cut short", name, p, len(recs))
		}
		recs = append(recs, data[4:4+n])
		data = data[4+n:]
	}
	if len(data) != 0 {
		t.Fatalf("%s protocol %d: %d stray bytes at the end", name, p, len(data))
	}
	return recs
}

// inputMode is how a test hands a pickle to the decoder.
type inputMode string

const (
	fromBytes   inputMode = "bytes"
	fromReader  inputMode = "reader"         // a few bytes per Read
	fromWindows inputMode = "7-byte windows" // bytes, with a progress hook
)

var inputModes = []inputMode{fromBytes, fromReader, fromWindows}

// newTestDecoder decodes rec from memory, through a reader that hands out
// a few bytes at a time, or from memory a few bytes of window at a time.
func newTestDecoder(rec []byte, fin Finisher, in inputMode) *Decoder {
	switch in {
	case fromReader:
		return NewDecoder(iotestOneByte(rec), fin)
	case fromWindows:
		d := NewBytesDecoder(rec, fin)
		d.SetProgress(7, func(int64) {})
		return d
	}
	return NewBytesDecoder(rec, fin)
}

// oneByteReader returns at most 61 bytes per Read, to exercise refills.
type oneByteReader struct{ b []byte }

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, errEOF
	}
	n := copy(p[:min(len(p), 61)], r.b)
	r.b = r.b[n:]
	return n, nil
}

var errEOF = func() error { _, err := bytes.NewReader(nil).Read(nil); return err }()

func iotestOneByte(b []byte) *oneByteReader { return &oneByteReader{b} }

func le32(n uint32) string {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], n)
	return string(b[:])
}

func le64(n uint64) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	return string(b[:])
}

func f64(f float64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], math.Float64bits(f))
	return string(b[:])
}

// TestOpcodes checks each opcode on a hand-written pickle.
func TestOpcodes(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // canonical JSON
	}{
		{"NONE", "N.", `null`},
		{"NEWTRUE", "\x80\x02\x88.", `true`},
		{"NEWFALSE", "\x89.", `false`},
		{"INT", "I42\n.", `{"i":"42"}`},
		{"INT bool", "I01\n.", `true`},
		{"INT big", "I123456789012345678901\n.", `{"i":"123456789012345678901"}`},
		{"LONG", "L-5L\n.", `{"i":"-5"}`},
		{"BININT", "J" + le32(0xffffffff) + ".", `{"i":"-1"}`},
		{"BININT1", "K\xff.", `{"i":"255"}`},
		{"BININT2", "M\xff\xff.", `{"i":"65535"}`},
		{"LONG1 neg", "\x8a\x01\xff.", `{"i":"-1"}`},
		{"LONG1 zero", "\x8a\x00.", `{"i":"0"}`},
		{"LONG1 2^64-1", "\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00.", `{"i":"18446744073709551615"}`},
		{"LONG4", "\x8b" + le32(2) + "\x00\x80.", `{"i":"-32768"}`},
		{"FLOAT", "F1.5\n.", `{"f":"3ff8000000000000"}`},
		{"BINFLOAT", "G" + f64(-2) + ".", `{"f":"c000000000000000"}`},
		{"STRING", "S'a\\nb'\n.", `{"s":"a\nb"}`},
		{"BINSTRING", "T" + le32(2) + "hi.", `{"s":"hi"}`},
		{"SHORT_BINSTRING", "U\x02hi.", `{"s":"hi"}`},
		{"UNICODE", "V\\u00e9x\n.", `{"s":"éx"}`},
		{"BINUNICODE", "X" + le32(3) + "abc.", `{"s":"abc"}`},
		{"SHORT_BINUNICODE", "\x8c\x02\xc3\xa9.", `{"s":"é"}`},
		{"BINUNICODE8", "\x8d" + le64(1) + "z.", `{"s":"z"}`},
		{"BINBYTES", "B" + le32(1) + "\x00.", `{"b":"00"}`},
		{"SHORT_BINBYTES", "C\x01\xff.", `{"b":"ff"}`},
		{"BINBYTES8", "\x8e" + le64(2) + "ab.", `{"b":"6162"}`},
		{"BYTEARRAY8", "\x96" + le64(1) + "a.", `{"b":"61"}`},
		{"EMPTY_LIST APPEND", "]K\x01a.", `{"l":[{"i":"1"}]}`},
		{"LIST", "(K\x01K\x02l.", `{"l":[{"i":"1"},{"i":"2"}]}`},
		{"APPENDS", "](K\x01K\x02e.", `{"l":[{"i":"1"},{"i":"2"}]}`},
		{"EMPTY_TUPLE", ").", `{"t":[]}`},
		{"TUPLE", "(K\x01t.", `{"t":[{"i":"1"}]}`},
		{"TUPLE1", "K\x01\x85.", `{"t":[{"i":"1"}]}`},
		{"TUPLE2", "K\x01K\x02\x86.", `{"t":[{"i":"1"},{"i":"2"}]}`},
		{"TUPLE3", "K\x01K\x02K\x03\x87.", `{"t":[{"i":"1"},{"i":"2"},{"i":"3"}]}`},
		{"EMPTY_DICT SETITEM", "}K\x01K\x02s.", `{"d":[[{"i":"1"},{"i":"2"}]]}`},
		{"DICT", "(K\x01K\x02d.", `{"d":[[{"i":"1"},{"i":"2"}]]}`},
		{"SETITEMS", "}(K\x01K\x02K\x03K\x04u.", `{"d":[[{"i":"1"},{"i":"2"}],[{"i":"3"},{"i":"4"}]]}`},
		{"SETITEM repeated key", "}K\x01K\x02sK\x01K\x03s.", `{"d":[[{"i":"1"},{"i":"3"}]]}`},
		{"EMPTY_SET ADDITEMS", "\x8f(K\x01e\x90.", ``}, // APPENDS on a set is an error; see hostile
		{"ADDITEMS", "\x8f(K\x01\x90.", `{"set":[{"i":"1"}]}`},
		{"FROZENSET", "(K\x01\x91.", `{"fs":[{"i":"1"}]}`},
		{"PUT GET", "]p0\n0g0\n.", `{"l":[]}`},
		{"BINPUT BINGET", "]q\x010h\x01.", `{"l":[]}`},
		{"LONG_BINPUT LONG_BINGET", "]r" + le32(7) + "0j" + le32(7) + ".", `{"l":[]}`},
		{"shared list seen with items", "](]\x94K\x01ah\x00e.", `{"l":[{"l":[{"i":"1"}]},{"l":[{"i":"1"}]}]}`},
		{"memoized list appended later", "]\x94](h\x00h\x00eh\x00K\x05a0.", `{"l":[{"l":[{"i":"5"}]},{"l":[{"i":"5"}]}]}`},
		{"DUP", "K\x01K\x022\x86.", `{"t":[{"i":"2"},{"i":"2"}]}`},
		{"POP", "K\x01K\x020.", `{"i":"1"}`},
		{"POP_MARK", "K\x01(K\x02K\x031.", `{"i":"1"}`},
		{"FRAME", "\x80\x04\x95" + le64(3) + "K\x07.", `{"i":"7"}`},
		{"GLOBAL", "cos\nsystem\n.", `{"global":"os.system"}`},
		{"STACK_GLOBAL", "\x8c\x02os\x8c\x06system\x93.", `{"global":"os.system"}`},
		{"REDUCE inert", "cos\nsystem\n\x8c\x02ls\x85R.", `{"object":[{"global":"os.system"},{"t":[{"s":"ls"}]},null]}`},
		{"NEWOBJ BUILD", "cm\nC\n)\x81}b.", `{"object":[{"global":"m.C"},{"t":[]},{"d":[]}]}`},
		{"NEWOBJ_EX", "cm\nC\n)}\x92.", `{"object":[{"global":"m.C"},{"t":[]},{"d":[]}]}`},
		{"INST", "(K\x01im\nC\n.", `{"object":[{"global":"m.C"},{"t":[{"i":"1"}]},null]}`},
		{"OBJ", "(cm\nC\nK\x01o.", `{"object":[{"global":"m.C"},{"t":[{"i":"1"}]},null]}`},
		{"OrderedDict", "ccollections\nOrderedDict\n)R(K\x01K\x02u.", `{"d":[[{"i":"1"},{"i":"2"}]]}`},
		{"set via REDUCE", "cbuiltins\nset\n](K\x01e\x85R.", `{"set":[{"i":"1"}]}`},
		{"bytes via _codecs", "c_codecs\nencode\n\x8c\x02\xc3\xbf\x8c\x06latin1\x86R.", `{"b":"ff"}`},
		{"PERSID", "Pkey\n.", `{"object":[{"global":"persistent_id"},{"s":"key"},null]}`},
		{"BINPERSID", "K\x01Q.", `{"object":[{"global":"persistent_id"},{"i":"1"},null]}`},
		{"EXT1", "\x82\x05.", `{"object":[{"global":"extension"},{"i":"5"},null]}`},
		{"EXT2", "\x83\x05\x01.", `{"object":[{"global":"extension"},{"i":"261"},null]}`},
		{"EXT4", "\x84\x05\x00\x00\x01.", `{"object":[{"global":"extension"},{"i":"16777221"},null]}`},
		{"PROTO 5", "\x80\x05N.", `null`},
	}
	for _, tc := range tests {
		if tc.want == "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			d := NewBytesDecoder([]byte(tc.in), nil)
			v, err := d.Decode()
			if err != nil {
				t.Fatal(err)
			}
			var want any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if got := canon(d, v); !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Errorf("got %s, want %s", g, tc.want)
			}
		})
	}
}

// TestErrors checks that bad input fails with a located one-line error.
func TestErrors(t *testing.T) {
	deep := strings.Repeat("]", 1_000_000) + strings.Repeat("a", 999_999) + "."
	marks := strings.Repeat("(", 1_000_000) + "."
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "unexpected end of input"},
		{"no STOP", "K\x01", "no STOP"},
		{"truncated BINUNICODE", "X" + le32(5) + "ab", "pickle: truncated BINUNICODE at byte 0: need 5 bytes, 2 left"},
		{"huge BINUNICODE8", "\x8d" + le64(1<<40) + "ab", "truncated BINUNICODE8"},
		{"huge BINBYTES8", "\x8e" + le64(math.MaxUint64) + "ab", "truncated BINBYTES8"},
		{"huge LONG4", "\x8b" + le32(0x7fffffff) + "ab", "truncated LONG4"},
		{"negative LONG4", "\x8b" + le32(0xffffffff), "negative length"},
		{"memo miss", "h\x05.", "memo key 5 not found"},
		{"long memo miss", "j" + le32(0xffffffff) + ".", "memo key 4294967295 not found"},
		{"sparse PUT", "Nr" + le32(0xfffffff0) + "j" + le32(0xfffffff0) + ".", ""},
		{"stack underflow", "a.", "stack underflow"},
		{"APPEND to int", "K\x01K\x02a.", "APPEND to int"},
		{"SETITEMS odd", "}(K\x01u.", "odd number"},
		{"no mark", "e.", "no MARK"},
		{"unknown opcode", "\xff", "unknown opcode 0xff"},
		{"bad protocol", "\x80\x09", "unsupported protocol 9"},
		{"out-of-band", "\x97", "out-of-band buffers"},
		{"ADDITEMS to list", "](K\x01\x90.", "ADDITEMS to list"},
		{"deep nesting", deep, "stack too deep"},
		{"many marks", marks, "stack too deep"},
		{"bad INT", "Ixyz\n.", "bad integer"},
		{"bad STRING", "Sabc\n.", "bad quoted string"},
		{"BUILD on list", "]Nb.", "BUILD on list"},
		{"STACK_GLOBAL ints", "K\x01K\x02\x93.", "must be str"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, streaming := range []bool{false, true} {
				var d *Decoder
				if streaming {
					d = NewDecoder(bytes.NewReader([]byte(tc.in)), nil)
				} else {
					d = NewBytesDecoder([]byte(tc.in), nil)
				}
				_, err := d.Decode()
				if tc.want == "" {
					if err != nil {
						t.Fatalf("unexpected error %v", err)
					}
					continue
				}
				var pe *Error
				if !errors.As(err, &pe) {
					t.Fatalf("got %v, want a *pickle.Error", err)
				}
				msg := err.Error()
				if !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") || !strings.Contains(msg, " at byte ") {
					t.Errorf("error %q, want it to contain %q on one line with a location", msg, tc.want)
				}
			}
		})
	}
}

// TestTruncation decodes every prefix of a real-looking pickle.
func TestTruncation(t *testing.T) {
	data, err := os.ReadFile("testdata/random_p4.bin")
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint32(data)
	rec := data[4 : 4+n]
	for i := 0; i < len(rec); i++ {
		_, err := NewBytesDecoder(rec[:i], nil).Decode()
		if err == nil {
			// A prefix can be a complete pickle only if it ends in STOP.
			if i == 0 || rec[i-1] != '.' {
				t.Fatalf("prefix %d decoded without error", i)
			}
		}
		// Windows change nothing about where and why decoding fails.
		_, werr := newTestDecoder(rec[:i], nil, fromWindows).Decode()
		if fmt.Sprint(werr) != fmt.Sprint(err) {
			t.Fatalf("prefix %d: in windows %v, at once %v", i, werr, err)
		}
	}
}

// TestProgress checks that a bytes decoder reports offsets in order, about
// every so many bytes, within the input.
func TestProgress(t *testing.T) {
	for _, rec := range readRecords(t, "random", 4) {
		for _, every := range []int{1, 64, 1000} {
			var offs []int64
			d := NewBytesDecoder(rec, nil)
			d.SetProgress(every, func(off int64) { offs = append(offs, off) })
			if _, err := d.Decode(); err != nil {
				t.Fatal(err)
			}
			for i, off := range offs {
				if off < 0 || off > int64(len(rec)) || (i > 0 && off < offs[i-1]) {
					t.Fatalf("every %d: offsets %v out of order or range (input %d bytes)", every, offs, len(rec))
				}
			}
			// A window is every bytes or more, so there are at most
			// len/every reports; a long input gets some.
			if max := len(rec) / every; len(offs) > max || (max >= 2 && len(offs) == 0) {
				t.Fatalf("every %d: %d reports for %d bytes", every, len(offs), len(rec))
			}
		}
	}
}

// TestLongLineWindows checks a text opcode's long line in 1-byte windows,
// with and without its newline. The newline search must not rescan what it
// already saw: when it did, fuzzing stalled on inputs like these.
func TestLongLineWindows(t *testing.T) {
	text := strings.Repeat("a", 900_000)
	for _, tc := range []struct {
		in, err string
	}{
		{"V" + text + "\n.", ""},
		{"V" + text, "no newline"},
	} {
		d := NewBytesDecoder([]byte(tc.in), nil)
		d.SetProgress(1, func(int64) {})
		v, err := d.Decode()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := d.Str(v); !ok || len(s) != len(text) {
			t.Errorf("decoded %d bytes, want %d", len(s), len(text))
		}
	}
}

// TestJSONDepth checks AppendJSON refuses very deep values.
func TestJSONDepth(t *testing.T) {
	in := strings.Repeat("]", 1000) + strings.Repeat("a", 999) + "."
	d := NewBytesDecoder([]byte(in), nil)
	v, err := d.Decode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.AppendJSON(nil, v, nil); !errors.Is(err, ErrTooDeep) {
		t.Errorf("AppendJSON: %v, want ErrTooDeep", err)
	}
}

func FuzzDecode(f *testing.F) {
	for p := 0; p <= 5; p++ {
		for i, rec := range readRecords(f, "random", p) {
			if i < 20 && len(rec) < 4096 {
				f.Add(rec)
			}
		}
	}
	f.Add([]byte("](]\x94K\x01ah\x00e."))
	f.Fuzz(func(t *testing.T, b []byte) {
		// The dict fast path (with a DictFinisher) must not panic either,
		// nor return anything but one-line *Errors.
		for _, in := range inputModes {
			fd := newTestDecoder(b, &dictTaker{accept: true}, in)
			if _, err := fd.Decode(); err != nil {
				var pe *Error
				if !errors.As(err, &pe) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("fast path: bad error %q", err)
				}
			}
		}
		d := NewBytesDecoder(b, nil)
		v, err := d.Decode()
		// Windows change nothing: the same value, or the same error.
		dw := newTestDecoder(b, nil, fromWindows)
		vw, errw := dw.Decode()
		if fmt.Sprint(err) != fmt.Sprint(errw) {
			t.Fatalf("in windows %v, at once %v", errw, err)
		}
		if err == nil {
			jw, _ := dw.AppendJSON(nil, vw, nil)
			if j, _ := d.AppendJSON(nil, v, nil); !bytes.Equal(j, jw) {
				t.Fatalf("in windows %s, at once %s", jw, j)
			}
		}
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *pickle.Error", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		d.AppendJSON(nil, v, nil)
		// The streaming reader must agree with the in-memory one.
		d2 := NewDecoder(bytes.NewReader(b), nil)
		v2, err := d2.Decode()
		if err != nil {
			t.Fatalf("streaming decode failed where in-memory succeeded: %v", err)
		}
		j1, e1 := d.AppendJSON(nil, v, nil)
		j2, e2 := d2.AppendJSON(nil, v2, nil)
		if (e1 == nil) != (e2 == nil) || !bytes.Equal(j1, j2) {
			t.Fatalf("streaming and in-memory results differ: %s vs %s", j1, j2)
		}
	})
}
