"""Throughput and scheduling overhead of run-all's executors, written to a results file.

16 jobs (distinct copies of a trivially fast correct submission) on the small-shape mxfp4 task, in
benchmark mode with a small sample budget, through :func:`harness.api.run_folder` with:

- the serial executor;
- the Ray executor on a local cluster the harness starts, 1 job at a time;
- the same, 2 jobs at a time.

For each: jobs per minute over the executor's run (the Ray cluster's start-up is reported apart),
and the per-job scheduling overhead: the job handed to the executor -> the runner started (as each
job's start report says). The load average of the machine before and after is recorded: other
processes compete for the same cores.

    python bench/bench_executors.py --out results/cpu_bench_executors.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata as md
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")

from harness.api import RunOptions, run_folder  # noqa: E402

TASK = ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml"
SUBMISSION = """# bench job {i}
from fp4_reference import mxfp4_mm_reference, unshuffle_scales_e8m0


def custom_kernel(data):
    a, _b, b_q, _b_shuffle, b_scale_sh = data
    n, k = b_q.shape[0], a.shape[1]
    return mxfp4_mm_reference(a, b_q, unshuffle_scales_e8m0(b_scale_sh, n, k // 32))
"""


def _version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    import subprocess

    out = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return out.stdout.strip() or None


def run_config(label: str, subs: Path, store: str, options: RunOptions, make_executor) -> dict:
    t0 = time.monotonic()
    executor = make_executor()
    startup = time.monotonic() - t0
    load_before = os.getloadavg()
    report = run_folder(
        subs,
        str(TASK),
        "benchmark",
        options,
        results_dir=store,
        executor=executor,
        progress=lambda line: print(f"[{label}] {line}", file=sys.stderr, flush=True),
    )
    overheads = [e.overhead_s for e in report.entries if e.overhead_s is not None]
    verdicts = sorted({e.result.verdict for e in report.entries})
    return {
        "executor": label,
        "jobs": len(report.entries),
        "verdicts": verdicts,
        "executor_start_s": round(startup, 3),
        "run_wall_s": round(report.wall_s, 3),
        "jobs_per_minute": round(len(report.entries) / report.wall_s * 60, 2),
        "overhead_s": {
            "mean": round(statistics.mean(overheads), 4),
            "median": round(statistics.median(overheads), 4),
            "max": round(max(overheads), 4),
            "per_job": [round(x, 4) for x in overheads],
        },
        "job_wall_s_median": round(statistics.median(e.elapsed_s for e in report.entries), 3),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True, help="results file (JSON)")
    ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--max-repeats", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    from harness.engine.executors.ray_executor import RayExecutor
    from harness.engine.executors.serial import SerialExecutor

    options = RunOptions(device="cpu", max_repeats=args.max_repeats)
    configs = [
        ("serial", SerialExecutor),
        ("ray, 1 at a time", lambda: RayExecutor(jobs=1, gpus_per_job=0)),
        ("ray, 2 at a time", lambda: RayExecutor(jobs=2, gpus_per_job=0)),
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-executors-") as tmp:
        for n, (label, make) in enumerate(configs):
            subs = Path(tmp) / f"subs{n}"
            subs.mkdir()
            for i in range(args.jobs):  # distinct contents per config: no job is skipped as done
                (subs / f"job{i:02d}.py").write_text(SUBMISSION.format(i=f"{n}-{i}"))
            rows.append(run_config(label, subs, str(Path(tmp) / "store"), options, make))
    serial = rows[0]["jobs_per_minute"]
    out = {
        "what": f"{args.jobs} jobs of run-all (mxfp4_small, benchmark mode, --max-repeats {args.max_repeats}, a "
        "reference-copy submission) per executor; overhead = job handed to the executor -> runner started",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": _git_commit(),
        "device": f"CPU ({platform.processor() or platform.machine()}), {os.cpu_count()} cores, no GPU",
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "ray": _version("ray"),
            "harness": _version("fp4-harness"),
        },
        "results": rows,
        "speedup_vs_serial": {r["executor"]: round(r["jobs_per_minute"] / serial, 3) for r in rows},
        "goals": {
            "ray_overhead_below_2s": all(r["overhead_s"]["mean"] < 2.0 for r in rows[1:]),
            "two_parallel_at_least_1.5x_serial": rows[2]["jobs_per_minute"] >= 1.5 * serial,
        },
        "note": "the load average before and after each row is recorded: other processes on these 2 cores slow the jobs",
    }
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: out[k] for k in ("speedup_vs_serial", "goals")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
