package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpumem/gpumem/internal/mcp"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/internal/version"
)

func init() {
	Register(&Command{
		Name:    "mcp",
		Summary: "a Model Context Protocol server (stdio) that lets an LLM agent query snapshots",
		Run:     runMCP,
	})
}

const mcpAbout = `
Serves gpumem to an MCP client (an LLM agent such as Claude Desktop, Claude
Code or an IDE) over standard input and output. Tools: info, peak, oom,
diff, steps, ranks, sim, estimate and check, each taking the flags of the
subcommand of its name as JSON arguments; a tool's structured output is
that subcommand's --json (an array as {"results": [...]}), with a short
text summary.

The tools read only files under the --root directories (default: the
working directory; symbolic links are followed and must stay inside),
write nothing and use no network. Calls run one at a time, each reading
snapshots of at most --max-bytes decoded bytes. A call that fails (a bad
argument, a file outside the roots, a file that is not a snapshot) is an
error result and the server goes on.

Register it with a client as
{"command": "gpumem", "args": ["mcp", "--root", "/runs"]}; see docs/mcp.md.`

// rootList is --root DIR, repeatable.
type rootList []string

func (r *rootList) String() string     { return "" }
func (r *rootList) Set(s string) error { *r = append(*r, s); return nil }

func runMCP(env *Env, args []string) error {
	fs := newFlagSet(env, "mcp", "[--root DIR]... [--max-bytes SIZE]", mcpAbout)
	var roots rootList
	fs.Var(&roots, "root", "a `DIR` whose files the tools may read (repeatable; default: the working directory)")
	maxBytes := fs.String("max-bytes", "8GiB", "the largest decoded snapshot a call reads (`SIZE`), bounding its memory")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError(fs, env.Stderr, "mcp takes no arguments (files are named in the tool calls)")
	}
	limit, err := units.Parse(*maxBytes)
	if err != nil || limit == 0 {
		return usageError(fs, env.Stderr, fmt.Sprintf("--max-bytes %q: want a size such as 8GiB", *maxBytes))
	}
	if len(roots) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		roots = rootList{wd}
	}
	srv, err := mcp.New(mcp.Options{
		Roots:   roots,
		Version: version.Get().Version,
		// The tools run the subcommands in this process, with buffers for
		// their streams: never the server's own standard input and output,
		// which carry the protocol.
		Run: func(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
			return MainEnv(&Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, MaxBytes: int64(limit)}, args)
		},
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = srv.Serve(ctx, env.Stdin, env.Stdout)
	if err != nil && (ctx.Err() != nil || err == io.EOF) {
		return nil // the client went away or we were told to stop
	}
	return err
}
