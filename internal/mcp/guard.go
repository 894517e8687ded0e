package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxLine bounds one inbound JSON-RPC message (the SDK's own default).
const maxLine = 16 << 20

// The go-sdk ends the connection on the first inbound line it cannot
// decode. guard stands between the client and the SDK: well-formed
// messages pass through; malformed ones, batches (dropped by MCP in
// 2025-06-18) and over-long lines are answered with a JSON-RPC error
// response here, and the server goes on.

// lockedWriter serializes whole messages from the SDK and from guard.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

// guard returns the messages of in that the SDK can decode; it answers
// the others on out.
func guard(in io.Reader, out *lockedWriter) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, tooLong, err := readLine(r)
			if len(bytes.TrimSpace(line)) > 0 || tooLong {
				if msg, bad := screen(line, tooLong); bad != nil {
					if _, werr := out.Write(bad); werr != nil {
						pw.CloseWithError(werr)
						return
					}
				} else if _, werr := pw.Write(append(msg, '\n')); werr != nil {
					return // the SDK stopped reading
				}
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					pw.Close()
				} else {
					pw.CloseWithError(err)
				}
				return
			}
		}
	}()
	return pr
}

// readLine reads up to the next newline, keeping at most maxLine bytes
// (tooLong: the rest was dropped).
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			tooLong = true
		} else {
			line = append(line, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, tooLong, err
		}
	}
}

// screen returns the line to pass on, or the error response to send
// instead.
func screen(line []byte, tooLong bool) (msg, errResp []byte) {
	line = bytes.TrimSpace(line)
	if tooLong {
		return nil, errorResponse(nil, -32600, "message longer than 16 MiB")
	}
	if line[0] == '[' {
		return nil, errorResponse(nil, -32600, "JSON-RPC batches are not supported")
	}
	if !json.Valid(line) {
		return nil, errorResponse(nil, -32700, "parse error: not JSON")
	}
	if _, err := jsonrpc.DecodeMessage(line); err != nil {
		var probe struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(line, &probe)
		return nil, errorResponse(probe.ID, -32600, "invalid request: "+err.Error())
	}
	return line, nil
}

func errorResponse(id json.RawMessage, code int, msg string) []byte {
	if id != nil {
		// Only a string or a number is an id to echo.
		var v any
		if json.Unmarshal(id, &v) != nil {
			id = nil
		} else if _, ok := v.(string); !ok {
			if _, ok := v.(float64); !ok {
				id = nil
			}
		}
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	return append(b, '\n')
}
