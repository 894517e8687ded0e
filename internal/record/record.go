// Package record runs a command with PyTorch's CUDA memory recording
// switched on in each of its Python processes, and summarizes what they
// wrote.
package record

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/gpumem/gpumem/internal/version"
	"github.com/gpumem/gpumem/python"
)

//go:embed sitecustomize.py
var sitecustomize []byte

// Options are gpumem record's settings; the Python recorder reads them from
// the environment variable GPUMEM_RECORD as JSON.
type Options struct {
	Dir        string `json:"dir"`         // where the files go (absolute once Run starts)
	Steps      []int  `json:"steps"`       // dump after these optimizer steps (1 = after the first step())
	Every      int    `json:"every"`       // dump every K steps (0: no)
	OnOOM      bool   `json:"on_oom"`      // dump from the allocator's OOM observer
	AtExit     bool   `json:"at_exit"`     // dump when the process exits
	MaxEntries int    `json:"max_entries"` // the history's ring size
	Stacks     string `json:"stacks"`      // "python" or "all"
	Ranks      []int  `json:"ranks"`       // record only these ranks; nil: all
	Monitor    int    `json:"monitor"`     // the per-interval monitor's interval in steps (0: off)
	State      string `json:"state"`       // private: where processes report what they did
}

// Validate checks the settings a command line gives; the messages name
// gpumem record's flags.
func (o *Options) Validate() error {
	switch {
	case o.Every < 0:
		return errors.New("--every wants a number of steps >= 1")
	case o.MaxEntries < 1:
		return errors.New("--max-entries wants at least 1")
	case o.Stacks != "python" && o.Stacks != "all":
		return fmt.Errorf("--stacks wants python or all, not %q", o.Stacks)
	case o.Dir == "":
		return errors.New("--dir wants a directory")
	}
	return nil
}

// Env is the variable that carries Options to the recorder.
const Env = "GPUMEM_RECORD"

// Result is how the command ended and what the job's processes did.
type Result struct {
	Dir      string         // where the files went, absolute
	ExitCode int            // the command's exit status; 128+N when signal N killed it
	Signal   syscall.Signal // the signal that killed it, 0 if it exited
	Events   []Event        // what each process reported, in order per process
}

// Event is one line a process of the job appended to its state file.
type Event struct {
	Event   string   `json:"event"` // torch, skip, cuda, file
	PID     int      `json:"pid"`
	Rank    int      `json:"rank"`
	Version string   `json:"version"` // torch: PyTorch's version
	Device  int      `json:"device"`  // cuda
	History *bool    `json:"history"` // cuda: memory history turned on
	Error   string   `json:"error"`   // cuda: why not
	Missing []string `json:"missing"` // cuda: PyTorch features this version lacks
	Kind    string   `json:"kind"`    // file: step, oom, exit, monitor
	Step    int      `json:"step"`    // file: the optimizer step
	Path    string   `json:"path"`    // file
}

// Streams are the command's standard streams; *os.File values are handed
// to it as they are (the job writes to the terminal itself).
type Streams struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// ErrNotFound is returned (wrapped) when the command cannot be found.
var ErrNotFound = errors.New("command not found")

// Run runs argv with recording switched on and waits for it. SIGINT,
// SIGTERM and SIGHUP received meanwhile are forwarded to it, except that
// SIGINT and SIGHUP are not sent again when they came from the terminal,
// which has already delivered them to the command too. An error means the
// command did not run.
func Run(ctx context.Context, o Options, argv []string, st Streams) (*Result, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	o.Dir = dir
	tmp, err := os.MkdirTemp("", "gpumem-record-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// The directory on PYTHONPATH holds only the sitecustomize and the
	// module; the state directory beside it is no importable name.
	o.State = filepath.Join(tmp, "state")
	if err := os.Mkdir(o.State, 0o700); err != nil {
		return nil, err
	}
	pydir := filepath.Join(tmp, "python")
	if err := install(pydir); err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", argv[0], ErrNotFound)
	}
	cmd := exec.CommandContext(ctx, path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = st.Stdin, st.Stdout, st.Stderr
	cmd.Env = Environ(os.Environ(), pydir, string(cfg))

	// A signal ignored when gpumem started (nohup, "cmd &" in a script)
	// stays ignored, for gpumem and for the command: catching it would
	// also give the command its default action back.
	sigs := make(chan os.Signal, 4)
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(s) {
			signal.Notify(sigs, s)
		}
	}
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				if (s == os.Interrupt || s == syscall.SIGHUP) && terminalSent() {
					continue
				}
				cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	r := &Result{Dir: dir}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
	default:
		return nil, err
	}
	r.ExitCode = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = ws.Signal()
		r.ExitCode = 128 + int(r.Signal)
	}
	r.Events = readEvents(o.State)
	return r, nil
}

// Environ is env with the recorder switched on: dir first on PYTHONPATH
// (before what was there), the settings in GPUMEM_RECORD.
func Environ(env []string, dir, cfg string) []string {
	out := make([]string, 0, len(env)+2)
	pp := dir
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PYTHONPATH="):
			if old := kv[len("PYTHONPATH="):]; old != "" {
				pp += string(os.PathListSeparator) + old
			}
		case strings.HasPrefix(kv, Env+"="):
		default:
			out = append(out, kv)
		}
	}
	return append(out, "PYTHONPATH="+pp, Env+"="+cfg)
}

// install writes the sitecustomize and the gpumem module into dir.
func install(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sitecustomize.py"), sitecustomize, 0o644); err != nil {
		return err
	}
	for _, f := range python.Module(version.Get().Version) {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readEvents reads every process's state file (PID.jsonl), ordered by PID
// and then by line; a line that does not parse (a process killed while
// writing) is skipped.
func readEvents(dir string) []Event {
	ents, _ := os.ReadDir(dir)
	var evs []Event
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var ev Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Event != "" {
				evs = append(evs, ev)
			}
		}
		f.Close()
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].PID < evs[j].PID })
	return evs
}

// RankFiles is what one rank wrote.
type RankFiles struct {
	Rank  int
	Files []WrittenFile
}

// WrittenFile is one file written, with its size now.
type WrittenFile struct {
	Kind  string // step, oom, exit, monitor
	Step  int
	Path  string
	Bytes int64
	Lines int // monitor: lines in the JSONL file
}

// Files groups the files the job wrote by rank (ranks ascending; in each,
// step snapshots by step, then oom, exit, monitor). A file gone since
// (removed by the job) is left out.
func (r *Result) Files() []RankFiles {
	by := map[int]*RankFiles{}
	seen := map[string]bool{}
	for _, ev := range r.Events {
		if ev.Event != "file" || seen[ev.Path] {
			continue
		}
		seen[ev.Path] = true
		fi, err := os.Stat(ev.Path)
		if err != nil {
			continue
		}
		w := WrittenFile{Kind: ev.Kind, Step: ev.Step, Path: ev.Path, Bytes: fi.Size()}
		if ev.Kind == "monitor" {
			w.Lines = countLines(ev.Path)
		}
		rf := by[ev.Rank]
		if rf == nil {
			rf = &RankFiles{Rank: ev.Rank}
			by[ev.Rank] = rf
		}
		rf.Files = append(rf.Files, w)
	}
	order := map[string]int{"step": 0, "oom": 1, "exit": 2, "monitor": 3}
	var out []RankFiles
	for _, rf := range by {
		slices.SortStableFunc(rf.Files, func(a, b WrittenFile) int {
			if order[a.Kind] != order[b.Kind] {
				return order[a.Kind] - order[b.Kind]
			}
			if a.Step != b.Step {
				return a.Step - b.Step
			}
			return strings.Compare(a.Path, b.Path)
		})
		out = append(out, *rf)
	}
	slices.SortFunc(out, func(a, b RankFiles) int { return a.Rank - b.Rank })
	return out
}

func countLines(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	buf := make([]byte, 64<<10)
	for {
		k, err := f.Read(buf)
		for _, c := range buf[:k] {
			if c == '\n' {
				n++
			}
		}
		if err != nil {
			return n
		}
	}
}
