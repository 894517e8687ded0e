"""A FAKE of the parts of PyTorch that gpumem's recorder calls, for tests
on machines without a GPU. It is not PyTorch: it keeps a toy allocator
(a bump allocator over one segment) whose counters, history and OOM
behave as PyTorch's caching allocator reports them, so the recorder's
dump, step, OOM and monitor logic can be checked against known truth.

The signatures are PyTorch 2.x's (torch/cuda/memory.py,
torch/optim/optimizer.py, torch/cuda/__init__.py), cited at each function.
FAKE_TORCH_VERSION=1.13 gives PyTorch 1.13's surface instead: the old
_record_memory_history(enabled: bool, device=None), and neither the global
optimizer step hook nor the OOM observer.
"""

import os

__version__ = "1.13.0+fake" if os.environ.get("FAKE_TORCH_VERSION") == "1.13" else "2.5.0+fake"
OLD = __version__.startswith("1.13")

from . import _C  # noqa: E402
from . import cuda  # noqa: E402
from . import optim  # noqa: E402
