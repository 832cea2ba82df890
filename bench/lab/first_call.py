"""Lab probe: what a fresh worker's first call of a submission costs on each benchmark shape, with the
compile cache already filled. In a ranked verdict every block's fresh worker pays it in its warm-up
requests (counted in ``timing``, beside the timed requests' own ``timing.calls``); on an H100 a
triton_mxfp4 verdict's ``timing`` was several times its ``timing.calls`` plus ``timing.heat``.

Processes are forked from one that imported torch and Triton and computed Triton's key, as the
warm-worker pool forks them. The first fills a temporary Triton cache; each later one creates its CUDA
context, imports the submission, generates one input per benchmark shape and times the first call of
each shape and a second one (synchronized), with the first calls profiled (cProfile): the functions
where they spent the most time, to tell Triton's cache lookups, launcher loads and module loads apart.

``--parallel``: then, with a second empty cache, one process per case (tests and benchmarks) started at
once, each making its case's first call, and a last process making every case's first call with the
cache they filled: whether compiling a new file's kernels in parallel processes before its verdict
times anything would hide their compilation (the wall until all are done, against the serial sum).

  python bench/lab/first_call.py --task mxfp4_mm --submission submissions/triton_mxfp4.py --out /tmp/first_call.json
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import json
import multiprocessing as mp
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from _child import run_in_child  # noqa: E402  (beside this script)


def _import_submission(task_name: str, submission: str):
    """The submission's module, imported with the task's compat modules (``task``, ``utils``) on the path."""
    sys.path.insert(0, str(ROOT / "tasks" / task_name / "compat"))
    spec = importlib.util.spec_from_file_location("submission", submission)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _probe(task_name: str, submission: str, profile: bool, out) -> None:
    import torch

    from tasks import load_task

    dev = torch.device("cuda", 0)
    t0 = time.perf_counter()
    torch.empty(1, device=dev)
    row: dict = {"cuda_context_s": time.perf_counter() - t0}
    task = load_task(task_name)
    t0 = time.perf_counter()
    module = _import_submission(task_name, submission)
    row["import_s"] = time.perf_counter() - t0
    inputs = [
        task.module.generate_input(**dict(case, seed=7 + i), device=dev) for i, case in enumerate(task.benchmarks)
    ]
    torch.cuda.synchronize()
    profiler = cProfile.Profile() if profile else None
    shapes = []
    for case, data in zip(task.benchmarks, inputs):
        times = []
        for call in range(2):
            if profiler is not None and call == 0:
                profiler.enable()
            t0 = time.perf_counter()
            module.custom_kernel(data)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            if profiler is not None and call == 0:
                profiler.disable()
        shapes.append(
            {"case": {k: v for k, v in case.items() if k != "seed"}, "first_s": times[0], "second_s": times[1]}
        )
    row["shapes"] = shapes
    if profiler is not None:
        for order in ("tottime", "cumulative"):
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(25)
            row[f"profile_{order}"] = text.getvalue()
    out.put(row)


def _compile_one(task_name: str, submission: str, kind: str, index: int, start_at: float, out) -> None:
    """One case's first call in a fresh forked process (after its CUDA context, import and input), begun
    at ``start_at`` (time.time) so that every process compiles at once."""
    import torch

    from tasks import load_task

    dev = torch.device("cuda", 0)
    torch.empty(1, device=dev)
    task = load_task(task_name)
    module = _import_submission(task_name, submission)
    case = getattr(task, kind)[index]
    data = task.module.generate_input(**dict(case, seed=11 + index), device=dev)
    torch.cuda.synchronize()
    ready = time.time()
    time.sleep(max(0.0, start_at - ready))
    t0 = time.time()
    module.custom_kernel(data)
    torch.cuda.synchronize()
    out.put(
        {
            "kind": kind,
            "index": index,
            "ready_late_s": max(0.0, ready - start_at),
            "first_s": time.time() - t0,
            "done_at": time.time(),
        }
    )


def _parallel(ctx, task_name: str, submission: str) -> dict:
    """Every case's first call at once, one process each, on an empty cache; then one process that makes
    every case's first call with what they compiled."""
    from tasks import load_task

    task = load_task(task_name)
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="first-call-parallel-")
    cases = [("tests", i) for i in range(len(task.tests))] + [("benchmarks", i) for i in range(len(task.benchmarks))]
    queue = ctx.Queue()
    start_at = time.time() + 15.0  # every process has its context, import and input by then
    procs = [ctx.Process(target=_compile_one, args=(task_name, submission, k, i, start_at, queue)) for k, i in cases]
    for proc in procs:
        proc.start()
    rows = [queue.get(timeout=180) for _ in procs]
    for proc in procs:
        proc.join(10)
    wall = max(r["done_at"] for r in rows) - start_at
    after = run_in_child(ctx, _probe, (task_name, submission, False), 180)
    print(
        f"parallel: {len(rows)} cases compiled at once in {wall:.2f} s (each {min(r['first_s'] for r in rows):.2f}"
        f"-{max(r['first_s'] for r in rows):.2f} s); then a fresh process's first calls: "
        + ", ".join(f"{s['first_s'] * 1e3:.1f}" for s in after["shapes"])
        + " ms",
        flush=True,
    )
    return {"cases": rows, "wall_s": wall, "after": after}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--task", default="mxfp4_mm")
    p.add_argument("--submission", default="submissions/triton_mxfp4.py")
    p.add_argument("--processes", type=int, default=3, help="the first fills the compile cache")
    p.add_argument("--parallel", action="store_true", help="also compile every case at once, one process each")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="first-call-cache-")
    import torch  # noqa: F401  (before the forks, as in the pool's server)
    from triton.runtime.cache import triton_key

    triton_key()
    ctx = mp.get_context("fork")
    rows = []
    for i in range(args.processes):
        row = run_in_child(ctx, _probe, (args.task, str(Path(args.submission).resolve()), i > 0), 120)
        row["cache"] = "empty" if i == 0 else "filled"
        rows.append(row)
        firsts = ", ".join(f"{s['first_s'] * 1e3:.1f}/{s['second_s'] * 1e3:.2f}" for s in row["shapes"])
        print(
            f"process {i} ({row['cache']} cache): context {row['cuda_context_s'] * 1e3:.0f} ms, "
            f"import {row['import_s'] * 1e3:.0f} ms, first/second call per shape (ms): {firsts}",
            flush=True,
        )
    parallel = _parallel(ctx, args.task, str(Path(args.submission).resolve())) if args.parallel else None
    Path(args.out).write_text(
        json.dumps(
            {"task": args.task, "submission": args.submission, "processes": rows, "parallel": parallel}, indent=1
        )
    )
    if rows and "profile_tottime" in rows[-1]:
        print(rows[-1]["profile_tottime"][:3000])
        print(rows[-1]["profile_cumulative"][:3000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
