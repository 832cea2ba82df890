#!/usr/bin/env python
"""CI: run the example submissions of every task and print the markdown leaderboards.

For each task (default: every task under tasks/), runs ``python -m harness run-all submissions/
--task TASK`` into a results dir (default: a fresh temporary one), then renders that task's
leaderboard as markdown on stdout (``--out FILE`` also writes it; ``--site DIR`` also writes the
leaderboard site there, for CI to publish as an artifact). Progress goes to stderr.

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
    python scripts/ci_leaderboard.py --quick --device cpu --site site/
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
from harness.api import RunOptions, UsageError, load_board, render_board, run_folder  # noqa: E402
from harness.engine.folder import load_task_or_usage_error  # noqa: E402
from harness.engine.submission import discover  # noqa: E402
from harness.errors import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--task",
        action="append",
        dest="tasks",
        metavar="TASK",
        help="task name or task.yml path (repeatable; default: every task under tasks/)",
    )
    p.add_argument(
        "--submissions",
        default=str(ROOT / "submissions"),
        metavar="DIR",
        help="folder of example submissions (default: submissions/)",
    )
    p.add_argument(
        "--mode",
        default="test+benchmark",
        choices=("test", "benchmark", "test+benchmark", "leaderboard"),
        help="run-all mode (default: test+benchmark)",
    )
    p.add_argument("--tests-only", action="store_true", help="same as --mode test: correctness only, no ranking")
    p.add_argument("--quick", action="store_true", help="small timing budget: 3 samples, at most 0.5 s per shape")
    p.add_argument("--device", default=None, help="auto (default), cpu, or cuda[:N]")
    p.add_argument("--max-repeats", type=int, default=None, help="most samples per benchmark shape")
    p.add_argument("--max-time", type=float, default=None, metavar="S", help="measured seconds per shape")
    p.add_argument("--results-dir", default=None, help="keep the results here (default: a temporary folder)")
    p.add_argument("--out", default=None, metavar="FILE", help="also write the markdown here")
    p.add_argument(
        "--site",
        default=None,
        metavar="DIR",
        help="also write the leaderboard site (index.html, run pages, plots) into this folder",
    )
    return p.parse_args(argv)


def run_task(task: str, args, results_dir: str) -> int:
    """Runs the examples on one task through the library's run-all; EXIT_INTERNAL if the harness failed
    on one of them."""
    options = RunOptions(device=args.device, max_repeats=args.max_repeats, max_time_s=args.max_time)
    report = run_folder(
        args.submissions,
        task,
        "test" if args.tests_only else args.mode,
        options,
        results_dir=results_dir,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    return EXIT_INTERNAL if report.internal_errors else EXIT_OK


def board_markdown(task: str, results_dir: str) -> str:
    board, warnings = load_board(task, results_dir=results_dir)
    for w in warnings:
        print(w, file=sys.stderr)
    return render_board(board, "markdown")


def write_site(site_dir: str, tasks: list[str], results_dir: str) -> None:
    from harness.report.site import build_site  # Plotly and Jinja2

    build = build_site(site_dir, tasks, results_dir=results_dir)
    print(f"wrote {build.index} ({len(build.run_pages)} run pages, {build.plots} plots)", file=sys.stderr)


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
            try:
                spec = load_task_or_usage_error(task)
                if not discover(args.submissions, (spec.name, spec.compat_dir.parent.name))[0]:
                    parts.append(f"_{task}: no example submissions in {args.submissions}._\n")
                    continue
                status = run_task(task, args, results_dir) or status
            except UsageError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return EXIT_USAGE
            parts.append(board_markdown(task, results_dir))
        text = "\n".join(parts)
        if args.site:
            try:
                write_site(args.site, args.tasks, results_dir)
            except UsageError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return EXIT_USAGE
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
