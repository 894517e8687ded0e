"""Record PyTorch CUDA memory snapshots from inside a training job.

gpumem is a native binary that reads PyTorch's CUDA memory snapshots; this
module is its recorder, the part that runs inside the job's own Python
process. ``gpumem record -- CMD`` loads it into every Python process of CMD
(through a ``sitecustomize``); users who prefer code call it themselves::

    import gpumem

    gpumem.dump_on_oom("gpumem-snapshots")           # rank{R}-oom.pickle at an OOM
    mon = gpumem.Monitor(snapshot_step=100)          # per-interval peaks
    for step in range(steps):
        train_step()
        mon.report(step)

    with gpumem.record("run.pickle"):                # history on, dumped at exit
        train_a_few_steps()

``import gpumem`` needs only the standard library: torch is imported when a
function that needs it is called. Everything here is best effort, as a
recorder inside someone else's job must be: a failure (an old PyTorch, no
CUDA, a full disk) prints one line starting with ``gpumem:`` to standard
error and the job goes on.

The names of the PyTorch functions used, and their signatures, are those of
``torch/cuda/memory.py``, ``torch/optim/optimizer.py`` and
``torch._C._cuda_attach_out_of_memory_observer`` in PyTorch 2.x; PyTorch 1.13
and 2.0 take ``_record_memory_history``'s older arguments, and lack the
global optimizer step hook (1.13) and the OOM observer (1.13).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: this module loads at every interpreter start
    from typing import Any, Callable, Dict, Iterable, List, Optional

__all__ = ["Monitor", "record", "dump_on_oom", "memory_stats", "__version__"]

try:
    from ._version import version as __version__
except ImportError:  # a source checkout: the wheel and `gpumem record` write _version.py
    __version__ = "devel"

# Defaults shared by the module API and `gpumem record`.
DEFAULT_MAX_ENTRIES = 100000
DEFAULT_STACKS = "python"

_warned = set()  # type: set


def _warn(key: str, msg: str) -> None:
    """Print one ``gpumem:`` line to stderr, once per key per process."""
    if key in _warned:
        return
    _warned.add(key)
    try:
        sys.stderr.write("gpumem: %s\n" % msg)
        sys.stderr.flush()
    except Exception:
        pass


def _rank() -> int:
    """The process's rank: RANK (torchrun, accelerate, deepspeed), else
    LOCAL_RANK, else 0. Not the device: with CUDA_VISIBLE_DEVICES every rank
    may be cuda:0."""
    for name in ("RANK", "LOCAL_RANK"):
        v = os.environ.get(name, "").strip()
        if v:
            try:
                return int(v)
            except ValueError:
                pass
    return 0


def _torch():
    import torch  # deferred: import gpumem must work without PyTorch

    return torch


def _err(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return "%s: %s" % (type(e).__name__, s[0] if s else "")


# ---------------------------------------------------------------------------
# Memory history and snapshots


_history = {"on": False, "ours": False}


def _history_on(max_entries: int = DEFAULT_MAX_ENTRIES, stacks: str = DEFAULT_STACKS) -> None:
    """Turn on the allocator's history (a trace of every alloc/free with
    stacks) with whichever arguments this PyTorch takes. Raises on failure.

    PyTorch >= 2.1: ``_record_memory_history(enabled="all", context="all",
    stacks="all", max_entries=sys.maxsize, device=None, ...)``;
    PyTorch 2.0: ``_record_memory_history(enabled: bool, record_context=True,
    trace_alloc_max_entries=1, trace_alloc_record_context=False, device=None,
    record_context_cpp=False)``; PyTorch 1.13: ``(enabled: bool, device=None)``.
    """
    if stacks not in ("python", "all"):
        raise ValueError("stacks must be 'python' or 'all', not %r" % (stacks,))
    import inspect

    rec = _torch().cuda.memory._record_memory_history
    try:
        params = inspect.signature(rec).parameters
    except (TypeError, ValueError):
        params = {}
    if "max_entries" in params:
        rec("all", context="all", stacks=stacks, max_entries=int(max_entries))
    elif "trace_alloc_max_entries" in params:
        rec(
            True,
            record_context=True,
            trace_alloc_max_entries=int(max_entries),
            trace_alloc_record_context=True,
            record_context_cpp=stacks == "all",
        )
    else:
        rec(True)
    _history["on"] = True


def _history_off() -> None:
    rec = _torch().cuda.memory._record_memory_history
    import inspect

    try:
        params = inspect.signature(rec).parameters
    except (TypeError, ValueError):
        params = {}
    rec(None) if "max_entries" in params else rec(False)
    _history["on"] = False


def _write_pickle(obj: Any, path: str, overwrite: bool) -> str:
    """Pickle obj to path atomically (a temporary file in the same directory,
    then a rename), so a reader never sees half a file. Without overwrite an
    existing file is kept and the next free name (NAME.1.pickle, ...) is
    taken. Returns the path written."""
    import pickle

    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    try:
        with open(tmp, "wb") as f:
            # Protocol 4, what torch.cuda.memory._dump_snapshot writes on
            # Python 3.8-3.13: pytorch.org/memory_viz refuses anything above 4.
            pickle.dump(obj, f, protocol=4)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, path)
            return path
        stem, ext = os.path.splitext(path)
        for n in range(1000):
            target = path if n == 0 else "%s.%d%s" % (stem, n, ext)
            try:
                os.link(tmp, target)  # fails if target exists: never overwrites
                return target
            except FileExistsError:
                continue
            except OSError:
                # No hard links on this file system: reserve the name, then
                # rename over the empty reservation.
                try:
                    fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                except FileExistsError:
                    continue
                os.close(fd)
                os.replace(tmp, target)
                return target
        raise FileExistsError("%s and 999 numbered names after it exist" % path)
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _new_file(path: str) -> str:
    """Create path, empty, or the next free name (NAME.1.jsonl, ...) when it
    exists: a monitor file of an earlier run is not appended to."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    stem, ext = os.path.splitext(path)
    for n in range(1000):
        target = path if n == 0 else "%s.%d%s" % (stem, n, ext)
        try:
            os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return target
        except FileExistsError:
            continue
    raise FileExistsError("%s and 999 numbered names after it exist" % path)


def _dump(path: str, overwrite: bool = False) -> str:
    """Write torch.cuda.memory._snapshot() (the dict _dump_snapshot pickles)
    to path; returns the path written."""
    snap = _torch().cuda.memory._snapshot()
    return _write_pickle(snap, path, overwrite)


def _snapshot_name(directory: str, rank: int, what: str) -> str:
    return os.path.join(directory, "rank%d-%s.pickle" % (rank, what))


# ---------------------------------------------------------------------------
# The public API


def memory_stats(device: Any = None) -> Dict[str, Any]:
    """The seed's four quantities for one device, in bytes: allocated (live
    tensors now), peak (the most allocated since the last reset of the
    peak statistics), reserved (held by the caching allocator) and total
    (the device's memory), with utilization = peak / total."""
    cuda = _torch().cuda
    if device is None:
        device = cuda.current_device()
    total = int(cuda.get_device_properties(device).total_memory)
    peak = int(cuda.max_memory_allocated(device))
    return {
        "device": _device_index(device),
        "allocated_bytes": int(cuda.memory_allocated(device)),
        "peak_allocated_bytes": peak,
        "reserved_bytes": int(cuda.memory_reserved(device)),
        "total_bytes": total,
        "utilization": (peak / total) if total else 0.0,
    }


def _device_index(device: Any) -> int:
    if isinstance(device, int):
        return device
    idx = getattr(device, "index", None)
    if isinstance(idx, int):
        return idx
    if isinstance(device, str) and ":" in device:
        try:
            return int(device.rsplit(":", 1)[1])
        except ValueError:
            pass
    try:
        return int(_torch().cuda.current_device())
    except Exception:
        return 0


def _gib(n: int) -> str:
    return "%.1f GiB" % (n / 1024.0**3)


def _stderr_log(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


class Monitor:
    """Per-interval GPU memory monitor with peak reset, the training-side
    twin of ``gpumem watch``.

    ``report(step)`` reads allocated, peak, reserved and total memory, logs
    one line, appends one JSON line to ``jsonl`` (if given), dumps a snapshot
    at ``snapshot_step`` and then resets PyTorch's peak statistics, so that
    the next report's peak is that interval's, not the all-time peak: a
    spike at step 200 is not hidden behind one at step 100.

    ``interval``: report only when ``step % interval == 0``. ``log``: a
    callable taking the line (default: standard error), or None for no line.
    ``snapshot_step``: memory history is turned on when the monitor is made,
    so the snapshot holds the trace of the steps before it. The reset is
    global (``torch.cuda.reset_peak_memory_stats``): other readers of
    ``max_memory_allocated`` see the interval's peak too.
    """

    def __init__(
        self,
        device: Any = None,
        snapshot_step: Optional[int] = None,
        snapshot_dir: str = "memory_snapshots",
        interval: int = 1,
        log: Optional[Callable[[str], None]] = _stderr_log,
        jsonl: Optional[str] = None,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        stacks: str = DEFAULT_STACKS,
    ) -> None:
        if interval < 1:
            raise ValueError("interval must be at least 1")
        self.device = device
        self.snapshot_step = snapshot_step
        self.snapshot_dir = snapshot_dir
        self.interval = int(interval)
        self.log = log
        self.jsonl = jsonl
        self.snapshots = []  # type: List[str]
        self._snapped = False
        if snapshot_step is not None and not _history["on"]:
            try:
                _history_on(max_entries, stacks)
                _history["ours"] = True
            except Exception as e:
                _warn("history", "cannot turn on memory history (%s): the step %d snapshot will hold the state only" % (_err(e), snapshot_step))

    def report(self, step: int) -> Optional[Dict[str, Any]]:
        """Report the interval ending at step (see the class); returns the
        figures, or None when step is not a reporting step or reading them
        failed (one warning)."""
        if step % self.interval != 0:
            return None
        try:
            st = memory_stats(self.device)
        except Exception as e:
            _warn("monitor", "cannot read memory statistics (%s): not monitoring" % _err(e))
            return None
        st = dict(st, step=int(step), rank=_rank())
        if self.log is not None:
            self.log(
                "[step %d] GPU mem: %s allocated, %s peak, %s reserved / %s total (%.0f%%)"
                % (step, _gib(st["allocated_bytes"]), _gib(st["peak_allocated_bytes"]), _gib(st["reserved_bytes"]), _gib(st["total_bytes"]), 100 * st["utilization"])
            )
        if self.jsonl is not None:
            self._append(st)
        if self.snapshot_step is not None and step == self.snapshot_step and not self._snapped:
            self._snapped = True
            try:
                self.snapshots.append(_dump(_snapshot_name(self.snapshot_dir, _rank(), "step%d" % step)))
            except Exception as e:
                _warn("snapshot", "cannot write the step %d snapshot (%s); training goes on" % (step, _err(e)))
        try:
            _torch().cuda.reset_peak_memory_stats(self.device)
        except Exception as e:
            _warn("reset", "cannot reset the peak statistics (%s): later peaks are all-time peaks" % _err(e))
        return st

    def _append(self, st: Dict[str, Any]) -> None:
        import json
        import time

        line = {"gpumem_monitor": 1, "rank": st["rank"], "device": st["device"], "step": st["step"], "time": round(time.time(), 6)}
        for k in ("allocated_bytes", "peak_allocated_bytes", "reserved_bytes", "total_bytes", "utilization"):
            line[k] = st[k]
        try:
            d = os.path.dirname(self.jsonl)
            if d:
                os.makedirs(d, exist_ok=True)
            # One write per line in append mode: lines of concurrent writers do not interleave.
            with open(self.jsonl, "a") as f:
                f.write(json.dumps(line, separators=(",", ":")) + "\n")
        except Exception as e:
            _warn("jsonl", "cannot append to %s (%s)" % (self.jsonl, _err(e)))


class record:
    """Context manager: memory history on while the block runs, then a
    snapshot written to path (also when the block raises), then history off
    again unless it was on before::

        with gpumem.record("run.pickle", max_entries=100_000):
            for _ in range(3):
                train_step()

    The file is written atomically and replaces an existing one. ``path``
    after the block is where it went (None if writing failed: one warning).
    """

    def __init__(self, path: str, max_entries: int = DEFAULT_MAX_ENTRIES, stacks: str = DEFAULT_STACKS) -> None:
        self.path = path  # type: Optional[str]
        self.max_entries = max_entries
        self.stacks = stacks
        self._turned_on = False

    def __enter__(self) -> "record":
        if not _history["on"]:
            try:
                _history_on(self.max_entries, self.stacks)
                self._turned_on = True
            except Exception as e:
                _warn("history", "cannot turn on memory history (%s): the snapshot will hold the state only" % _err(e))
        return self

    def __exit__(self, *exc: Any) -> bool:
        try:
            self.path = _dump(self.path, overwrite=True)
        except Exception as e:
            _warn("snapshot", "cannot write %s (%s)" % (self.path, _err(e)))
            self.path = None
        if self._turned_on:
            try:
                _history_off()
            except Exception:
                pass
        return False


_oom = {"attached": False, "dir": None, "written": []}  # type: Dict[str, Any]


def dump_on_oom(directory: str = "gpumem-snapshots", max_entries: int = DEFAULT_MAX_ENTRIES, stacks: str = DEFAULT_STACKS) -> bool:
    """At the first CUDA out-of-memory error of this process, write
    ``directory/rank{R}-oom.pickle`` from the allocator's OOM observer,
    before the OutOfMemoryError propagates, while the trace still holds what
    led to it. Turns memory history on if it is not. Returns whether the
    observer is attached (PyTorch >= 2.0 has it; one warning otherwise)."""
    torch = _torch()
    if not _history["on"]:
        try:
            _history_on(max_entries, stacks)
            _history["ours"] = True
        except Exception as e:
            _warn("history", "cannot turn on memory history (%s): an OOM snapshot will hold the state only" % _err(e))
    _oom["dir"] = directory
    if _oom["attached"]:
        return True
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        _warn("oom", "PyTorch %s has no OOM observer (torch._C._cuda_attach_out_of_memory_observer, PyTorch >= 2.0): no snapshot at an OOM" % getattr(torch, "__version__", "?"))
        return False
    try:
        attach(_on_oom)
    except Exception as e:
        _warn("oom", "cannot attach the OOM observer (%s): no snapshot at an OOM" % _err(e))
        return False
    _oom["attached"] = True
    return True


def _on_oom(device: int, alloc: int, device_allocated: int, device_free: int) -> None:
    # The allocator calls its observers with (device, alloc,
    # device_allocated, device_free) before raising OutOfMemoryError, and
    # may do so several times for one failure (convolutions retry with less
    # workspace): the first call's state is the one that led to it.
    if _oom["written"]:
        return
    try:
        path = _dump(_snapshot_name(_oom["dir"], _rank(), "oom"))
        _oom["written"].append(path)
        _recorder_event("file", kind="oom", path=path, device=device, request_bytes=alloc)
    except Exception as e:
        _oom["written"].append(None)
        _warn("oom-dump", "cannot write the OOM snapshot (%s)" % _err(e))


# ---------------------------------------------------------------------------
# `gpumem record`: configured by the environment, started by sitecustomize


ENV = "GPUMEM_RECORD"  # JSON: the recorder's settings (see _Recorder)

_recorder = None  # type: Optional[_Recorder]


def _recorder_event(event: str, **kw: Any) -> None:
    if _recorder is not None:
        _recorder.event(event, **kw)


class _Recorder:
    """What ``gpumem record`` switches on in each process of the job.

    Settings (the JSON in GPUMEM_RECORD, written by the binary): dir, steps
    (list), every, on_oom, at_exit, max_entries, stacks, ranks (list or
    null), monitor (interval, 0 = off), state (a private directory where each
    process appends what it did to PID.jsonl, for the binary's summary).
    """

    def __init__(self, cfg: Dict[str, Any]) -> None:
        self.dir = cfg.get("dir") or "gpumem-snapshots"
        self.steps = set(int(s) for s in cfg.get("steps") or [])
        self.every = int(cfg.get("every") or 0)
        self.on_oom = bool(cfg.get("on_oom", True))
        self.at_exit = bool(cfg.get("at_exit", False))
        self.max_entries = int(cfg.get("max_entries") or DEFAULT_MAX_ENTRIES)
        self.stacks = cfg.get("stacks") or DEFAULT_STACKS
        ranks = cfg.get("ranks")
        self.ranks = None if ranks is None else set(int(r) for r in ranks)
        self.monitor_every = int(cfg.get("monitor") or 0)
        self.state = cfg.get("state")
        self.rank = _rank()
        self.step = 0
        self.optimizer = None  # a weak reference to the optimizer whose steps are counted
        self.monitor = None  # type: Optional[Monitor]
        self.monitor_announced = False
        self.cuda = False

    def wants_steps(self) -> bool:
        return bool(self.steps or self.every or self.monitor_every)

    def event(self, event: str, **kw: Any) -> None:
        if not self.state:
            return
        import json

        kw.update(event=event, pid=os.getpid(), rank=self.rank)
        try:
            with open(os.path.join(self.state, "%d.jsonl" % os.getpid()), "a") as f:
                f.write(json.dumps(kw, separators=(",", ":")) + "\n")
        except Exception:
            pass  # the summary misses it; the job must not

    def torch_imported(self, torch: Any) -> None:
        """Runs right after ``import torch`` finished: wait for CUDA. Only a
        process that initializes CUDA (the first tensor on the GPU) records;
        the launcher, DataLoader workers and CPU tools never make a CUDA
        context because of gpumem."""
        self.event("torch", version=getattr(torch, "__version__", "?"))
        if self.ranks is not None and self.rank not in self.ranks:
            self.event("skip")
            return
        lazy = getattr(torch.cuda, "_lazy_call", None)
        if lazy is None:
            _warn("lazy", "PyTorch %s has no torch.cuda._lazy_call: not recording" % torch.__version__)
            return
        # _lazy_call runs the function at once if CUDA is already
        # initialized, else queues it for torch.cuda._lazy_init, which runs
        # it right after the CUDA context is made, before the first
        # allocation. A queued function that raises breaks CUDA's
        # initialization for the job, so cuda_initialized never raises.
        lazy(self.cuda_initialized)

    def cuda_initialized(self) -> None:
        try:
            self._start()
        except BaseException as e:  # never into torch.cuda._lazy_init
            _warn("start", "rank %d: cannot record (%s); the job goes on without recording" % (self.rank, _err(e)))

    def _start(self) -> None:
        torch = _torch()
        self.cuda = True
        try:
            device = int(torch.cuda.current_device())
        except Exception:
            device = -1
        try:
            _history_on(self.max_entries, self.stacks)
            _history["ours"] = True
        except Exception as e:
            self.event("cuda", device=device, history=False, error=_err(e))
            _warn("history", "rank %d: cannot turn on memory history (%s); the job goes on without recording" % (self.rank, _err(e)))
            return
        missing = []
        step_hook = getattr(getattr(torch.optim, "optimizer", None), "register_optimizer_step_post_hook", None)
        # Each part on its own: one that fails (one warning) leaves the others.
        if self.wants_steps():
            if step_hook is None:
                missing.append("the global optimizer step hook (torch.optim.optimizer.register_optimizer_step_post_hook)")
            else:
                try:
                    step_hook(self._optimizer_stepped)
                except Exception as e:
                    step_hook = None
                    _warn("step", "rank %d: cannot register the optimizer step hook (%s): no step snapshots" % (self.rank, _err(e)))
        if self.on_oom:
            attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
            if attach is None:
                missing.append("the OOM observer (torch._C._cuda_attach_out_of_memory_observer)")
            else:
                _oom["dir"] = self.dir
                try:
                    attach(_on_oom)
                    _oom["attached"] = True
                except Exception as e:
                    _warn("oom", "rank %d: cannot attach the OOM observer (%s): no snapshot at an OOM" % (self.rank, _err(e)))
        if self.at_exit:
            import atexit

            atexit.register(self._exit)
        if self.monitor_every and step_hook is not None:
            try:
                jsonl = _new_file(os.path.join(self.dir, "rank%d-steps.jsonl" % self.rank))
                self.monitor = Monitor(device=None, interval=self.monitor_every, log=None, jsonl=jsonl)
            except Exception as e:
                _warn("jsonl", "rank %d: cannot create the monitor file in %s (%s): not monitoring" % (self.rank, self.dir, _err(e)))
        self.event("cuda", device=device, history=True, missing=missing)
        if missing:
            left = [w for w, on in (("at exit", self.at_exit), ("at an OOM", self.on_oom and not any("OOM" in m for m in missing))) if on]
            _warn(
                "missing",
                "rank %d: PyTorch %s lacks %s; recording %s"
                % (self.rank, torch.__version__, " and ".join(missing), ("only " + " and ".join(left)) if left else "nothing (try --at-exit)"),
            )

    def _optimizer_stepped(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        # The global post hook, hook(optimizer, args, kwargs), runs after
        # every optimizer.step(). Steps are those of the first optimizer
        # that steps: a job with two optimizers (a GAN) steps each once per
        # training step.
        try:
            import weakref

            if self.optimizer is None:
                self.optimizer = weakref.ref(optimizer)
            elif self.optimizer() is not optimizer:
                return
            self.step += 1
            n = self.step
            if n in self.steps or (self.every and n % self.every == 0):
                try:
                    path = _dump(_snapshot_name(self.dir, self.rank, "step%d" % n))
                    self.event("file", kind="step", step=n, path=path)
                except Exception as e:
                    _warn("step-dump", "rank %d: cannot write the step %d snapshot (%s); training goes on" % (self.rank, n, _err(e)))
            if self.monitor is not None and self.monitor.report(n) is not None and not self.monitor_announced:
                self.monitor_announced = True
                self.event("file", kind="monitor", path=self.monitor.jsonl)
        except Exception as e:
            _warn("step", "rank %d: step hook failed (%s)" % (self.rank, _err(e)))

    def _exit(self) -> None:
        try:
            path = _dump(_snapshot_name(self.dir, self.rank, "exit"))
            self.event("file", kind="exit", step=self.step, path=path)
        except Exception as e:
            _warn("exit-dump", "rank %d: cannot write the exit snapshot (%s)" % (self.rank, _err(e)))


class _TorchImportHook:
    """A meta path finder that calls back once ``import torch`` has finished
    executing torch/__init__.py, by wrapping the loader the other finders
    return. It finds nothing itself."""

    def __init__(self, callback: Callable[[Any], None]) -> None:
        self.callback = callback
        self.fired = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch" or self.fired:
            return None
        self.fired = True
        spec = None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            self.fired = False
            return spec
        spec.loader = _Loader(spec.loader, self.callback)
        try:
            sys.meta_path.remove(self)  # torch is imported once: no cost for later imports
        except ValueError:
            pass
        return spec


class _Loader:
    def __init__(self, loader: Any, callback: Callable[[Any], None]) -> None:
        self._loader = loader
        self._callback = callback

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        try:
            self._callback(module)
        except Exception as e:
            _warn("hook", "not recording (%s)" % _err(e))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def _start_from_env() -> None:
    """Called by gpumem record's sitecustomize at interpreter start: read
    GPUMEM_RECORD and act when torch is imported (at once if it already is)."""
    global _recorder
    raw = os.environ.get(ENV)
    if not raw or _recorder is not None:
        return
    import json

    _recorder = _Recorder(json.loads(raw))
    if "torch" in sys.modules:
        _recorder.torch_imported(sys.modules["torch"])
        return
    sys.meta_path.insert(0, _TorchImportHook(_recorder.torch_imported))
