package record

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpumem/gpumem/internal/units"
)

// WriteSummary prints what the job wrote, per rank, and the commands to
// look at it; or one line saying why nothing was recorded. shown is the
// directory as the user gave it (file names are printed under it).
func WriteSummary(w io.Writer, r *Result, o Options, shown string) error {
	files := r.Files()
	status := fmt.Sprintf("the job exited with status %d", r.ExitCode)
	if r.Signal != 0 {
		status = fmt.Sprintf("the job was killed by signal %d (%s)", int(r.Signal), r.Signal)
	}
	if len(files) == 0 {
		_, err := fmt.Fprintf(w, "gpumem record: %s; nothing recorded: %s\n", status, whyNothing(r, o))
		return err
	}
	show := func(p string) string {
		if rel, err := filepath.Rel(r.Dir, p); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(shown, rel)
		}
		return p
	}
	n := 0
	for _, rf := range files {
		n += len(rf.Files)
	}
	fmt.Fprintf(w, "gpumem record: %s; wrote %d file%s to %s:\n", status, n, plural(n), shown)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "rank\tsnapshots\tsize\tsteps\tmonitor\n")
	var stepFiles, oomFiles, exitFiles, monitors, any []string
	lastStep := "" // the first rank's last step snapshot: the longest trace to split into steps
	for i, rf := range files {
		var names, steps []string
		var size int64
		mon := "-"
		for _, f := range rf.Files {
			switch f.Kind {
			case "monitor":
				mon = fmt.Sprintf("%s (%d line%s)", filepath.Base(f.Path), f.Lines, plural(f.Lines))
				monitors = append(monitors, show(f.Path))
				continue
			case "step":
				steps = append(steps, strconv.Itoa(f.Step))
				stepFiles = append(stepFiles, show(f.Path))
				if i == 0 {
					lastStep = show(f.Path)
				}
			case "oom":
				oomFiles = append(oomFiles, show(f.Path))
			case "exit":
				exitFiles = append(exitFiles, show(f.Path))
			}
			any = append(any, show(f.Path))
			names = append(names, filepath.Base(f.Path))
			size += f.Bytes
		}
		sn, sz, ss := "-", "-", "-"
		if len(names) > 0 {
			sn, sz = strings.Join(names, " "), units.Human(uint64(size))
		}
		if len(steps) > 0 {
			ss = strings.Join(steps, ",")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", rf.Rank, sn, sz, ss, mon)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "look at them:\n")
	d := shellQuote(shown)
	switch step := commonStep(files); {
	case len(files) > 1 && step > 0:
		fmt.Fprintf(w, "  gpumem ranks %s/rank*-step%d.pickle\n", d, step)
	case len(files) > 1 && len(exitFiles) > 0:
		fmt.Fprintf(w, "  gpumem ranks %s/rank*-exit.pickle\n", d)
	}
	for _, list := range [][]string{stepFiles, exitFiles, oomFiles} {
		if len(list) > 0 {
			fmt.Fprintf(w, "  gpumem serve %s\n", shellQuote(list[0]))
			break
		}
	}
	if lastStep != "" {
		fmt.Fprintf(w, "  gpumem steps %s\n", shellQuote(lastStep))
	}
	if len(oomFiles) > 0 {
		fmt.Fprintf(w, "  gpumem oom %s\n", shellQuote(oomFiles[0]))
	}
	if len(monitors) == 1 {
		fmt.Fprintf(w, "  gpumem steps %s\n", shellQuote(monitors[0]))
	} else if len(monitors) > 1 {
		fmt.Fprintf(w, "  gpumem ranks %s/*-steps.jsonl\n", d)
	}
	return nil
}

// commonStep is the last step every rank wrote a snapshot for (0: none),
// the moment to compare ranks at.
func commonStep(files []RankFiles) int {
	count := map[int]int{}
	for _, rf := range files {
		seen := map[int]bool{}
		for _, f := range rf.Files {
			if f.Kind == "step" && !seen[f.Step] {
				seen[f.Step] = true
				count[f.Step]++
			}
		}
	}
	best := 0
	for step, n := range count {
		if n == len(files) && step > best {
			best = step
		}
	}
	return best
}

// whyNothing says why the job wrote no file, from what its processes
// reported.
func whyNothing(r *Result, o Options) string {
	torch, skipped := map[int]bool{}, map[int]bool{}
	var cuda, failed []Event
	for _, ev := range r.Events {
		switch ev.Event {
		case "torch":
			torch[ev.PID] = true
		case "skip":
			skipped[ev.Rank] = true
		case "cuda":
			if ev.History != nil && !*ev.History {
				failed = append(failed, ev)
			} else {
				cuda = append(cuda, ev)
			}
		}
	}
	switch {
	case len(torch) == 0:
		return "no process of the job imported torch (Python run with -I, -E or -S does not load gpumem)"
	case len(cuda) == 0 && len(failed) > 0:
		return fmt.Sprintf("memory history could not be turned on (rank %d: %s)", failed[0].Rank, failed[0].Error)
	case len(cuda) == 0 && len(skipped) > 0:
		return fmt.Sprintf("no process of the ranks in --ranks used CUDA (ranks skipped: %s)", joinRanks(skipped))
	case len(cuda) == 0:
		return fmt.Sprintf("%d process%s imported torch, none used CUDA", len(torch), pluralEs(len(torch)))
	}
	ranks := map[int]bool{}
	for _, ev := range cuda {
		ranks[ev.Rank] = true
	}
	var wanted []string
	if len(o.Steps) > 0 || o.Every > 0 {
		wanted = append(wanted, "no requested step was reached")
	}
	if o.OnOOM {
		wanted = append(wanted, "there was no OOM")
	}
	if !o.AtExit {
		wanted = append(wanted, "--at-exit was not given")
	}
	if len(cuda[0].Missing) > 0 {
		wanted = append(wanted, "this PyTorch lacks "+strings.Join(cuda[0].Missing, " and "))
	}
	return fmt.Sprintf("rank%s %s used CUDA, but %s", plural(len(ranks)), joinRanks(ranks), strings.Join(wanted, ", "))
}

func joinRanks(m map[int]bool) string {
	var rs []int
	for r := range m {
		rs = append(rs, r)
	}
	sort.Ints(rs)
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, ",")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func pluralEs(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}

// shellQuote quotes s for a POSIX shell when it needs it; a trailing glob
// is the caller's.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+,@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
