// Package mcp serves gpumem's answers to LLM agents as a Model Context
// Protocol server (stdio): each tool runs the gpumem subcommand of its name
// with --json on files under the server's roots, so that a tool's
// structured output is that subcommand's --json.
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Runner runs one gpumem command line (its first argument the subcommand)
// and returns its exit status: cli.Main. The server passes it no terminal
// and reads its output from the buffers.
type Runner func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

// Options configure a Server.
type Options struct {
	// Roots are the directories whose files the tools may read (at least
	// one).
	Roots []string
	// Run runs a subcommand.
	Run Runner
	// Version is gpumem's version, sent to the client.
	Version string
}

// maxOutput bounds one call's output (the --json of a peak with every
// site of a large snapshot stays well under it).
const maxOutput = 64 << 20

// Server is gpumem's MCP server.
type Server struct {
	roots []string // absolute, symlinks resolved
	run   Runner
	sem   chan struct{} // one call at a time: memory is one snapshot's
	srv   *sdk.Server
}

// New makes the server and registers its tools.
func New(o Options) (*Server, error) {
	if len(o.Roots) == 0 {
		return nil, errors.New("no root directory")
	}
	s := &Server{run: o.Run, sem: make(chan struct{}, 1)}
	for _, r := range o.Roots {
		abs, err := filepath.Abs(r)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("--root %s: %v", r, errors.Unwrap(err))
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--root %s: not a directory", r)
		}
		s.roots = append(s.roots, abs)
	}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "gpumem", Version: o.Version}, &sdk.ServerOptions{
		Instructions: "gpumem analyses PyTorch CUDA memory snapshots (torch.cuda.memory._dump_snapshot pickles). " +
			"Start with info or peak on a snapshot; oom explains an out-of-memory; diff compares two runs; steps finds leaks; " +
			"check holds snapshots to budgets. Files must lie under: " + strings.Join(s.roots, ", "),
	})
	for i := range tools {
		t := &tools[i]
		schema, err := jsonschema.ForType(t.input, &jsonschema.ForOptions{
			TypeSchemas: map[reflect.Type]*jsonschema.Schema{reflect.TypeFor[json.RawMessage](): {Type: "object"}},
		})
		if err != nil {
			return nil, fmt.Errorf("tool %s: %v", t.name, err)
		}
		no := false
		s.srv.AddTool(&sdk.Tool{
			Name: t.name, Description: t.about, InputSchema: schema,
			Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, DestructiveHint: &no, OpenWorldHint: &no},
		}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return s.call(ctx, t, req.Params.Arguments), nil
		})
	}
	return s, nil
}

// Serve answers one client over in and out (standard input and output)
// until the client closes in or ctx ends.
func (s *Server) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &lockedWriter{w: out}
	return s.srv.Run(ctx, &sdk.IOTransport{Reader: guard(in, w), Writer: w, MaxLineLength: maxLine + 1})
}

// SDK is the underlying go-sdk server (for tests with in-memory
// transports).
func (s *Server) SDK() *sdk.Server { return s.srv }

// call runs one tool call. Every failure — bad arguments, a path outside
// the roots, a file that does not decode, a panic — is a tool error
// (isError), never the end of the server.
func (s *Server) call(ctx context.Context, t *tool, raw json.RawMessage) (res *sdk.CallToolResult) {
	defer func() {
		if r := recover(); r != nil {
			res = toolError(fmt.Sprintf("internal error: %v", r))
		}
	}()
	args, stdin, err := s.command(t, raw)
	if err != nil {
		return toolError(err.Error())
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return toolError("cancelled")
	}
	defer func() { <-s.sem }()
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = maxOutput, 1<<20
	code := s.run(args, bytes.NewReader(stdin), &stdout, &stderr)
	var v any
	// check exits 1 when a budget fails, with its JSON: a result, not an
	// error.
	if (code == 0 || t.name == "check" && code == 1) && json.Unmarshal(stdout.Bytes(), &v) == nil {
		return result(t.name, stdout.Bytes(), v)
	}
	msg := strings.TrimSpace(stderr.String())
	if code == 2 { // a usage error: its first line says what; the rest is the usage
		msg, _, _ = strings.Cut(msg, "\n")
	}
	if msg == "" {
		msg = fmt.Sprintf("gpumem %s exited with status %d", t.name, code)
	}
	return toolError(msg)
}

// result is a tool's answer: the command's JSON as structured content (an
// array, e.g. one answer per device, as {"results": [...]}: structured
// content is an object), a short summary and the JSON as text.
func result(name string, out []byte, v any) *sdk.CallToolResult {
	structured := v
	if arr, ok := v.([]any); ok {
		structured = map[string]any{"results": arr}
	}
	return &sdk.CallToolResult{
		Content: []sdk.Content{
			&sdk.TextContent{Text: summarize(name, out)},
			&sdk.TextContent{Text: string(bytes.TrimSpace(out))},
		},
		StructuredContent: structured,
	}
}

func toolError(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

// resolve is path as a tool may read it: relative to the first root, a
// regular file, under a root after symbolic links are followed.
func (s *Server) resolve(path string) (string, error) {
	if path == "" {
		return "", errors.New("no file given")
	}
	if strings.ContainsRune(path, 0) {
		return "", errors.New("a path with a NUL byte")
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.roots[0], p)
	}
	p = filepath.Clean(p)
	if !s.under(p) { // before touching the file system: nothing is said about files outside
		return "", fmt.Errorf("%s: outside the allowed roots (%s)", path, strings.Join(s.roots, ", "))
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%s: no such file", path)
	}
	if !s.under(real) {
		return "", fmt.Errorf("%s: a link to outside the allowed roots (%s)", path, strings.Join(s.roots, ", "))
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("%s: no such file", path)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", path)
	}
	return real, nil
}

// under reports whether the clean absolute path p lies in a root.
func (s *Server) under(p string) bool {
	return slices.ContainsFunc(s.roots, func(r string) bool {
		rel, err := filepath.Rel(r, p)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
	})
}

// limitedBuffer is a bytes.Buffer that fails writes past max bytes.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, fmt.Errorf("output over %d MiB: narrow the question (top, device)", b.max>>20)
	}
	return b.Buffer.Write(p)
}
