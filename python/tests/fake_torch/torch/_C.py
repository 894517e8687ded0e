"""FAKE torch._C: the OOM observer registry."""

import os

_oom_observers = []

if os.environ.get("FAKE_TORCH_VERSION") != "1.13":

    def _cuda_attach_out_of_memory_observer(observer):
        """PyTorch 2.x: torch._C._cuda_attach_out_of_memory_observer(observer),
        observer(device: int, alloc: int, device_allocated: int,
        device_free: int), called by the caching allocator before it raises
        OutOfMemoryError (c10/cuda/CUDACachingAllocator.cpp,
        attachOutOfMemoryObserver; the signature is the one PyTorch's
        documentation's example uses: oom_observer(device, alloc,
        device_alloc, device_free))."""
        from . import cuda

        if not cuda.is_initialized():
            raise RuntimeError("fake: the allocator's observers need CUDA initialized")
        _oom_observers.append(observer)
