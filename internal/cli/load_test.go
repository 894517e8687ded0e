package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

func TestProgressBar(t *testing.T) {
	var out bytes.Buffer
	p := &progressBar{w: &out, name: "x.pickle"}
	p.update(123<<20, 1<<30)
	p.update(500<<20, 1<<30) // within 100 ms: skipped
	p.update(1<<30, 1<<30)   // the end is always drawn
	p.clear()
	want := "\rloading x.pickle: 123.0 MiB of 1.0 GiB (12%)" +
		"\rloading x.pickle: 1.0 GiB of 1.0 GiB (100%) " + // padded over the longer line
		"\r" + strings.Repeat(" ", len("loading x.pickle: 1.0 GiB of 1.0 GiB (100%)")) + "\r"
	if out.String() != want {
		t.Errorf("got %q\nwant %q", out.String(), want)
	}

	out.Reset()
	p = &progressBar{w: &out, name: "-"}
	p.update(5<<20, -1) // unknown total (stdin)
	if got := out.String(); got != "\rloading -: 5.0 MiB" {
		t.Errorf("unknown total: got %q", got)
	}
}

func TestPrefixError(t *testing.T) {
	tests := []struct {
		path string
		err  error
		want string
	}{
		{"a/b.pickle", errors.New("permission denied"), "a/b.pickle: permission denied"},
		{"a/b.pickle", &snapshot.DecodeError{File: "a/b.pickle", Offset: 12, Err: errors.New("pickle: bad opcode at byte 12")}, "a/b.pickle: pickle: bad opcode at byte 12"},
		{"a/b.pickle", fmt.Errorf("wrapped: %w", &snapshot.DecodeError{File: "b.pickle", Offset: -1, Err: errors.New("empty input")}), "wrapped: b.pickle: empty input"},
		{"a/b.pickle", &os.PathError{Op: "open", Path: "a/b.pickle", Err: os.ErrNotExist}, "a/b.pickle: no such file"},
	}
	for _, tt := range tests {
		err := prefixError(tt.path, tt.err)
		if got := err.Error(); got != tt.want {
			t.Errorf("prefixError(%q, %q) = %q, want %q", tt.path, tt.err, got, tt.want)
		}
		if !errors.Is(err, tt.err) {
			t.Errorf("prefixError(%q, %q) lost the error's chain", tt.path, tt.err)
		}
	}
}

func TestLoadArgsNothing(t *testing.T) {
	if _, err := LoadArgs(&Env{}, nil, false); err == nil {
		t.Errorf("no paths and no demo: no error")
	}
}
