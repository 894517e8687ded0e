"""FAKE torch.optim.optimizer (see torch/__init__.py)."""

import os

_global_optimizer_post_hooks = {}
_next_id = [0]


class _Handle:
    def __init__(self, hooks, hid):
        self.hooks, self.id = hooks, hid

    def remove(self):
        self.hooks.pop(self.id, None)


if os.environ.get("FAKE_TORCH_VERSION") != "1.13":

    def register_optimizer_step_post_hook(hook):
        """torch/optim/optimizer.py (PyTorch >= 2.0):
        register_optimizer_step_post_hook(hook: GlobalOptimizerPostHook) ->
        RemovableHandle; hook(optimizer, args, kwargs) -> None runs after
        every Optimizer.step of every optimizer."""
        _next_id[0] += 1
        _global_optimizer_post_hooks[_next_id[0]] = hook
        return _Handle(_global_optimizer_post_hooks, _next_id[0])


class Optimizer:
    def __init__(self, params=(), lr=0.1):
        self.params, self.lr = list(params), lr
        self.steps = 0

    def step(self, *args, **kwargs):
        # Optimizer.profile_hook_step: global pre hooks, the step, then the
        # global post hooks with (self, args, kwargs).
        self.steps += 1
        for hook in list(_global_optimizer_post_hooks.values()):
            hook(self, args, kwargs)
