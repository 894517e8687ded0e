package mcp

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testServer is a server on a temporary root holding a.pickle and
// b.pickle, whose runner is never called.
func testServer(t testing.TB) (*Server, string) {
	t.Helper()
	root := t.TempDir()
	for _, n := range []string{"a.pickle", "b.pickle"} {
		if err := os.WriteFile(filepath.Join(root, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(Options{Roots: []string{root}, Run: func([]string, io.Reader, io.Writer, io.Writer) int {
		panic("not called")
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s, s.roots[0]
}

func toolNamed(name string) *tool {
	for i := range tools {
		if tools[i].name == name {
			return &tools[i]
		}
	}
	panic(name)
}

// TestCommand: arguments become the subcommand's flags, "--" and the
// resolved files; flag values are attached with "=" so that none is read
// as a flag.
func TestCommand(t *testing.T) {
	s, root := testServer(t)
	a, b := filepath.Join(root, "a.pickle"), filepath.Join(root, "b.pickle")
	for _, tt := range []struct {
		tool, args string
		want       []string
		stdin      string
	}{
		{"peak", `{"files":["a.pickle"]}`, []string{"peak", "--json", "--", a}, ""},
		{"peak", `{"files":["a.pickle","` + b + `"],"at":"-e1","top":0,"device":0}`,
			[]string{"peak", "--json", "--at=-e1", "--top=0", "--device=0", "--", a, b}, ""},
		{"diff", `{"a":"a.pickle","b":"./b.pickle","device_b":1}`, []string{"diff", "--json", "--device-b=1", "--", a, b}, ""},
		{"oom", `{"files":["a.pickle"],"no_replay":true,"stream":-1}`, []string{"oom", "--json", "--no-replay=true", "--stream=-1", "--", a}, ""},
		{"sim", `{"script":"a.pickle","fraction":0.5,"from_empty":false}`, []string{"sim", "--json", "--script=" + a, "--fraction=0.5", "--from-empty=false", "--"}, ""},
		{"check", `{"files":["a.pickle"],"max_category":{"temporary":"1GiB","activation":"2GiB"}}`,
			[]string{"check", "--json", "--max-category=activation=2GiB", "--max-category=temporary=1GiB", "--", a}, ""},
		{"check", `{"files":["a.pickle"],"budgets":{"max_peak":"1GiB","ranks":{"1":{"baseline":"b.pickle","max_increase":"5%"}}}}`,
			[]string{"check", "--json", "--budgets=-", "--", a}, `{"max_peak":1073741824,"ranks":{"1":{"baseline":"` + b + `","max_increase":"5%"}}}`},
		{"estimate", `{"params":"7B","gpu":"H100"}`, []string{"estimate", "--json", "--params=7B", "--gpu=H100", "--"}, ""},
		{"steps", `{"file":"a.pickle"}`, []string{"steps", "--json", "--", a}, ""},
	} {
		got, stdin, err := s.command(toolNamed(tt.tool), json.RawMessage(tt.args))
		if err != nil || !slices.Equal(got, tt.want) || string(stdin) != tt.stdin {
			t.Errorf("%s %s:\n got %q %s %v\nwant %q %s", tt.tool, tt.args, got, stdin, err, tt.want, tt.stdin)
		}
	}
}

// TestResolve: files under the root, by relative or absolute path; not
// outside it, by "..", by a link, or as a directory.
func TestResolve(t *testing.T) {
	s, root := testServer(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.pickle", filepath.Join(root, "inside-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want, err string }{
		{"a.pickle", filepath.Join(root, "a.pickle"), ""},
		{filepath.Join(root, "a.pickle"), filepath.Join(root, "a.pickle"), ""},
		{"d/../a.pickle", filepath.Join(root, "a.pickle"), ""},
		{"inside-link", filepath.Join(root, "a.pickle"), ""},
		{"../" + filepath.Base(outside) + "/secret", "", "outside the allowed roots"},
		{filepath.Join(outside, "secret"), "", "outside the allowed roots"},
		{filepath.Join(outside, "missing"), "", "outside the allowed roots"},
		{"/", "", "outside the allowed roots"},
		{"link", "", "a link to outside"},
		{"d", "", "not a regular file"},
		{"", "", "no file given"},
		{"-", "", "no such file"},
		{"a.pickle\x00", "", "NUL"},
		{root + "x/a.pickle", "", "outside the allowed roots"},
	} {
		got, err := s.resolve(tt.path)
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("resolve(%q) = %q, %v; want %q, %q", tt.path, got, err, tt.want, tt.err)
		}
	}
}

// TestScreen: what the SDK would die on is answered here.
func TestScreen(t *testing.T) {
	for _, tt := range []struct {
		line string
		pass bool
		want string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, true, ""},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, true, ""},
		{`{"jsonrpc":"2.0","id":"x","result":{}}`, true, ""},
		{`nope`, false, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error: not JSON"}}`},
		{`[]`, false, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"JSON-RPC batches are not supported"}}`},
		{`{"jsonrpc":"2.0","id":"q"}`, true, ""}, // a response to nothing: the SDK ignores it
		{`{"jsonrpc":"2.0","id":[1]}`, false, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,`},
		{`{"id":2,"method":"x"}`, false, `{"jsonrpc":"2.0","id":2,"error":{"code":-32600,`},
	} {
		msg, resp := screen([]byte(tt.line), false)
		if tt.pass != (resp == nil) || tt.pass && string(msg) != tt.line || !tt.pass && !strings.HasPrefix(string(resp), tt.want) {
			t.Errorf("%s: pass %q, answer %q; want pass %v, answer %s", tt.line, msg, resp, tt.pass, tt.want)
		}
	}
}

// FuzzToolArguments: any arguments for any tool decode to a command line
// or an argument error, never a panic; a command line always has --json,
// "--" before the files, only the tool's flags, and only files under the
// root.
func FuzzToolArguments(f *testing.F) {
	seeds := []string{
		`{"files":["a.pickle"]}`, `{"files":["../x"]}`, `{"a":"a.pickle","b":"b.pickle","at":"e3"}`,
		`{"file":"a.pickle","device":1}`, `{"files":["a.pickle"],"budgets":{"baseline":"b.pickle","max_increase":"5%"}}`,
		`{"files":["a.pickle"],"max_category":{"x=y":"1"}}`, `{"script":"a.pickle","fraction":1e308}`,
		`null`, `[]`, `{"files":null}`, `{"files":["a.pickle"],"top":-1}`, `{"params":"7B","zero":3}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	s, root := testServer(f)
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		tl := &tools[int(which)%len(tools)]
		args, _, err := s.command(tl, raw)
		if err != nil {
			if _, ok := err.(*argError); !ok {
				t.Fatalf("%s %q: error %T %v", tl.name, raw, err, err)
			}
			return
		}
		if len(args) < 3 || args[0] != tl.name || args[1] != "--json" {
			t.Fatalf("%s %q: %q", tl.name, raw, args)
		}
		flags := map[string]bool{}
		for i := 0; i < tl.input.NumField(); i++ {
			if fl, ok := tl.input.Field(i).Tag.Lookup("flag"); ok {
				flags["--"+fl] = true
			}
		}
		flags["--budgets"] = true
		dash := slices.Index(args, "--")
		if dash < 0 {
			t.Fatalf("%s %q: no --: %q", tl.name, raw, args)
		}
		for _, a := range args[2:dash] {
			name, val, _ := strings.Cut(a, "=")
			if !flags[name] {
				t.Fatalf("%s %q: flag %q not the tool's", tl.name, raw, a)
			}
			if name == "--script" || name == "--config" && tl.name == "estimate" || name == "--check" || name == "--baseline" {
				if !strings.HasPrefix(val, root+string(filepath.Separator)) {
					t.Fatalf("%s %q: file %q outside the root", tl.name, raw, val)
				}
			}
		}
		for _, p := range args[dash+1:] {
			if !strings.HasPrefix(p, root+string(filepath.Separator)) {
				t.Fatalf("%s %q: file %q outside the root", tl.name, raw, p)
			}
		}
	})
}

// FuzzScreen: any inbound line is passed on only when the SDK can decode
// it, else answered with one JSON-RPC error; never a panic.
func FuzzScreen(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"x"}`, `[1]`, `{"id":{}}`, `nope`, `{"jsonrpc":"2.0","id":1e400,"method":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if len(strings.TrimSpace(string(line))) == 0 {
			return // guard skips blank lines
		}
		msg, resp := screen(line, false)
		if (msg == nil) == (resp == nil) {
			t.Fatalf("%q: pass %q and answer %q", line, msg, resp)
		}
		if resp != nil {
			var r struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(resp, &r); err != nil || r.JSONRPC != "2.0" || r.Error == nil || r.ID == nil {
				t.Fatalf("%q: answer %q", line, resp)
			}
		}
	})
}
