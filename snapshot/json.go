package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/pickle"
)

// maxJSONDepth bounds nesting in JSON input.
const maxJSONDepth = 10000

// decodeJSON reads a JSON-encoded snapshot (json.dumps of the pickled
// dict, as memory_viz accepts) through the same builder as pickles.
func decodeJSON(r io.Reader, size int64) (*Snapshot, error) {
	s := &Snapshot{Source: Source{Encoding: "json"}}
	b := newBuilder(s, size)
	d := pickle.NewBuilder(b)
	b.attach(d)
	dec := json.NewDecoder(r)
	dec.UseNumber()

	type frame struct {
		v      pickle.Value
		isDict bool
		key    pickle.Value
		hasKey bool
	}
	var stack []frame
	var root pickle.Value
	haveRoot := false
	fail := func(err error) error {
		return fmt.Errorf("json at byte %d: %w", dec.InputOffset(), err)
	}
	// add places a complete value into its parent (or makes it the root).
	add := func(v pickle.Value) error {
		if len(stack) == 0 {
			root, haveRoot = v, true
			return nil
		}
		top := &stack[len(stack)-1]
		if top.isDict {
			if !top.hasKey {
				top.key, top.hasKey = v, true
				return nil
			}
			top.hasKey = false
			return d.Add(top.v, top.key, v)
		}
		return d.Add(top.v, v)
	}
	for {
		d.SetOffset(dec.InputOffset())
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fail(err)
		}
		if haveRoot && len(stack) == 0 {
			return nil, fail(errors.New("extra data after the top-level value"))
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= maxJSONDepth {
					return nil, fail(errors.New("nesting too deep"))
				}
				k := pickle.List
				if t == '{' {
					k = pickle.Dict
				}
				stack = append(stack, frame{v: d.NewContainer(k), isDict: t == '{'})
			case '}', ']':
				v := stack[len(stack)-1].v
				stack = stack[:len(stack)-1]
				if err := add(v); err != nil {
					return nil, fail(err)
				}
			}
		case string:
			if err := add(d.MakeString(t)); err != nil {
				return nil, fail(err)
			}
		case json.Number:
			v, err := jsonNumber(d, string(t))
			if err != nil {
				return nil, fail(err)
			}
			if err := add(v); err != nil {
				return nil, fail(err)
			}
		case bool:
			if err := add(pickle.MakeBool(t)); err != nil {
				return nil, fail(err)
			}
		case nil:
			if err := add(pickle.Value{Kind: pickle.None}); err != nil {
				return nil, fail(err)
			}
		}
	}
	if len(stack) > 0 {
		return nil, fail(errors.New("unexpected end of input"))
	}
	if !haveRoot {
		return nil, errors.New("json: no value")
	}
	root, err := d.FinishValue(root)
	if err != nil {
		return nil, err
	}
	if err := b.assemble(root); err != nil {
		return nil, err
	}
	s.Source.Size = dec.InputOffset()
	return s, nil
}

func jsonNumber(d *pickle.Decoder, s string) (pickle.Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return pickle.MakeInt(i), nil
		}
		if len(s) < 1000 {
			if b, ok := new(big.Int).SetString(s, 10); ok {
				return d.MakeBig(b), nil
			}
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return pickle.Value{}, fmt.Errorf("bad number %q", s)
	}
	return pickle.MakeFloat(f), nil
}
