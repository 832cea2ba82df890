"""``history``: the past runs of one submission (by file, content hash or name)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cli.options import READ_ONLY_EXIT_CODES, add_results_dir_argument
from harness.engine.preflight import check_store_exists
from harness.report.board import resolve_task
from harness.report.runs import file_sha, find_runs, no_runs_error
from harness.report.tables import format_rows, us
from harness.store.database import open_store

EXIT_CODES = READ_ONLY_EXIT_CODES
EXAMPLES = """  python -m harness history submissions/triton_mxfp4.py --task mxfp4_mm
  python -m harness history "Fast Kernel" --task mxfp4_mm --format json

A file matches the runs of the same path, the same content (sha256) or the same display name; a name
that is not a file matches display names, file stems and sha256 prefixes (8+ hex digits). The 'sha256'
column is marked '*' where the run's content equals the file as it is now; 'commit' is the git commit
of the checkout that held the submission when it ran."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("submission", metavar="FILE", help="submission file, or its name as shown on the leaderboard")
    parser.add_argument("--task", required=True, help="task name, e.g. mxfp4_mm")
    parser.add_argument("--format", choices=("table", "markdown", "json", "csv"), default="table")
    add_results_dir_argument(parser)


def run(args: argparse.Namespace) -> int:
    args.task = resolve_task(args.task)[0]
    check_store_exists(args.results_dir)
    with open_store(args.results_dir) as st:
        runs = find_runs(st, args.task, args.submission)
        if not runs:
            raise no_runs_error(st, args.task, args.submission)
    current = file_sha(Path(args.submission))
    if args.format == "json":
        items = [dict(vars(r), current=r.submission_sha256 == current) for r in runs]
        sys.stdout.write(
            json.dumps(
                {"version": 1, "task": args.task, "submission": args.submission, "runs": items},
                indent=2,
                sort_keys=True,
                allow_nan=False,
            )
            + "\n"
        )
        return 0
    headers = ["run", "date", "name", "mode", "device", "verdict", "score (us)", "sha256", "commit", "message"]
    rows: list[list[object]] = []
    for r in runs:
        verdict = r.verdict if r.complete or r.verdict == "incomplete" else f"{r.verdict} (interrupted)"
        sha = r.submission_sha256[:10] + ("*" if r.submission_sha256 == current else "")
        message = (r.message.splitlines() or [""])[0][:80]
        score = (repr(r.score_us) if r.score_us is not None else "") if args.format == "csv" else us(r.score_us)
        rows.append(
            [
                r.id,
                r.started_at[:16].replace("T", " "),
                r.display_name,
                r.mode,
                r.device_name or "-",
                verdict,
                score,
                sha,
                r.git_commit or "-",
                message,
            ]
        )
    sys.stdout.write(format_rows(headers, rows, args.format, right=[0, 6]))
    return 0
