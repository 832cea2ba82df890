#!/usr/bin/env python
"""CI: run the example submissions of every task and print the markdown leaderboards.

For each task (default: every task under tasks/), runs ``python -m harness run-all submissions/
--task TASK`` into a results dir (default: a fresh temporary one), then renders that task's
leaderboard as markdown on stdout (``--out FILE`` also writes it). Progress goes to stderr.

Which submission belongs to which task is run-all's rule: a ``# task: NAME`` (or ``#!POPCORN
leaderboard ...``) header line, else a keyword in the file name (``mxfp4``/``gluon`` -> mxfp4_mm,
``nvfp4`` -> nvfp4_gemm); see ``harness/commands/run_all.py``.

On a 2-core CPU, ``--tests-only`` (correctness only, about half a minute per task) or ``--quick``
(3 samples per benchmark shape, at most 0.5 s each) keep it to a few minutes.

Exit status: 0 when every task's submissions all ran (their verdicts are in the tables), 2 for a
usage error, 70 when the harness failed internally on some submission.

    python scripts/ci_leaderboard.py --tests-only
    python scripts/ci_leaderboard.py --quick --device cpu --out leaderboard.md
    python scripts/ci_leaderboard.py --task mxfp4_mm --results-dir ci-results
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import harness  # noqa: E402
from harness.cli import main as harness_main  # noqa: E402
from harness.commands.leaderboard import leaderboard_text  # noqa: E402
from harness.submission import discover  # noqa: E402
from harness.errors import EXIT_OK, EXIT_USAGE  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", action="append", dest="tasks", metavar="TASK",
                   help="task name or task.yml path (repeatable; default: every task under tasks/)")
    p.add_argument("--submissions", default=str(ROOT / "submissions"), metavar="DIR",
                   help="folder of example submissions (default: submissions/)")
    p.add_argument("--mode", default="test+benchmark", choices=("test", "benchmark", "test+benchmark", "leaderboard"),
                   help="run-all mode (default: test+benchmark)")
    p.add_argument("--tests-only", action="store_true", help="same as --mode test: correctness only, no ranking")
    p.add_argument("--quick", action="store_true", help="small timing budget: 3 samples, at most 0.5 s per shape")
    p.add_argument("--device", default=None, help="auto (default), cpu, or cuda[:N]")
    p.add_argument("--max-repeats", type=int, default=None, help="most samples per benchmark shape")
    p.add_argument("--max-time", type=float, default=None, metavar="S", help="measured seconds per shape")
    p.add_argument("--results-dir", default=None, help="keep the results here (default: a temporary folder)")
    p.add_argument("--out", default=None, metavar="FILE", help="also write the markdown here")
    return p.parse_args(argv)


def _task_names(task: str) -> tuple[str, ...]:
    """The task's own name and the name of the task it implements (a small-shape copy's original)."""
    from tasks import load_task
    spec = load_task(task)
    return spec.name, spec.compat_dir.parent.name


def run_task(task: str, args, results_dir: str) -> int:
    mode = "test" if args.tests_only else args.mode
    argv = ["run-all", args.submissions, "--task", task, "--mode", mode, "--results-dir", results_dir]
    for flag, value in (("--device", args.device), ("--max-repeats", args.max_repeats), ("--max-time", args.max_time)):
        if value is not None:
            argv += [flag, str(value)]
    return harness_main(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.quick:
        args.max_repeats = args.max_repeats or 3
        args.max_time = args.max_time or 0.5
    if args.tasks is None:
        from tasks import list_tasks
        args.tasks = list_tasks()
    with tempfile.TemporaryDirectory(prefix="ci-leaderboard-") as tmp:
        results_dir = args.results_dir or tmp
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        mode = "test" if args.tests_only else args.mode
        parts = [f"## Leaderboard (example submissions, mode {mode}, harness {harness.__version__}, {stamp})\n"]
        status = EXIT_OK
        for task in args.tasks:
            if not Path(args.submissions).is_dir():
                print(f"error: {args.submissions} is not a folder; pass --submissions DIR", file=sys.stderr)
                return EXIT_USAGE
            if not discover(args.submissions, _task_names(task))[0]:
                parts.append(f"_{task}: no example submissions in {args.submissions}._\n")
                continue
            code = run_task(task, args, results_dir)
            if code == EXIT_USAGE:
                return code
            status = status or code
            parts.append(leaderboard_text(task, fmt="markdown", results_dir=results_dir))
        text = "\n".join(parts)
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
