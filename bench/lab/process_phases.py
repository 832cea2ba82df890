"""Lab probe (not a product benchmark): where a whole ``python -m harness run`` process spends the time
outside the run's own wall time (``wall_s``, which ``phases_s`` splits): the interpreter's start, the
CLI's imports (torch among them), ``Run.__init__`` (the device: a CUDA context), the time between that
and the run, and after the run: writing the results, the exit handlers (the pool's server is stopped
there) and the interpreter's teardown.

It runs the CLI in a child process through a bootstrap that timestamps these points (a finder wraps the
modules' execution, so nothing is imported earlier than the CLI imports it) and measures the child's
wall time from outside. One JSON line per run, seconds:

  python bench/lab/process_phases.py --runs 2 -- submissions/triton_mxfp4.py --task mxfp4_mm --mode leaderboard
  python bench/lab/process_phases.py -- submissions/torch_mxfp4.py --task tests/fixtures/tasks/mxfp4_small/task.yml \
      --mode leaderboard --device cpu                               # CPU: the probe's plumbing
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Runs in the child: marks are (name, time.time()) pairs, written as JSON to argv[1] by the last exit handler.
BOOTSTRAP = r"""
import atexit, importlib.abc, importlib.machinery, json, sys, time
MARKS = [("main", time.time())]
OUT = sys.argv[1]
sys.argv = ["harness"] + sys.argv[2:]
atexit.register(lambda: (MARKS.append(("exit_handlers_done", time.time())), open(OUT, "w").write(json.dumps(MARKS))))


def _wrap_run(module):
    run = module.Run
    init, execute = run.__init__, run.execute

    def timed_init(self, *a, **k):
        MARKS.append(("run_init", time.time()))
        init(self, *a, **k)
        MARKS.append(("run_init_done", time.time()))

    def timed_execute(self):
        MARKS.append(("execute", time.time()))
        try:
            return execute(self)
        finally:
            MARKS.append(("execute_done", time.time()))

    run.__init__, run.execute = timed_init, timed_execute


WATCH = {"torch": None, "harness.engine.run": _wrap_run}


class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in WATCH:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, after = spec.loader, WATCH[name]
        original = loader.exec_module

        def exec_module(module):
            MARKS.append((f"import {name}", time.time()))
            original(module)
            MARKS.append((f"import {name} done", time.time()))
            if after is not None:
                after(module)

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, Finder())
from harness.cli.main import main
code = main()
MARKS.append(("main_returned", time.time()))
sys.exit(code)
"""


def _process_start(pid: int) -> float:
    """The child's start, from /proc (clock ticks since boot), as a time.time() value."""
    ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    boot = next(
        float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime")
    )
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def one_run(cli_args: list[str]) -> dict:
    env = dict(os.environ, HARNESS_SECRET_SEED=secrets.token_hex(16), PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        marks_path, json_path = Path(tmp) / "marks.json", Path(tmp) / "run.json"
        command = [sys.executable, "-c", BOOTSTRAP, str(marks_path), "run", *cli_args, "--json", str(json_path)]
        t0 = time.time()
        child = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        started = _process_start(child.pid)
        _, stderr = child.communicate()
        t_end = time.time()
        if child.returncode not in (0, 1) or not marks_path.exists():
            return {"error": f"exit status {child.returncode}", "stderr": stderr.decode(errors="replace")[-2000:]}
        marks = dict(json.loads(marks_path.read_text()))
        run = json.loads(json_path.read_text()) if json_path.exists() else {}
    points = [("interpreter_start", started), *sorted(marks.items(), key=lambda kv: kv[1]), ("process_exit", t_end)]
    steps = {f"{a} -> {b}": round(tb - ta, 3) for (a, ta), (b, tb) in itertools.pairwise(points)}
    return {
        "wall_s": round(t_end - t0, 3),
        "run_wall_s": run.get("wall_s"),
        "verdict": run.get("verdict"),
        "steps_s": steps,
    }


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("cli_args", nargs=argparse.REMAINDER, help="after --: the arguments of 'harness run'")
    args = p.parse_args()
    cli_args = args.cli_args[1:] if args.cli_args[:1] == ["--"] else args.cli_args
    if not cli_args:
        p.error("give the arguments of 'harness run' after --")
    for _ in range(args.runs):
        print(json.dumps(one_run(cli_args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
