#!/usr/bin/env python3
"""Run PyTorch's own `_memory_viz.py stats` on a snapshot without torch installed.

PyTorch's torch/cuda/_memory_viz.py is not stored in this repository: it is
read from ../shared/reference/pytorch-viz/ (see bench/baseline/README.md). This script
loads that file as a plain module, after putting stub `torch` modules into
sys.modules for exactly the torch imports its top-level statements make (the
stored versions make none; torch is imported only inside profile helpers we
never call), then does what `python -m torch.cuda._memory_viz stats FILE` does:
pickle.load, list-to-dict upgrade, print(segsum(data)).

stdout: the segsum text, byte-identical to PyTorch's CLI output.
stderr: one JSON line {"file", "load_s", "segsum_s", "total_s", "max_rss_mb"}.

usage: run_memory_viz.py [--viz PATH] [--quiet] SNAPSHOT
"""

import argparse
import ast
import importlib.util
import json
import os
import pickle
import resource
import sys
import time
import types

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_VIZ = os.path.join(REPO, "..", "shared", "reference", "pytorch-viz", "_memory_viz.py")


def torch_imports(source):
    """Return {module name: set of names imported from it} for top-level torch imports."""
    wanted = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch" or alias.name.startswith("torch."):
                    wanted.setdefault(alias.name, set())
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "torch" or node.module.startswith("torch."):
                wanted.setdefault(node.module, set()).update(a.name for a in node.names)
    return wanted


def install_stubs(wanted):
    """Put empty stand-in modules for the given torch imports into sys.modules."""
    for module, names in wanted.items():
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name not in sys.modules:
                stub = types.ModuleType(name)
                stub.__path__ = []  # make it a package so submodule imports resolve
                sys.modules[name] = stub
                if i > 1:
                    setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], stub)
        for attr in names:
            if attr != "*" and not hasattr(sys.modules[module], attr):
                # A placeholder is enough: segsum never touches torch objects.
                setattr(sys.modules[module], attr, type(attr, (), {}))


def load_memory_viz(path):
    with open(path, encoding="utf-8") as f:
        source = f.read()
    wanted = torch_imports(source)
    if wanted and importlib.util.find_spec("torch") is None:
        install_stubs(wanted)
    spec = importlib.util.spec_from_file_location("_memory_viz", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot")
    ap.add_argument("--viz", default=DEFAULT_VIZ, help="path to PyTorch's _memory_viz.py")
    ap.add_argument("--quiet", action="store_true", help="do not print the segsum text")
    args = ap.parse_args()

    if not os.path.exists(args.viz):
        sys.exit(f"run_memory_viz.py: {args.viz} missing; fetch torch/cuda/_memory_viz.py there first")
    mv = load_memory_viz(args.viz)

    t0 = time.perf_counter()
    with open(args.snapshot, "rb") as f:
        data = pickle.load(f)
    if isinstance(data, list):  # same upgrade as _memory_viz.py's _read()
        data = {"segments": data, "traces": []}
    t1 = time.perf_counter()
    text = mv.segsum(data)
    t2 = time.perf_counter()

    if not args.quiet:
        print(text)
        sys.stdout.flush()
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "file": os.path.basename(args.snapshot),
        "load_s": round(t1 - t0, 4),
        "segsum_s": round(t2 - t1, 4),
        "total_s": round(t2 - t0, 4),
        "max_rss_mb": round(rss_kb / 1024),
    }), file=sys.stderr)


if __name__ == "__main__":
    main()
