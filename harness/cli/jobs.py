"""``jobs``: where run-all's jobs stand (the store's job table): counts per state, each queued job's
place in the queue, the running ones with their owner, lease and node, the stale ones (a lease that
ran out: the driver is gone), the failed ones with their reason; ``--release`` gives jobs back."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from typing import Any

from harness.cli.options import READ_ONLY_EXIT_CODES, add_results_dir_argument
from harness.engine.preflight import check_store_exists
from harness.errors import UsageError
from harness.report.board import resolve_task
from harness.report.tables import format_rows
from harness.store.database import open_store
from harness.store.jobs import DONE, FAILED, QUEUED, RUNNING, STATES, Job, JobTable

EXIT_CODES = {
    0: "the jobs were listed (or released)",
    2: "usage error: bad arguments, unknown task, unreadable store, --release of an unknown owner",
    70: "internal error in the harness (please report it)",
    141: "the output pipe closed early: the rest of the output was dropped, quietly",
}

EXIT_CODES = READ_ONLY_EXIT_CODES
EXAMPLES = """  python -m harness jobs                           # every task
  python -m harness jobs --task mxfp4_mm --all     # also the done ones
  python -m harness jobs --store postgresql://harness:pw@db-host/harness --format json

  python -m harness jobs --release 3f2a9c1e         # a driver's running jobs back to the queue
  python -m harness jobs --release --stale          # every job whose lease ran out

Queued jobs are listed in the order run-all hands them out ('place' 1 is next). A running job shows
its owner (the driver's id, first 8 characters; --format json gives it whole), its driver's host:pid,
and 'lease' (seconds left, or 'STALE Ns': it ran out N s ago, the driver is gone: any run-all takes it
over, or release it now). A job's 'attempts' counts runner starts; 'retries' gives why each retry
happened (the machine or the harness failed); a 'failed' job failed (infrastructure): no verdict,
the next run-all runs it again."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", help="only this task (name or task.yml)")
    parser.add_argument("--all", action="store_true", help="also list the done jobs")
    parser.add_argument("--format", choices=("table", "markdown", "json", "csv"), default="table")
    parser.add_argument(
        "--release",
        nargs="?",
        const="",
        metavar="OWNER",
        help="put the running jobs of driver OWNER (its id, or a prefix of 4+ characters) back in the queue; "
        "with --stale: every job whose lease ran out",
    )
    parser.add_argument("--stale", action="store_true", help="with --release: the jobs whose lease ran out")
    add_results_dir_argument(parser)


def _short(text: str | None, n: int = 70) -> str:
    return (text or "").splitlines()[0][:n] if text else ""


def _lease(job: Job, now: float) -> str:
    if job.state != RUNNING:
        return ""
    if job.stale(now):
        return f"STALE {now - (job.lease_expires or now):.0f}s"
    return f"{(job.lease_expires or now) - now:.0f}s"


def _release(args: argparse.Namespace) -> int:
    if bool(args.release) == bool(args.stale):
        raise UsageError("give --release OWNER (an id from the 'owner' column of 'jobs') or --release --stale")
    with open_store(args.results_dir) as st:
        table = JobTable(st)
        if args.stale:
            n = table.release(stale=True)
            print(f"released {n} stale job(s) to the queue", file=sys.stderr)
            return 0
        owners = [o for o in table.owners() if o.startswith(args.release)]
        if len(args.release) < 4 or len(owners) != 1:
            found = "no running job has it" if not owners else f"{len(owners)} owners match"
            raise UsageError(
                f"--release {args.release}: {found}; give an owner id (4+ characters) from the 'owner' column of 'jobs'"
            )
        n = table.release(owner=owners[0])
        print(f"released {n} job(s) of driver {owners[0][:8]} to the queue", file=sys.stderr)
    return 0


HEADERS = [
    "job",
    "state",
    "place",
    "task",
    "mode",
    "name",
    "attempts",
    "owner",
    "driver",
    "lease",
    "node",
    "gpu",
    "started",
    "verdict",
    "retries",
]


def _row(j: Job, place: dict[int, int], now: float) -> list[Any]:
    return [
        j.id,
        j.state,
        place.get(j.id, ""),
        j.task,
        j.mode,
        j.display_name,
        j.attempts,
        (j.owner or "")[:8],
        (j.driver or "") if j.state == RUNNING else "",
        _lease(j, now),
        j.node or "",
        j.gpu or "",
        (j.started_at or "")[:19].replace("T", " "),
        j.verdict or "",
        f"{len(j.retry_reasons)}: {_short(j.failure or j.retry_reasons[-1])}" if j.retry_reasons else "",
    ]


def run(args: argparse.Namespace) -> int:
    if args.release is not None or args.stale:
        if args.release is None:
            raise UsageError("--stale goes with --release: python -m harness jobs --release --stale")
        return _release(args)
    task = resolve_task(args.task)[0] if args.task else None
    check_store_exists(args.results_dir)  # a command that reads never creates the store
    with open_store(args.results_dir) as st:
        jobs = JobTable(st).jobs(task=task)
    _show(jobs, task, args.format, args.all, time.time())
    return 0


def _summary(jobs: list[Job], counts: dict[str, int], now: float) -> str:
    stale = sum(j.stale(now) for j in jobs)
    note = f"; {stale} stale (lease ran out: release with --release --stale)" if stale else ""
    return ", ".join(f"{counts[s]} {s}" for s in STATES) + f" ({len(jobs)} jobs){note}"


def _show(jobs: list[Job], task: str | None, fmt: str, everything: bool, now: float) -> None:
    counts = {s: sum(j.state == s for j in jobs) for s in STATES}
    place = {j.id: i for i, j in enumerate((j for j in jobs if j.state == QUEUED), 1)}
    order = {QUEUED: 0, RUNNING: 1, FAILED: 2, DONE: 3}
    shown = sorted((j for j in jobs if everything or j.state != DONE), key=lambda j: (order[j.state], j.id))
    if fmt == "json":
        out = {
            "version": 1,
            "task": task,
            "counts": counts,
            "jobs": [dict(asdict(j), place=place.get(j.id), stale=j.stale(now)) for j in shown],
        }
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
        return
    if fmt in ("table", "markdown"):
        print(_summary(jobs, counts, now), file=sys.stderr, flush=True)
        if not shown:  # no table of headers alone
            print("no job is queued, running or failed; --all lists the done ones", file=sys.stderr)
            return
    table = format_rows(HEADERS, [_row(j, place, now) for j in shown], fmt, right=[0, 2, 6])
    sys.stdout.write(table if table.endswith("\n") else table + "\n")
