package snapshot

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
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

// TestTruncatedCompressed: a gzip or zstd file cut short says so, with
// where the file ends and how much was decompressed, not a pickle error
// at an offset of the decompressed stream.
func TestTruncatedCompressed(t *testing.T) {
	raw := streamsPickle(3000)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	enc, _ := zstd.NewWriter(nil)
	zs := enc.EncodeAll(raw, nil)
	for _, tc := range []struct {
		kind string
		data []byte
	}{{"gzip", gz.Bytes()}, {"zstd", zs}} {
		cut := tc.data[:len(tc.data)/2]
		_, err := DecodeBytes(cut, "t."+tc.kind, nil)
		var de *DecodeError
		want := fmt.Sprintf("t.%s: %s stream truncated at byte %d (", tc.kind, tc.kind, len(cut))
		if !errors.As(err, &de) || !strings.HasPrefix(err.Error(), want) || de.Offset != int64(len(cut)) {
			t.Errorf("%s cut at %d: %v (offset %v), want %q...", tc.kind, len(cut), err, de, want)
		}
	}
}
