package cli

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

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
