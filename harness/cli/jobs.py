"""``jobs``: where run-all's jobs stand (the store's job table): counts per state, each queued job's
place in the queue, the running ones with their node and GPU, and the failed ones with their reason."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from harness.cli.options import READ_ONLY_EXIT_CODES, add_results_dir_argument
from harness.engine.preflight import check_store_exists
from harness.report.board import resolve_task
from harness.report.tables import format_rows
from harness.store.database import open_store
from harness.store.jobs import DONE, FAILED, QUEUED, RUNNING, STATES, JobTable

EXIT_CODES = READ_ONLY_EXIT_CODES
EXAMPLES = """  python -m harness jobs                           # every task
  python -m harness jobs --task mxfp4_mm --all     # also the done ones
  python -m harness jobs --store postgresql://harness:pw@db-host/harness --format json

Queued jobs are listed in the order run-all hands them out ('place' 1 is next). A job's 'attempts'
counts runner starts; 'retries' gives why each retry happened (the machine or the harness failed)."""


def add_arguments(parser) -> None:
    parser.add_argument("--task", help="only this task (name or task.yml)")
    parser.add_argument("--all", action="store_true", help="also list the done jobs")
    parser.add_argument("--format", choices=("table", "markdown", "json", "csv"), default="table")
    add_results_dir_argument(parser)


def _short(text: str | None, n: int = 70) -> str:
    return (text or "").splitlines()[0][:n] if text else ""


def run(args) -> int:
    task = resolve_task(args.task)[0] if args.task else None
    check_store_exists(args.results_dir)  # a command that reads never creates the store
    with open_store(args.results_dir) as st:
        jobs = JobTable(st).jobs(task=task)
    counts = {s: sum(j.state == s for j in jobs) for s in STATES}
    queued = [j for j in jobs if j.state == QUEUED]
    place = {j.id: i for i, j in enumerate(queued, 1)}
    shown = [j for j in jobs if args.all or j.state != DONE]
    order = {QUEUED: 0, RUNNING: 1, FAILED: 2, DONE: 3}
    shown.sort(key=lambda j: (order[j.state], j.id))
    if args.format == "json":
        out = {
            "version": 1,
            "task": task,
            "counts": counts,
            "jobs": [dict(asdict(j), place=place.get(j.id)) for j in shown],
        }
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
        return 0
    if args.format in ("table", "markdown"):
        print(", ".join(f"{counts[s]} {s}" for s in STATES) + f" ({len(jobs)} jobs)", file=sys.stderr, flush=True)
    headers = [
        "job",
        "state",
        "place",
        "task",
        "mode",
        "name",
        "attempts",
        "node",
        "gpu",
        "started",
        "verdict",
        "retries",
    ]
    rows = [
        [
            j.id,
            j.state,
            place.get(j.id, ""),
            j.task,
            j.mode,
            j.display_name,
            j.attempts,
            j.node or "",
            j.gpu or "",
            (j.started_at or "")[:19].replace("T", " "),
            j.verdict or "",
            f"{len(j.retry_reasons)}: {_short(j.retry_reasons[-1])}" if j.retry_reasons else "",
        ]
        for j in shown
    ]
    table = format_rows(headers, rows, args.format, right=[0, 2, 6])
    sys.stdout.write(table if table.endswith("\n") else table + "\n")
    return 0
