"""FAKE torch.cuda.memory (see torch/__init__.py), to PyTorch 2.x's
signatures in torch/cuda/memory.py.

The toy allocator: a request is rounded up to 512 bytes and placed at the
start of a cached segment with room for it (best fit), else in a new
segment rounded up to 2 MiB; a segment holds one active block (the rest of
it is an inactive block). When a new segment would pass the device's
capacity (FAKE_TORCH_CAPACITY bytes, default 1 GiB), the cached free
segments are released and the request retried, then the OOM observers are
called and OutOfMemoryError raised, as PyTorch's caching allocator does.
The counters behave as memory_stats()'s "allocated_bytes.all.current",
".peak", "reserved_bytes.all.current".
"""

import os
import sys
import time

_OLD = os.environ.get("FAKE_TORCH_VERSION") == "1.13"
_MIB = 1 << 20


class _Segment:
    def __init__(self, addr, total):
        self.addr, self.total = addr, total
        self.block = None  # the active block, if any
        self.requested = 0


class _Allocator:
    def __init__(self, capacity):
        self.capacity = capacity
        self.segments = []
        self.next_addr = 0x7F0000000000
        self.allocated = 0
        self.peak = 0
        self.reserved = 0
        self.peak_reserved = 0
        self.history = None  # None: off; else {"trace": bool, "max": int, "entries": [...]}
        self.calls = []  # (function, args, kwargs) of every _record_memory_history call

    def _trace(self, action, addr, size, frames=(), **extra):
        h = self.history
        if not h or not h["trace"]:
            return
        e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": int(time.time() * 1e6), "frames": list(frames)}
        e.update(extra)
        h["entries"].append(e)
        if len(h["entries"]) > h["max"]:
            del h["entries"][0]

    def alloc(self, size, frames):
        from . import FakeBlock, OutOfMemoryError
        from .. import _C

        rounded = max(512, (size + 511) // 512 * 512)
        seg = self._cached(rounded)
        if seg is None:
            total = (rounded + 2 * _MIB - 1) // (2 * _MIB) * (2 * _MIB)
            if self.reserved + total > self.capacity:
                self.empty_cache()
            if self.reserved + total > self.capacity:
                free = self.capacity - self.reserved
                self._trace("oom", 0, size, device_free=free)
                for obs in list(_C._oom_observers):
                    obs(0, size, self.allocated, free)
                raise OutOfMemoryError(
                    "CUDA out of memory. Tried to allocate %d bytes (fake GPU 0; %d bytes total capacity; %d bytes already allocated)"
                    % (size, self.capacity, self.allocated)
                )
            seg = _Segment(self.next_addr, total)
            self.next_addr += total + 2 * _MIB
            self.segments.append(seg)
            self.reserved += total
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            self._trace("segment_alloc", seg.addr, total)
        blk = FakeBlock(seg.addr, rounded, frames if self.history else [])
        seg.block, seg.requested = blk, size
        self.allocated += rounded
        self.peak = max(self.peak, self.allocated)
        self._trace("alloc", blk.addr, rounded, frames)
        return blk

    def _cached(self, rounded):
        best = None
        for s in self.segments:
            if s.block is None and s.total >= rounded and (best is None or s.total < best.total):
                best = s
        return best

    def free(self, blk):
        for s in self.segments:
            if s.block is blk:
                s.block = None
                self.allocated -= blk.size
                self._trace("free_requested", blk.addr, blk.size, blk.frames)
                self._trace("free_completed", blk.addr, blk.size, blk.frames)
                return
        raise RuntimeError("fake: double free")

    def empty_cache(self):
        keep = []
        for s in self.segments:
            if s.block is None:
                self.reserved -= s.total
                self._trace("segment_free", s.addr, s.total)
            else:
                keep.append(s)
        self.segments = keep

    def snapshot(self):
        segs = []
        for s in self.segments:
            blocks = []
            used = 0
            if s.block is not None:
                b = s.block
                blocks.append({"address": b.addr, "size": b.size, "requested_size": s.requested, "state": "active_allocated", "frames": b.frames})
                used = b.size
            if used < s.total:
                blocks.append({"address": s.addr + used, "size": s.total - used, "requested_size": 0, "state": "inactive", "frames": []})
            segs.append(
                {
                    "device": 0,
                    "address": s.addr,
                    "total_size": s.total,
                    "allocated_size": used,
                    "active_size": used,
                    "requested_size": s.requested if s.block is not None else 0,
                    "stream": 0,
                    "segment_type": "large" if s.total > _MIB else "small",
                    "segment_pool_id": (0, 0),
                    "is_expandable": False,
                    "frames": [],
                    "blocks": blocks,
                }
            )
        h = self.history
        trace = list(h["entries"]) if h and h["trace"] else []
        return {"segments": segs, "device_traces": [trace]}


_alloc = _Allocator(int(os.environ.get("FAKE_TORCH_CAPACITY", str(1 << 30))))


def _need_cuda():
    from . import _lazy_init, is_initialized

    if not is_initialized():
        _lazy_init()


def memory_allocated(device=None):
    """torch/cuda/memory.py: memory_allocated(device: "Device" = None) -> int
    (memory_stats(device)["allocated_bytes.all.current"])."""
    return _alloc.allocated


def max_memory_allocated(device=None):
    """torch/cuda/memory.py: max_memory_allocated(device: "Device" = None) ->
    int (memory_stats(device)["allocated_bytes.all.peak"]: the most
    allocated since the program began or reset_peak_memory_stats)."""
    return _alloc.peak


def memory_reserved(device=None):
    """torch/cuda/memory.py: memory_reserved(device: "Device" = None) -> int
    (memory_stats(device)["reserved_bytes.all.current"])."""
    return _alloc.reserved


def max_memory_reserved(device=None):
    """torch/cuda/memory.py: max_memory_reserved(device: "Device" = None) -> int."""
    return _alloc.peak_reserved


def reset_peak_memory_stats(device=None):
    """torch/cuda/memory.py: reset_peak_memory_stats(device: "Device" = None)
    -> None: every "peak" statistic restarts from its current value."""
    _alloc.peak = _alloc.allocated
    _alloc.peak_reserved = _alloc.reserved


if _OLD:

    def _record_memory_history(enabled, device=None):
        """PyTorch 1.13: _record_memory_history(enabled: bool, device=None):
        stacks of live blocks only, no trace; raises without CUDA."""
        _alloc.calls.append(("_record_memory_history", (enabled,), {"device": device}))
        _need_cuda()
        _alloc.history = {"trace": False, "max": 0, "entries": []} if enabled else None

else:

    def _record_memory_history(
        enabled="all",
        context="all",
        stacks="all",
        max_entries=sys.maxsize,
        device=None,
        clear_history=False,
        compile_context=False,
        global_record_annotations=False,
        skip_actions=None,
    ):
        """PyTorch 2.x: _record_memory_history(enabled="all", *args, **kwargs)
        whose __signature__ is _record_memory_history_impl's: (enabled:
        str | None = "all", context: str | None = "all", stacks: str =
        "all", max_entries: int = sys.maxsize, device = None, clear_history:
        bool = False, compile_context: bool = False,
        global_record_annotations: bool = False, skip_actions = None).
        enabled=None turns recording off and drops the trace."""
        _alloc.calls.append(("_record_memory_history", (enabled,), {"context": context, "stacks": stacks, "max_entries": max_entries}))
        if isinstance(enabled, bool):
            raise TypeError("fake: the legacy boolean form is not modelled")
        if enabled not in (None, "state", "all") or stacks not in ("python", "all"):
            raise ValueError("fake: bad arguments %r %r" % (enabled, stacks))
        _need_cuda()
        if enabled is None:
            _alloc.history = None
        else:
            _alloc.history = {"trace": enabled == "all", "max": max_entries, "entries": []}


def _snapshot(device=None, augment_with_fx_traces=False):
    """torch/cuda/memory.py: _snapshot(device: "Device" = None,
    augment_with_fx_traces=False) -> the Snapshot dict: {"segments":
    [Segment], "device_traces": [[TraceEntry]]}."""
    _need_cuda()
    if os.environ.get("FAKE_TORCH_SNAPSHOT_FAILS"):
        raise RuntimeError("fake: snapshot failed")
    return _alloc.snapshot()


def _dump_snapshot(filename="dump_snapshot.pickle", augment_with_fx_traces=False):
    """torch/cuda/memory.py: pickles _snapshot() to filename."""
    import pickle

    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)
