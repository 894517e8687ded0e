package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/record"
)

func init() {
	Register(&Command{
		Name:    "record",
		Summary: "run a training command with memory snapshots switched on: per rank, at step N, at the OOM, at exit",
		Run:     runRecord,
	})
}

func runRecord(env *Env, args []string) error {
	fs := newFlagSet(env, "record", "[flags] [--] CMD [ARGS...]", help.About("record"))
	o := record.Options{OnOOM: true}
	fs.StringVar(&o.Dir, "dir", "gpumem-snapshots", "write the files to `DIR`")
	fs.Var(o.StepsValue(), "step", "dump after optimizer steps `N[,M,...]` (1 is the first step)")
	fs.IntVar(&o.Every, "every", 0, "dump every `K` optimizer steps")
	fs.BoolVar(&o.OnOOM, "on-oom", true, "dump at the first CUDA out-of-memory error (--on-oom=false: not)")
	fs.BoolVar(&o.AtExit, "at-exit", false, "dump when each process exits")
	fs.IntVar(&o.MaxEntries, "max-entries", 100000, "keep the last `N` trace entries (the history's ring)")
	fs.StringVar(&o.Stacks, "stacks", "python", "stack frames to record: `python` or all (adds C++ frames; deeper, slower, larger)")
	fs.Var(o.RanksValue(), "ranks", "record only ranks `LIST` (0,1,8)")
	fs.Var(o.MonitorValue(), "monitor", "per-interval monitor: after every optimizer step (--monitor=K: every K) append allocated, interval peak (then reset), reserved and total to DIR/rankR-steps.jsonl")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrUsage
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return usageError(fs, env.Stderr, "no command given (gpumem record [flags] -- CMD [ARGS...])")
	}
	if err := o.Validate(); err != nil {
		return usageError(fs, env.Stderr, err.Error())
	}
	shown := o.Dir
	r, err := record.Run(context.Background(), o, argv, record.Streams{Stdin: env.Stdin, Stdout: env.Stdout, Stderr: env.Stderr})
	if errors.Is(err, record.ErrNotFound) {
		fmt.Fprintf(env.Stderr, "gpumem record: %v\n", err)
		return ExitStatus(127) // as a shell says it
	}
	if err != nil {
		return err
	}
	record.WriteSummary(env.Stderr, r, o, shown)
	return ExitStatus(r.ExitCode)
}
