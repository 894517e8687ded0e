package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpumem/gpumem/internal/help"
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

// rootList is --root DIR, repeatable.
type rootList []string

func (r *rootList) String() string     { return "" }
func (r *rootList) Set(s string) error { *r = append(*r, s); return nil }

func runMCP(env *Env, args []string) error {
	fs := newFlagSet(env, "mcp", "[--root DIR]... [--max-bytes SIZE]", help.About("mcp"))
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
