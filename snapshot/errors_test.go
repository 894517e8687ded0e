package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestDecodeError checks that every decode failure is a *DecodeError with
// the input's name and the byte offset its message names.
func TestDecodeError(t *testing.T) {
	trace := streamsPickle(10)
	tests := []struct {
		name   string
		in     []byte
		offset int64 // -1: none
	}{
		{"truncated.pickle", trace[:len(trace)/2], -2}, // somewhere inside
		{"bad.json", []byte(`{"segments": [1, }`), 17},
		{"empty.pickle", nil, -1},
		{"text.txt", []byte("hello"), -1},
	}
	for _, tt := range tests {
		_, err := DecodeBytes(tt.in, tt.name, nil)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: error %v (%T) is not a *DecodeError", tt.name, err, err)
			continue
		}
		if de.File != tt.name || !strings.HasPrefix(err.Error(), tt.name+": ") {
			t.Errorf("%s: File %q, message %q", tt.name, de.File, err)
		}
		switch {
		case tt.offset == -2:
			if de.Offset <= 0 || de.Offset >= int64(len(tt.in)) || !strings.Contains(err.Error(), fmt.Sprintf("at byte %d", de.Offset)) {
				t.Errorf("%s: Offset %d, message %q", tt.name, de.Offset, err)
			}
		case de.Offset != tt.offset:
			t.Errorf("%s: Offset %d, want %d (%v)", tt.name, de.Offset, tt.offset, err)
		}
		// A second wrap keeps the first.
		if again := decodeError("other", err); again != err {
			t.Errorf("%s: decodeError re-wrapped a DecodeError", tt.name)
		}
	}
}
