package cli

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
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
		{"a/b.pickle", errors.New("offset 12: bad opcode"), "a/b.pickle: offset 12: bad opcode"},
		{"a/b.pickle", errors.New("a/b.pickle: offset 12: bad opcode"), "a/b.pickle: offset 12: bad opcode"},
		{"a/b.pickle", errors.New("b.pickle: offset 12: bad opcode"), "b.pickle: offset 12: bad opcode"},
		{"a/b.pickle", &os.PathError{Op: "open", Path: "a/b.pickle", Err: os.ErrNotExist}, "a/b.pickle: no such file"},
	}
	for _, tt := range tests {
		if got := prefixError(tt.path, tt.err).Error(); got != tt.want {
			t.Errorf("prefixError(%q, %q) = %q, want %q", tt.path, tt.err, got, tt.want)
		}
	}
}

func TestLoadArgsNothing(t *testing.T) {
	if _, err := LoadArgs(&Env{}, nil, false); err == nil {
		t.Errorf("no paths and no demo: no error")
	}
}
