# Written by `gpumem record` into a private directory that it puts first on
# PYTHONPATH, so that every Python process of the recorded job loads it at
# start-up. It runs the sitecustomize it hides (Debian ships one), then
# loads gpumem's recorder from beside it, which acts only once torch is
# imported. It imports nothing heavy, and never stops the job: a failure
# prints one "gpumem:" line.
import os
import sys


def _gpumem_chain(here):
    # The sitecustomize that would have run without us: the first one on
    # sys.path outside our directory. Its errors are reported the way
    # site.py reports them, and its names are copied into this module.
    from importlib.machinery import PathFinder
    import importlib.util

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as err:
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            sys.stderr.write(
                "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                "%s: %s\n" % (err.__class__.__name__, err))
        return
    g = globals()
    for k, v in vars(mod).items():
        if not k.startswith("__") and k not in g:
            g[k] = v


def _gpumem_start():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        _gpumem_chain(here)
    except Exception as err:
        sys.stderr.write("gpumem: cannot run the job's own sitecustomize (%s)\n" % (err,))
    if sys.version_info < (3, 8):
        sys.stderr.write("gpumem: Python %d.%d is older than 3.8: not recording\n" % sys.version_info[:2])
        return
    try:
        import importlib.util

        init = os.path.join(here, "gpumem", "__init__.py")
        mod = sys.modules.get("gpumem")
        if mod is None or getattr(mod, "__file__", None) != init:
            spec = importlib.util.spec_from_file_location(
                "gpumem", init, submodule_search_locations=[os.path.dirname(init)])
            mod = importlib.util.module_from_spec(spec)
            sys.modules["gpumem"] = mod
            spec.loader.exec_module(mod)
        mod._start_from_env()
    except Exception as err:
        sys.stderr.write("gpumem: not recording (%s: %s)\n" % (err.__class__.__name__, err))


_gpumem_start()
del _gpumem_start, _gpumem_chain
