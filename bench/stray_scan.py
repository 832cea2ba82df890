#!/usr/bin/env python
"""What one look for a submission's stray processes costs, against how many processes the machine runs.

The supervisor looks for processes the submission left running after every reply of a ranked run
(about 240 times in a 10-block triton_mxfp4 verdict): the worker's descendants, and orphans re-parented
to the harness. psutil's ``children()`` reads the stat file of every process on the machine;
``harness.engine.process_tree`` reads the children files of the tree alone. For each count of extra
processes (sleepers in a tree of their own, as other work on a shared machine would be), the median of
``--reps`` looks at a small worker-like tree (a process with one child), both ways, and with
``--verdict`` one whole ranked verdict of the CPU fixture (10 blocks) among those processes: its wall time
and its time outside the phases (``other``, where the looks are counted). Into a results file with the
machine, the versions, the commit and the date.

Examples:
  python bench/stray_scan.py --verdict --out results/cpu_stray_scan.json
  python bench/stray_scan.py --others 0 100 --reps 20 --out /tmp/stray_scan.json   # a smoke test
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import ROOT, doc_parser, git_commit, utc_now, write_results  # _common puts the repository root on sys.path

VERSION = 2  # 1 - first version; 2 - crowd_alive (the crowd's children alive at the looks)
FIXTURE = "tests/fixtures/tasks/mxfp4_small/task.yml"
# a process that starts N sleeping children, says so, and waits
CROWD = (
    "import subprocess, sys; "
    "kids = [subprocess.Popen(['sleep', '3600']) for _ in range(int(sys.argv[1]))]; "
    "print('up', flush=True); sys.stdin.read()"
)
# a worker-like tree: one process with one child
WORKER = "import subprocess, sys; subprocess.Popen(['sleep', '3600']); print('up', flush=True); sys.stdin.read()"


def _started(code: str, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    return proc


def _stop(proc: subprocess.Popen) -> None:
    import psutil

    for p in psutil.Process(proc.pid).children(recursive=True):
        p.kill()
    proc.kill()
    proc.wait()


def _median_ms(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _verdict() -> dict[str, float]:
    """One ranked verdict of the CPU fixture in 10 blocks, in a fresh process: its wall time and ``other``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        cmd = [sys.executable, "-m", "harness", "run", "submissions/torch_mxfp4.py", "--task", FIXTURE]
        cmd += ["--mode", "leaderboard", "--device", "cpu", "--blocks", "10", "--json", str(out), "--quiet"]
        env = dict(os.environ, HARNESS_SECRET_SEED="stray-scan")
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, timeout=600)
        run = json.loads(out.read_text())
    return {"verdict_wall_s": run["wall_s"], "verdict_other_s": run["phases_s"].get("other", 0.0)}


def measure(others: int, reps: int, verdict: bool) -> dict[str, Any]:
    import psutil

    from harness.engine import process_tree

    crowd = _started(CROWD, str(others))
    worker = _started(WORKER)
    try:
        found_psutil = {p.pid for p in psutil.Process(worker.pid).children(recursive=True)}
        found_tree = {p.pid for p in process_tree.descendants(worker.pid)}
        return {
            **(_verdict() if verdict else {}),
            "other_processes": others,
            "processes_on_machine": len(psutil.pids()),
            "crowd_alive": len(psutil.Process(crowd.pid).children()),
            "psutil_ms": _median_ms(lambda: psutil.Process(worker.pid).children(recursive=True), reps),
            "process_tree_ms": _median_ms(lambda: process_tree.descendants(worker.pid), reps),
            "same_processes_found": found_psutil == found_tree and len(found_tree) == 1,
        }
    finally:
        _stop(worker)
        _stop(crowd)


def main(argv: list[str] | None = None) -> int:
    p = doc_parser(__doc__)
    p.add_argument("--out", required=True, help="the results file (JSON)")
    p.add_argument("--others", type=int, nargs="+", default=[0, 250, 1000], help="extra processes (default 0 250 1000)")
    p.add_argument("--reps", type=int, default=200, help="timed looks per count and way (default 200)")
    p.add_argument("--verdict", action="store_true", help="also one ranked verdict of the CPU fixture per count")
    args = p.parse_args(argv)
    rows = []
    for n in args.others:
        row = measure(n, args.reps, args.verdict)
        rows.append(row)
        print(
            f"{row['processes_on_machine']} processes: psutil {row['psutil_ms']:.3f} ms, "
            f"process_tree {row['process_tree_ms']:.3f} ms, same found: {row['same_processes_found']}"
            + (
                f"; verdict {row['verdict_wall_s']:.2f} s, other {row['verdict_other_s']:.2f} s" if args.verdict else ""
            ),
            file=sys.stderr,
        )
    doc = {
        "version": VERSION,
        "environment": {
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "kernel": platform.release(),
            "commit": git_commit(),
            "date": utc_now(),
        },
        "rows": rows,
    }
    write_results(Path(args.out), doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
