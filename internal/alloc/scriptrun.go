package alloc

import (
	"errors"
	"fmt"
	"io"
)

// ScriptRun is a script's run: the settings, each step, the final
// statistics, and the error that stopped it (nil: it ran to its end).
type ScriptRun struct {
	Config Config
	Steps  []Step
	Final  MemoryStats
	Err    error
}

// CheckScript checks the request for a script rather than a snapshot:
// only a snapshot records an OOM to take the capacity from.
func (r *SimRequest) CheckScript() error {
	if r.CapacityOOM {
		return errors.New("--capacity oom needs a snapshot with a recorded OOM, not a script")
	}
	return nil
}

// RunScriptFrom parses the script name from r and runs it under config
// (PYTORCH_CUDA_ALLOC_CONF syntax; "" or "default": PyTorch's defaults).
// A script or settings that do not parse are the error; what stops the
// run (an OOM, a free of a name never allocated) is the run's Err, after
// the steps before it. Errors of the script name it.
func RunScriptFrom(r io.Reader, name, config string, o Options) (*ScriptRun, error) {
	cmds, err := ParseScript(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cfg, err := ConfigOrDefault(config)
	if err != nil {
		return nil, err
	}
	steps, a, runErr := RunScript(cmds, cfg, o)
	if runErr != nil {
		runErr = fmt.Errorf("%s: %w", name, runErr)
	}
	return &ScriptRun{Config: cfg, Steps: steps, Final: a.Stats(), Err: runErr}, nil
}
