"""FAKE torch.cuda (see torch/__init__.py): lazy initialization with
queued calls, the memory statistics of torch/cuda/memory.py, and a toy
allocator the test jobs drive with fake_alloc / FakeBlock.free."""

import sys
import time

from .. import _C
from . import memory
from .memory import (  # noqa: F401  (torch.cuda re-exports them)
    max_memory_allocated,
    memory_allocated,
    memory_reserved,
    reset_peak_memory_stats,
)

_initialized = False
_queued_calls = []


class DeferredCudaCallError(Exception):
    pass


class OutOfMemoryError(RuntimeError):
    pass


def is_initialized():
    """torch/cuda/__init__.py: is_initialized() -> bool."""
    return _initialized


def _lazy_call(callable, **kwargs):
    """torch/cuda/__init__.py: _lazy_call(callable, **kwargs): call now if
    CUDA is initialized, else queue for _lazy_init."""
    if is_initialized():
        callable()
    else:
        _queued_calls.append((callable, "fake traceback"))


def _lazy_init():
    """torch/cuda/__init__.py: _lazy_init() makes the CUDA context
    (torch._C._cuda_init()), then runs the queued calls; one that raises
    becomes a DeferredCudaCallError, as in PyTorch."""
    global _initialized
    if _initialized:
        return
    _initialized = True
    for call, tb in _queued_calls:
        try:
            call()
        except Exception as e:
            raise DeferredCudaCallError("CUDA call failed lazily at initialization: %s" % e) from e


def current_device():
    """torch/cuda/__init__.py: current_device() -> int."""
    _lazy_init()
    return 0


def device_count():
    return 1


class _Props:
    def __init__(self, total):
        self.total_memory = total
        self.name = "Fake GPU"


def get_device_properties(device=None):
    """torch/cuda/__init__.py: get_device_properties(device=None) ->
    _CudaDeviceProperties, whose total_memory is the device's bytes."""
    _lazy_init()
    return _Props(memory._alloc.capacity)


class FakeBlock:
    def __init__(self, addr, size, frames):
        self.addr, self.size, self.frames = addr, size, frames

    def free(self):
        memory._alloc.free(self)


def fake_alloc(size):
    """Allocate size bytes on the fake device (what a CUDA tensor's
    creation does): initializes CUDA first, records the caller's frames."""
    _lazy_init()
    frames = []
    f = sys._getframe(1)
    while f is not None and len(frames) < 8:
        frames.append({"filename": f.f_code.co_filename, "line": f.f_lineno, "name": f.f_code.co_name})
        f = f.f_back
    return memory._alloc.alloc(size, frames)
