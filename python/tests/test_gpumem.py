"""Tests of gpumem's Python recorder (python/gpumem) and of the
sitecustomize `gpumem record` injects (internal/record/sitecustomize.py).

Run from the repository root:  python3 -m unittest discover -s python/tests -v
(go test ./internal/record/ runs them with python3 and with Debian's
/usr/bin/python3, which has PyTorch 1.13 from python3-torch).

Each job runs in its own interpreter, as under `gpumem record`. FakeTorch
tests put a FAKE of torch.cuda's memory functions (tests/fake_torch,
PyTorch 2.x signatures) on the path: it has an allocator with known
figures, OOMs and the optimizer step hook. RealTorch tests need an
interpreter with a real PyTorch (without CUDA): they check the path an old
PyTorch without a GPU takes; GPUMEM_REQUIRE_TORCH=1 makes a missing torch
fail them instead of skipping.
"""

import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODULE = os.path.join(ROOT, "python", "gpumem")
SITECUSTOMIZE = os.path.join(ROOT, "internal", "record", "sitecustomize.py")
FAKE = os.path.join(HERE, "fake_torch")
MIB = 1 << 20


class Job:
    """One job run as `gpumem record` runs it: a private directory with the
    sitecustomize and the module first on PYTHONPATH, the settings in
    GPUMEM_RECORD, the state directory read back as events."""

    def __init__(self, test, fake=True):
        self.tmp = tempfile.mkdtemp(prefix="gpumem-pytest-")
        test.addCleanup(shutil.rmtree, self.tmp, True)
        self.inject = os.path.join(self.tmp, "inject")
        os.makedirs(os.path.join(self.inject, "gpumem"))
        shutil.copy(SITECUSTOMIZE, self.inject)
        for f in os.listdir(MODULE):
            if f.endswith(".py"):
                shutil.copy(os.path.join(MODULE, f), os.path.join(self.inject, "gpumem"))
        self.state = os.path.join(self.tmp, "state")
        os.makedirs(self.state)
        self.dir = os.path.join(self.tmp, "snapshots")
        self.work = os.path.join(self.tmp, "work")
        os.makedirs(self.work)
        self.fake = fake

    def env(self, cfg=None, recorder=True, extra=None, pythonpath=()):
        env = dict(os.environ)
        for k in ("RANK", "LOCAL_RANK", "GPUMEM_RECORD", "PYTHONPATH", "FAKE_TORCH_VERSION", "FAKE_TORCH_SNAPSHOT_FAILS"):
            env.pop(k, None)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        path = list(pythonpath)
        if self.fake:
            path.append(FAKE)
        if recorder:
            c = {"dir": self.dir, "state": self.state, "on_oom": True}
            c.update(cfg or {})
            env["GPUMEM_RECORD"] = json.dumps(c)
            path.insert(0, self.inject)
        if path:
            env["PYTHONPATH"] = os.pathsep.join(path)
        env.update(extra or {})
        return env

    def run(self, script, cfg=None, recorder=True, extra=None, pythonpath=()):
        p = os.path.join(self.work, "job.py")
        with open(p, "w") as f:
            f.write(textwrap.dedent(script))
        return subprocess.run(
            [sys.executable, p], cwd=self.work, env=self.env(cfg, recorder, extra, pythonpath), capture_output=True, text=True, timeout=120
        )

    def events(self):
        out = []
        for name in sorted(os.listdir(self.state)):
            with open(os.path.join(self.state, name)) as f:
                out += [json.loads(line) for line in f]
        return out

    def files(self):
        return sorted(os.listdir(self.dir)) if os.path.isdir(self.dir) else []

    def load(self, name):
        with open(os.path.join(self.dir, name), "rb") as f:
            return pickle.load(f)


def gpumem_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("gpumem:")]


TRAIN = """
    import torch
    base = torch.cuda.fake_alloc(100 << 20)          # the model: before the first step
    opt = torch.optim.SGD()
    for step in range(1, 6):
        act = torch.cuda.fake_alloc((200 if step == 2 else 50) << 20)   # step 2 spikes
        act.free()
        opt.step()
    print("trained", torch.cuda.memory_allocated())
"""


class Source(unittest.TestCase):
    def test_python_38_syntax(self):
        # The wheel says Requires-Python >=3.8; the sitecustomize runs in
        # whatever Python the job uses, and must at least parse there.
        import ast

        for path in (os.path.join(MODULE, "__init__.py"), SITECUSTOMIZE):
            with open(path) as f:
                ast.parse(f.read(), path, feature_version=(3, 8))


class FakeTorch(unittest.TestCase):
    def test_import_gpumem_without_torch(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), PYTHONDONTWRITEBYTECODE="1")
        env.pop("GPUMEM_RECORD", None)
        out = subprocess.run(
            [sys.executable, "-S", "-c", "import sys; import gpumem; print('torch' in sys.modules, sorted(gpumem.__all__))"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout
        self.assertEqual(out.strip(), "False ['Monitor', '__version__', 'dump_on_oom', 'memory_stats', 'record']")

    def test_job_without_torch_is_untouched(self):
        j = Job(self)
        script = "import sys; print('hello'); print('err', file=sys.stderr); sys.exit(3)"
        a, b = j.run(script), j.run(script, recorder=False)
        self.assertEqual((a.returncode, a.stdout, a.stderr), (b.returncode, b.stdout, b.stderr))
        self.assertEqual((a.returncode, a.stdout), (3, "hello\n"))
        self.assertEqual(j.events(), [])
        self.assertNotIn("torch", a.stdout)

    def test_import_torch_without_cuda_records_nothing(self):
        j = Job(self)
        r = j.run("import sys; hooked = [type(f).__name__ for f in sys.meta_path if 'Torch' in type(f).__name__]; import torch\n"
                  "print(torch.cuda.is_initialized(), 'gpumem' in sys.modules, hooked, [f for f in sys.meta_path if 'Torch' in type(f).__name__])",
                  cfg={"at_exit": True})
        # The hook was there before import torch and is gone after it.
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "False True ['_TorchImportHook'] []\n", ""))
        self.assertEqual([e["event"] for e in j.events()], ["torch"])
        self.assertEqual(j.files(), [])

    def test_steps_monitor_exit(self):
        j = Job(self)
        r = j.run(TRAIN, cfg={"steps": [3], "monitor": 1, "at_exit": True, "max_entries": 1000})
        plain = j.run(TRAIN, recorder=False)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr))
        self.assertEqual(j.files(), ["rank0-exit.pickle", "rank0-step3.pickle", "rank0-steps.jsonl"])
        # History was on before the model's allocation: the step snapshot's
        # trace starts with it, with the job's own frame.
        with open(os.path.join(j.dir, "rank0-step3.pickle"), "rb") as f:
            self.assertEqual(f.read(2), b"\x80\x04")  # protocol 4: memory_viz reads 2..4 only
        snap = j.load("rank0-step3.pickle")
        trace = snap["device_traces"][0]
        self.assertEqual((trace[0]["action"], trace[0]["size"]), ("segment_alloc", 100 * MIB))
        self.assertEqual((trace[1]["action"], trace[1]["size"]), ("alloc", 100 * MIB))
        self.assertIn("job.py", trace[1]["frames"][0]["filename"])
        # Three steps' activations: one model alloc, three activation allocs.
        self.assertEqual(sum(e["action"] == "alloc" for e in trace), 4)
        self.assertEqual(sum(e["action"] == "alloc" for e in j.load("rank0-exit.pickle")["device_traces"][0]), 6)
        # The monitor: the seed's four quantities; the interval peak resets
        # after every report, so step 2's spike does not hide step 3's.
        with open(os.path.join(j.dir, "rank0-steps.jsonl")) as f:
            lines = [json.loads(l) for l in f]
        self.assertEqual([l["step"] for l in lines], [1, 2, 3, 4, 5])
        self.assertEqual([l["peak_allocated_bytes"] // MIB for l in lines], [150, 300, 150, 150, 150])
        self.assertEqual({l["allocated_bytes"] // MIB for l in lines}, {100})
        self.assertEqual([l["reserved_bytes"] // MIB for l in lines], [150, 350, 350, 350, 350])
        self.assertEqual({l["total_bytes"] for l in lines}, {1 << 30})
        self.assertAlmostEqual(lines[1]["utilization"], 300 / 1024)
        self.assertEqual({(l["gpumem_monitor"], l["rank"], l["device"]) for l in lines}, {(1, 0, 0)})
        kinds = [(e["kind"], e.get("step")) for e in j.events() if e["event"] == "file"]
        self.assertEqual(kinds, [("monitor", None), ("step", 3), ("exit", 5)])
        # max_entries reached the allocator as PyTorch 2.x takes it.
        cuda = [e for e in j.events() if e["event"] == "cuda"][0]
        self.assertEqual((cuda["history"], cuda["missing"]), (True, []))

    def test_every_and_never_overwritten(self):
        j = Job(self)
        for _ in range(2):
            r = j.run(TRAIN, cfg={"every": 2, "monitor": 2})
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(j.files(), ["rank0-step2.1.pickle", "rank0-step2.pickle", "rank0-step4.1.pickle", "rank0-step4.pickle",
                                     "rank0-steps.1.jsonl", "rank0-steps.jsonl"])
        for name in ("rank0-steps.jsonl", "rank0-steps.1.jsonl"):  # one run each, every 2 steps
            with open(os.path.join(j.dir, name)) as f:
                self.assertEqual([json.loads(l)["step"] for l in f], [2, 4])
        self.assertEqual([f for f in os.listdir(j.dir) if f.startswith(".")], [])  # no temporary file left

    def test_rank_from_env_and_ranks_filter(self):
        j = Job(self)
        j.run(TRAIN, cfg={"steps": [1]}, extra={"RANK": "3", "LOCAL_RANK": "1"})
        j.run(TRAIN, cfg={"steps": [1]}, extra={"LOCAL_RANK": "5"})
        r = j.run(TRAIN, cfg={"steps": [1], "ranks": [0, 3]}, extra={"RANK": "7"})
        self.assertEqual(r.stderr, "")
        self.assertEqual(j.files(), ["rank3-step1.pickle", "rank5-step1.pickle"])
        self.assertEqual([(e["event"], e["rank"]) for e in j.events() if e["event"] == "skip"], [("skip", 7)])

    def test_oom_dump_before_the_error_propagates(self):
        j = Job(self)
        script = """
            import os, sys, torch
            keep = torch.cuda.fake_alloc(600 << 20)
            try:
                torch.cuda.fake_alloc(600 << 20)
            except torch.cuda.OutOfMemoryError as e:
                print("caught; snapshot there:", os.path.exists(sys.argv[0] and os.environ["SNAPDIR"] + "/rank0-oom.pickle"))
            torch.cuda.fake_alloc(900 << 20)   # a second OOM, uncaught
        """
        r = j.run(script, extra={"SNAPDIR": j.dir})
        plain = j.run(script, recorder=False, extra={"SNAPDIR": j.dir})
        self.assertEqual(r.stdout, "caught; snapshot there: True\n")
        self.assertEqual(r.returncode, 1)
        self.assertEqual((r.returncode, r.stderr.splitlines()[-1]), (plain.returncode, plain.stderr.splitlines()[-1]))
        self.assertEqual(gpumem_lines(r.stderr), [])
        self.assertEqual(j.files(), ["rank0-oom.pickle"])  # the first OOM only
        trace = j.load("rank0-oom.pickle")["device_traces"][0]
        self.assertEqual(trace[-1]["action"], "oom")
        self.assertEqual(trace[-1]["size"], 600 * MIB)

    def test_failures_warn_once_and_the_job_goes_on(self):
        j = Job(self)
        with open(os.path.join(j.tmp, "afile"), "w") as f:
            f.write("not a directory")
        plain = j.run(TRAIN, recorder=False)
        r = j.run(TRAIN, cfg={"dir": os.path.join(j.tmp, "afile", "sub"), "steps": [1, 2, 3], "at_exit": True})
        self.assertEqual((r.returncode, r.stdout), (plain.returncode, plain.stdout))
        lines = gpumem_lines(r.stderr)
        self.assertEqual(len(lines), 2, r.stderr)  # one per kind of dump, not one per step
        self.assertIn("cannot write the step 1 snapshot", lines[0])
        self.assertIn("cannot write the exit snapshot", lines[1])
        r = j.run(TRAIN, cfg={"steps": [1, 2]}, extra={"FAKE_TORCH_SNAPSHOT_FAILS": "1"})
        self.assertEqual((r.returncode, r.stdout), (plain.returncode, plain.stdout))
        self.assertEqual(len(gpumem_lines(r.stderr)), 1, r.stderr)

    def test_old_pytorch_records_at_exit_only(self):
        j = Job(self)
        plain = j.run(TRAIN, recorder=False, extra={"FAKE_TORCH_VERSION": "1.13"})
        r = j.run(TRAIN, cfg={"steps": [3], "monitor": 1, "at_exit": True}, extra={"FAKE_TORCH_VERSION": "1.13"})
        self.assertEqual((r.returncode, r.stdout), (plain.returncode, plain.stdout))
        lines = gpumem_lines(r.stderr)
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("PyTorch 1.13.0+fake lacks the global optimizer step hook", lines[0])
        self.assertIn("recording only at exit", lines[0])
        self.assertEqual(j.files(), ["rank0-exit.pickle"])

    def test_sitecustomize_chains(self):
        j = Job(self)
        other = os.path.join(j.tmp, "other")
        os.makedirs(other)
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("import sys\nsys.stderr.write('the job sitecustomize ran\\n')\nMARK = 42\n")
        r = j.run("import sitecustomize, sys; print(sitecustomize.MARK, sys.path.index(%r) < sys.path.index(%r))" % (j.inject, other),
                  pythonpath=[other])
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "42 True\n", "the job sitecustomize ran\n"))
        with open(os.path.join(other, "sitecustomize.py"), "w") as f:
            f.write("raise ValueError('broken')\n")
        r = j.run("print('ran')", pythonpath=[other])
        plain = j.run("print('ran')", recorder=False, pythonpath=[other])
        self.assertEqual((r.returncode, r.stdout, r.stderr), (plain.returncode, plain.stdout, plain.stderr))
        self.assertIn("Error in sitecustomize", r.stderr)

    def test_module_api(self):
        j = Job(self)
        r = j.run(
            """
            import os, torch, gpumem
            lines = []
            mon = gpumem.Monitor(snapshot_step=2, snapshot_dir="snaps", log=lines.append, jsonl="snaps/m.jsonl")
            base = torch.cuda.fake_alloc(100 << 20)
            for step in range(4):
                x = torch.cuda.fake_alloc((300 if step == 1 else 50) << 20); x.free()
                st = mon.report(step)
            print(*lines, sep="\\n")
            print(mon.snapshots)
            with gpumem.record("run.pickle") as rec:
                y = torch.cuda.fake_alloc(10 << 20)
            print(rec.path, os.path.getsize("run.pickle") > 0)
            print(gpumem.dump_on_oom("oomdir"))
            try:
                torch.cuda.fake_alloc(2 << 30)
            except torch.cuda.OutOfMemoryError:
                print(sorted(os.listdir("oomdir")))
            """,
            recorder=False, extra={"RANK": "2"}, pythonpath=[os.path.join(ROOT, "python")],
        )
        self.assertEqual(r.stderr, "")
        self.assertEqual(r.stdout.splitlines(), [
            "[step 0] GPU mem: 0.1 GiB allocated, 0.1 GiB peak, 0.1 GiB reserved / 1.0 GiB total (15%)",
            "[step 1] GPU mem: 0.1 GiB allocated, 0.4 GiB peak, 0.4 GiB reserved / 1.0 GiB total (39%)",
            "[step 2] GPU mem: 0.1 GiB allocated, 0.1 GiB peak, 0.4 GiB reserved / 1.0 GiB total (15%)",
            "[step 3] GPU mem: 0.1 GiB allocated, 0.1 GiB peak, 0.4 GiB reserved / 1.0 GiB total (15%)",
            "['snaps/rank2-step2.pickle']",
            "run.pickle True",
            "True",
            "['rank2-oom.pickle']",
        ])


def real_torch():
    """Whether this interpreter has a real PyTorch (not the fake)."""
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=""))
    return r.returncode == 0 and "fake" not in r.stdout


class RealTorch(unittest.TestCase):
    """A real PyTorch without CUDA (Debian's python3-torch: 1.13, which has
    _record_memory_history but raises without CUDA, and has neither the
    global optimizer step hook nor the OOM observer)."""

    @classmethod
    def setUpClass(cls):
        if not real_torch():
            if os.environ.get("GPUMEM_REQUIRE_TORCH") == "1":
                raise AssertionError("GPUMEM_REQUIRE_TORCH=1 but %s cannot import torch" % sys.executable)
            raise unittest.SkipTest("%s has no PyTorch" % sys.executable)

    JOB = """
        import sys, torch
        import gpumem
        hooked = [c for c, _ in torch.cuda._queued_calls if getattr(c, "__self__", None) is gpumem._recorder]
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x, y = torch.randn(64, 8), torch.randn(64, 1)
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        print("loss %.6f" % loss.item())
        print("cuda initialized", torch.cuda.is_initialized())
        print("hook fired", len(hooked))
        if len(sys.argv) > 1:
            # What torch.cuda._lazy_init would do when a process makes its
            # CUDA context; this build has no CUDA, so history cannot start.
            for c in hooked:
                c()
            print("after the recorder's start: still running")
    """

    def run_job(self, j, recorder, args=()):
        p = os.path.join(j.work, "job.py")
        with open(p, "w") as f:
            f.write(textwrap.dedent(self.JOB if recorder else self.JOB.replace("import gpumem", "gpumem = None").replace(
                "getattr(c, \"__self__\", None) is gpumem._recorder", "False")))
        return subprocess.run([sys.executable, p] + list(args), cwd=j.work, env=j.env({"steps": [2], "monitor": 1, "at_exit": True}, recorder),
                              capture_output=True, text=True, timeout=300)

    def test_hook_fires_no_cuda_context_job_unchanged(self):
        j = Job(self, fake=False)
        r, plain = self.run_job(j, True), self.run_job(j, False)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[:2], plain.stdout.splitlines()[:2])  # the same loss, no CUDA context
        self.assertEqual(r.stdout.splitlines()[1:], ["cuda initialized False", "hook fired 1"])
        self.assertEqual(gpumem_lines(r.stderr), [])
        self.assertEqual([e["event"] for e in j.events()], ["torch"])
        self.assertTrue(j.events()[0]["version"].startswith(("1.", "2.")))
        self.assertEqual(j.files(), [])

    def test_cuda_start_without_cuda_one_warning(self):
        j = Job(self, fake=False)
        r = self.run_job(j, True, ["start"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines()[-1], "after the recorder's start: still running")
        lines = gpumem_lines(r.stderr)
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("rank 0: cannot turn on memory history", lines[0])
        ev = [e for e in j.events() if e["event"] == "cuda"]
        self.assertEqual((len(ev), ev[0]["history"]), (1, False))
        self.assertEqual(j.files(), [])


if __name__ == "__main__":
    unittest.main()
