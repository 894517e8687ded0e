"""FAKE torch.optim (see torch/__init__.py): an optimizer whose step() runs
the global post hooks, as torch/optim/optimizer.py's Optimizer does."""

from . import optimizer
from .optimizer import Optimizer


class SGD(Optimizer):
    pass


__all__ = ["Optimizer", "SGD", "optimizer"]
