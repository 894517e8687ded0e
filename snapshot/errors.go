package snapshot

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/gpumem/gpumem/internal/pickle"
)

// DecodeError is why an input could not be decoded as a snapshot: which
// input, where in it, and what was wrong. Open, Decode and DecodeBytes
// return one for every failure but the operating system's (a missing or
// unreadable file); callers read it with errors.As.
type DecodeError struct {
	// File is the name the decoder was given: a path, "-" for standard
	// input, an upload's name.
	File string
	// Offset is the byte offset in the (decompressed) input where decoding
	// stopped (for a truncated gzip or zstd file, where the file ends), or
	// -1 when the failure has no position (an empty input, a size limit).
	Offset int64
	Err    error
}

// Error is "FILE: what went wrong", the cause naming the offset when it
// has one ("x.pickle: pickle: truncated BINUNICODE at byte 1234: ...").
func (e *DecodeError) Error() string { return e.File + ": " + e.Err.Error() }

func (e *DecodeError) Unwrap() error { return e.Err }

// jsonError is a JSON syntax or shape error at a byte offset.
type jsonError struct {
	off int64
	msg string
}

func (e *jsonError) Error() string {
	return "json at byte " + strconv.FormatInt(e.off, 10) + ": " + e.msg
}

// truncatedError is a gzip or zstd file that ends inside its stream:
// what the decoder made of the decompressed bytes (err) is a consequence.
type truncatedError struct {
	kind    string // gzip or zstd
	at, out int64  // bytes of the file read; bytes decompressed
	err     error
}

func (e *truncatedError) Error() string {
	return fmt.Sprintf("%s stream truncated at byte %d (%d bytes decompressed)", e.kind, e.at, e.out)
}

func (e *truncatedError) Unwrap() error { return e.err }

// decodeError wraps err, a failure decoding the input called name, in a
// DecodeError (err itself when it is one already).
func decodeError(name string, err error) error {
	if err == nil {
		return nil
	}
	var de *DecodeError
	if errors.As(err, &de) {
		return err
	}
	off := int64(-1)
	var pe *pickle.Error
	var je *jsonError
	var te *truncatedError
	var le *LimitError
	switch {
	case errors.As(err, &le):
		// The limit is the whole story, wherever the decoder met it.
		off = le.Offset
		if off < 0 && errors.As(err, &pe) {
			off = pe.Offset // where the stream went past it
		}
		err = le
	case errors.As(err, &te):
		off = te.at
	case errors.As(err, &pe):
		off = pe.Offset
	case errors.As(err, &je):
		off = je.off
	}
	return &DecodeError{File: name, Offset: off, Err: err}
}
