package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gpumem/gpumem/internal/cli"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/mcp"
)

// The test binary doubles as gpumem for the TypeScript client, which
// starts a server process: GPUMEM_TEST_MAIN=1 makes it run cli.Main.
func TestMain(m *testing.M) {
	if os.Getenv("GPUMEM_TEST_MAIN") == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func runner(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Main(args, stdin, stdout, stderr)
}

// cliJSON is `gpumem ARGS` (with --json among them), decoded.
func cliJSON(t *testing.T, okCodes []int, args ...string) any {
	t.Helper()
	var out, errs strings.Builder
	code := cli.Main(args, strings.NewReader(""), &out, &errs)
	if !slices.Contains(okCodes, code) {
		t.Fatalf("gpumem %s: exit %d: %s", strings.Join(args, " "), code, errs.String())
	}
	var v any
	if err := json.Unmarshal([]byte(out.String()), &v); err != nil {
		t.Fatalf("gpumem %s: %v", strings.Join(args, " "), err)
	}
	if arr, ok := v.([]any); ok {
		v = map[string]any{"results": arr}
	}
	return v
}

// session starts the server on roots and connects the go-sdk's client to
// it in memory.
func session(t *testing.T, roots ...string) *sdk.ClientSession {
	t.Helper()
	srv, err := mcp.New(mcp.Options{Roots: roots, Run: runner, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go srv.SDK().Run(ctx, st)
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func text(r *sdk.CallToolResult) string {
	var s []string
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			s = append(s, tc.Text)
		}
	}
	return strings.Join(s, "\n")
}

// structured is a result's structured content as plain JSON values.
func structured(t *testing.T, r *sdk.CallToolResult) any {
	t.Helper()
	if r.IsError {
		t.Fatalf("tool error: %s", text(r))
	}
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestToolsEqualCLI: every tool's structured output is its subcommand's
// --json for the same arguments, on real snapshots.
func TestToolsEqualCLI(t *testing.T) {
	dir := corpus.Dir(t)
	small := filepath.Join(dir, "select_n__snapshot__5a601013.pickle")
	oomFile := filepath.Join(dir, "flexgen-Yiyi__oom_snapshot.pickle")
	ctx128 := filepath.Join(dir, "cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle")
	ctx512 := filepath.Join(dir, "cs336-kkaitlyn111__memory_files_memory_ctx512_fullstep_.pickle")
	steps := filepath.Join(dir, "octree-nca__my_snapshot__255fc09a.pickle")
	cs := session(t, dir)
	for _, tt := range []struct {
		tool string
		args map[string]any
		cli  []string
		ok   []int
	}{
		{"info", map[string]any{"files": []string{"select_n__snapshot__5a601013.pickle"}}, []string{"info", "--json", small}, []int{0}},
		{"peak", map[string]any{"files": []string{small}, "top": 3}, []string{"peak", "--json", "--top", "3", small}, []int{0}},
		{"peak", map[string]any{"files": []string{small, steps}, "at": "end", "device": 0}, []string{"peak", "--json", "--at", "end", "--device", "0", small, steps}, []int{0}},
		{"oom", map[string]any{"files": []string{oomFile}}, []string{"oom", "--json", oomFile}, []int{0}},
		{"oom", map[string]any{"files": []string{small}, "gpu": "T4", "top": 2}, []string{"oom", "--json", "--gpu", "T4", "--top", "2", small}, []int{0}},
		{"diff", map[string]any{"a": ctx128, "b": ctx512, "depth": 3}, []string{"diff", "--json", "--depth", "3", ctx128, ctx512}, []int{0}},
		{"steps", map[string]any{"file": steps}, []string{"steps", "--json", steps}, []int{0}},
		{"ranks", map[string]any{"files": []string{ctx128, ctx512, small}}, []string{"ranks", "--json", ctx128, ctx512, small}, []int{0}},
		{"sim", map[string]any{"file": small, "config": "expandable_segments:True"}, []string{"sim", "--json", "--config", "expandable_segments:True", small}, []int{0}},
		{"estimate", map[string]any{"params": "7B", "gpu": "H100", "batch": 2}, []string{"estimate", "--json", "--params", "7B", "--gpu", "H100", "--batch", "2"}, []int{0}},
		{"check", map[string]any{"files": []string{steps}, "max_peak": "15GiB", "max_category": map[string]string{"temporary": "16GiB"}},
			[]string{"check", "--json", "--max-peak", "15GiB", "--max-category", "temporary=16GiB", steps}, []int{1}},
		{"check", map[string]any{"files": []string{ctx512}, "budgets": map[string]any{"baseline": ctx128, "max_increase": "5%"}},
			[]string{"check", "--json", "--baseline", ctx128, "--max-increase", "5%", ctx512}, []int{1}},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			r := call(t, cs, tt.tool, tt.args)
			got, want := structured(t, r), cliJSON(t, tt.ok, tt.cli...)
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Errorf("structured output differs from gpumem %s:\n got %.600s\nwant %.600s", strings.Join(tt.cli, " "), g, w)
			}
			if len(r.Content) != 2 || strings.Contains(text(r), "see the JSON\n") {
				t.Errorf("content: want a summary and the JSON, got %q", text(r))
			}
		})
	}
}

// TestToolErrorsKeepServing: a path outside the roots, a link out of
// them, missing or unknown arguments, an unknown tool, files that are not
// snapshots or are cut short: each an error for its call; the next call
// is answered.
func TestToolErrorsKeepServing(t *testing.T) {
	dir := corpus.Dir(t)
	root := t.TempDir()
	real := filepath.Join(dir, "select_n__snapshot__5a601013.pickle")
	data, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(root, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ok.pickle", data)
	write("cut.pickle", data[:len(data)/2])
	write("junk.pickle", []byte("\x80\x04\x95junk that claims to be a pickle"))
	write("deep.pickle", append([]byte("\x80\x04"), []byte(strings.Repeat("(", 1<<20))...))
	if err := os.Symlink(real, filepath.Join(root, "escape.pickle")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	cs := session(t, root)
	for _, tt := range []struct {
		tool string
		args any
		want string
	}{
		{"peak", map[string]any{"files": []string{real}}, "outside the allowed roots"},
		{"peak", map[string]any{"files": []string{"../" + filepath.Base(root) + "/../etc/passwd"}}, "outside the allowed roots"},
		{"peak", map[string]any{"files": []string{"escape.pickle"}}, "a link to outside the allowed roots"},
		{"peak", map[string]any{"files": []string{"missing.pickle"}}, "missing.pickle: no such file"},
		{"peak", map[string]any{"files": []string{"sub"}}, "sub: not a regular file"},
		{"peak", map[string]any{}, "files: give at least one file"},
		{"diff", map[string]any{"a": "ok.pickle"}, "b: no file given"},
		{"peak", map[string]any{"files": []string{"ok.pickle"}, "colour": "blue"}, `unknown field "colour"`},
		{"peak", map[string]any{"files": "ok.pickle"}, "cannot unmarshal"},
		{"peak", map[string]any{"files": []string{"ok.pickle"}, "at": "tomorrow"}, `--at "tomorrow"`},
		{"peak", map[string]any{"files": []string{"cut.pickle"}}, "cut.pickle"},
		{"peak", map[string]any{"files": []string{"junk.pickle"}}, "junk.pickle"},
		{"peak", map[string]any{"files": []string{"deep.pickle"}}, "deep.pickle"},
		{"check", map[string]any{"files": []string{"ok.pickle"}, "budgets": map[string]any{"baseline": real, "max_increase": "1%"}}, "budgets: baseline: " + real + ": outside the allowed roots"},
		{"check", map[string]any{"files": []string{"ok.pickle"}}, "no budget given"},
		{"sim", map[string]any{"script": "/etc/passwd"}, "script: /etc/passwd: outside the allowed roots"},
	} {
		r := call(t, cs, tt.tool, tt.args)
		if !r.IsError || !strings.Contains(text(r), tt.want) {
			t.Errorf("%s %v: error %v %q; want an error with %q", tt.tool, tt.args, r.IsError, text(r), tt.want)
		}
		if r := call(t, cs, "info", map[string]any{"files": []string{"ok.pickle"}}); r.IsError {
			t.Fatalf("after %s %v the server does not serve: %s", tt.tool, tt.args, text(r))
		}
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "nope"}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("unknown tool: %v", err)
	}
	if r := call(t, cs, "info", map[string]any{"files": []string{"ok.pickle"}}); r.IsError {
		t.Errorf("after an unknown tool: %s", text(r))
	}
}

// TestToolList: the nine tools, each with an object input schema whose
// required fields are the files.
func TestToolList(t *testing.T) {
	cs := session(t, t.TempDir())
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		b, _ := json.Marshal(tl.InputSchema)
		var s struct {
			Type       string         `json:"type"`
			Required   []string       `json:"required"`
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(b, &s); err != nil || s.Type != "object" || len(s.Properties) == 0 {
			t.Errorf("%s: input schema %s", tl.Name, b)
		}
		want := map[string][]string{"info": {"files"}, "peak": {"files"}, "oom": {"files"}, "diff": {"a", "b"}, "steps": {"file"},
			"ranks": {"files"}, "sim": nil, "estimate": nil, "check": {"files"}}[tl.Name]
		slices.Sort(s.Required)
		if !slices.Equal(s.Required, want) {
			t.Errorf("%s: required %v, want %v", tl.Name, s.Required, want)
		}
		if tl.Annotations == nil || !tl.Annotations.ReadOnlyHint {
			t.Errorf("%s: not marked read-only", tl.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"check", "diff", "estimate", "info", "oom", "peak", "ranks", "sim", "steps"}; !slices.Equal(names, want) {
		t.Errorf("tools %v, want %v", names, want)
	}
}

// TestMalformedJSONRPC: over stdio, lines that are not JSON, not JSON-RPC,
// batches and over-long lines are answered with JSON-RPC errors, and the
// server then answers a tool call.
func TestMalformedJSONRPC(t *testing.T) {
	dir := corpus.Dir(t)
	srv, err := mcp.New(mcp.Options{Roots: []string{dir}, Run: runner, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), inR, outW); outW.Close() }()
	responses := bufio.NewScanner(outR)
	responses.Buffer(nil, 64<<20)
	send := func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]any {
		t.Helper()
		ch := make(chan map[string]any, 1)
		go func() {
			var m map[string]any
			if responses.Scan() {
				_ = json.Unmarshal(responses.Bytes(), &m)
			}
			ch <- m
		}()
		select {
		case m := <-ch:
			return m
		case <-time.After(30 * time.Second):
			t.Fatal("no response")
		}
		return nil
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := next(); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, tt := range []struct {
		line string
		code float64
		id   any
	}{
		{`garbage{`, -32700, nil},
		{`{"jsonrpc":"2.0","id":7,`, -32700, nil},
		{`[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, -32600, nil},
		{`{"jsonrpc":"1.0","id":3,"method":"tools/list"}`, -32600, float64(3)},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"tools/list"}`, -32600, nil},
		{`"just a string"`, -32600, nil},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":"zz"}`, -32602, float64(4)},
		{`{"jsonrpc":"2.0","id":5,"method":"no/such/method"}`, -32601, float64(5)},
		{`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, -32602, float64(6)},
		{strings.Repeat("x", 17<<20), -32600, nil},
	} {
		send(tt.line)
		m := next()
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != tt.code || m["id"] != tt.id {
			t.Errorf("%.60s: response %v; want error %v with id %v", tt.line, m, tt.code, tt.id)
		}
	}
	send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"peak","arguments":{"files":["select_n__snapshot__5a601013.pickle"],"top":1}}}`)
	if m := next(); m["id"] != float64(9) || m["result"] == nil {
		t.Errorf("tool call after the bad lines: %v", m)
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil && err != io.EOF {
			t.Logf("serve ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("the server did not end when its input closed")
	}
}

// TestTypeScriptClient drives `gpumem mcp` with the official MCP TypeScript
// SDK (@modelcontextprotocol/sdk from npm, testdata/tsclient: npm ci) in a
// separate process over stdio: initialize, list tools, peak and oom on
// real files (their structured results equal peak --json and oom --json),
// a path outside --root (a tool error; the server keeps serving).
func TestTypeScriptClient(t *testing.T) {
	dir := corpus.Dir(t)
	node, err := exec.LookPath("node")
	client := filepath.Join("testdata", "tsclient")
	_, modErr := os.Stat(filepath.Join(client, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if err != nil || modErr != nil {
		msg := fmt.Sprintf("node (%v) and the TypeScript SDK (%v; run npm ci in %s) are needed", err, modErr, client)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	peakFile := "select_n__snapshot__5a601013.pickle"
	oomFile := "flexgen-Yiyi__oom_snapshot.pickle"
	outside, _ := filepath.Abs("server_test.go")
	// A recorded OOM: internal/analysis's fixture (no real snapshot in
	// the corpus records one).
	fixtures, _ := filepath.Abs(filepath.Join("..", "analysis", "testdata"))
	oomFixture := filepath.Join(fixtures, "oom-shortage.json")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", self, dir+string(filepath.ListSeparator)+fixtures, peakFile, oomFile, oomFixture, outside)
	cmd.Dir = client
	cmd.Env = append(os.Environ(), "GPUMEM_TEST_MAIN=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	type callResult struct {
		IsError    bool     `json:"isError"`
		Structured any      `json:"structured"`
		Text       []string `json:"text"`
		Thrown     string   `json:"thrown"`
	}
	var got struct {
		Server struct {
			Name string `json:"name"`
		} `json:"server"`
		Tools []struct {
			Name      string   `json:"name"`
			InputType string   `json:"inputType"`
			Required  []string `json:"required"`
		} `json:"tools"`
		Peak, OOM, OOMFixture, Outside, UnknownArg, After, UnknownTool, AfterUnknownTool callResult
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Server.Name != "gpumem" || len(got.Tools) != 9 {
		t.Errorf("server %q, %d tools", got.Server.Name, len(got.Tools))
	}
	for _, tl := range got.Tools {
		if tl.InputType != "object" {
			t.Errorf("%s: input schema type %q", tl.Name, tl.InputType)
		}
	}
	for _, c := range []struct {
		name string
		got  callResult
		cli  []string
	}{
		{"peak", got.Peak, []string{"peak", "--json", filepath.Join(dir, peakFile)}},
		{"oom", got.OOM, []string{"oom", "--json", filepath.Join(dir, oomFile)}},
		{"oom with an OOM", got.OOMFixture, []string{"oom", "--json", "--capacity", "100MiB", oomFixture}},
		{"info after the errors", got.After, []string{"info", "--json", filepath.Join(dir, peakFile)}},
		{"peak after an unknown tool", got.AfterUnknownTool, []string{"peak", "--json", "--top", "1", filepath.Join(dir, peakFile)}},
	} {
		want := cliJSON(t, []int{0}, c.cli...)
		if c.got.IsError || !reflect.DeepEqual(c.got.Structured, want) {
			g, _ := json.Marshal(c.got.Structured)
			w, _ := json.Marshal(want)
			t.Errorf("%s: error %v %q; structured\n%.500s\nwant (gpumem %s)\n%.500s", c.name, c.got.IsError, c.got.Text, g, strings.Join(c.cli, " "), w)
		}
	}
	if v, _ := got.OOMFixture.Structured.(map[string]any); v == nil || v["verdict"] != "shortage" {
		t.Errorf("oom on the shortage fixture: %v", got.OOMFixture.Structured)
	}
	if !got.Outside.IsError || len(got.Outside.Text) != 1 || !strings.Contains(got.Outside.Text[0], "outside the allowed roots") {
		t.Errorf("outside --root: %+v", got.Outside)
	}
	if !got.UnknownArg.IsError || !strings.Contains(strings.Join(got.UnknownArg.Text, ""), `unknown field "colour"`) {
		t.Errorf("unknown argument: %+v", got.UnknownArg)
	}
	if !strings.Contains(got.UnknownTool.Thrown+strings.Join(got.UnknownTool.Text, ""), "nknown tool") {
		t.Errorf("unknown tool: %+v", got.UnknownTool)
	}
}

// TestMaxBytes: a snapshot larger than the server's decode limit is that
// call's error; the next call on a smaller one is answered.
func TestMaxBytes(t *testing.T) {
	dir := corpus.Dir(t)
	srv, err := mcp.New(mcp.Options{Roots: []string{dir}, Version: "test",
		Run: func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
			return cli.MainEnv(&cli.Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, MaxBytes: 100 << 10}, args)
		}})
	if err != nil {
		t.Fatal(err)
	}
	ct, st := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.SDK().Run(ctx, st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r := call(t, cs, "peak", map[string]any{"files": []string{"select_n__snapshot__5a601013.pickle"}}) // 1.2 MB
	if !r.IsError || !strings.Contains(text(r), "limit") {
		t.Errorf("over the limit: error %v %q", r.IsError, text(r))
	}
	if r := call(t, cs, "peak", map[string]any{"files": []string{"octree-nca__my_snapshot__255fc09a.pickle"}}); r.IsError { // 67 KB
		t.Errorf("under the limit: %s", text(r))
	}
}
