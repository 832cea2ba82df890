"""run-all's job table: one row per (submission contents, task, mode, harness version), claimed by lease.

States: ``queued`` (anyone may claim it), ``running`` (claimed: ``owner`` is the claiming driver's
uuid, ``lease_expires`` the time, in epoch seconds, after which any driver may take it over; the
owner's heartbeat pushes it forward), ``done`` (its verdict is stored in its run row) and ``failed``
(the infrastructure gave up on it after its retries: ``failure`` says why; it has no verdict and no
run row, and the next run-all queues it again).

Several drivers, on one host or many, share the queue: each enqueues the files it has, then claims one
job at a time (``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE``
serializes claims) among the jobs whose contents it holds. A result is written only by the job's
owner and only once (a job that is done stays done): one finished verdict per job, always.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.store.database import Store, now_iso

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
STATES = (QUEUED, RUNNING, DONE, FAILED)
DEFAULT_LEASE_S = 60.0  # a claim nobody renews for this long is claimable by any driver
CLAIM_CHUNK = 500  # hashes per IN (...) list (SQLite's bound-parameter limit)


@dataclass
class Job:
    id: int
    task: str
    mode: str
    submission_path: str
    submission_sha256: str
    display_name: str
    harness_version: str
    state: str
    attempts: int = 0
    node: str | None = None
    gpu: str | None = None
    driver: str | None = None  # host:pid of the owner, for people
    run_id: int | None = None
    verdict: str | None = None
    retry_reasons: list[str] = field(default_factory=list)
    queued_at: str = ""
    started_at: str | None = None
    finished_at: str | None = None
    owner: str | None = None
    lease_expires: float | None = None
    failure: str | None = None

    @classmethod
    def from_row(cls, r: Any) -> Job:
        names = [f.name for f in cls.__dataclass_fields__.values()]
        values = {n: r[n] for n in names}
        values["retry_reasons"] = json.loads(values["retry_reasons"] or "[]")
        return cls(**values)

    def stale(self, now: float | None = None) -> bool:
        """Running under a lease that has run out: its owner is gone (or stuck); any driver may take it."""
        now = time.time() if now is None else now
        return self.state == RUNNING and (self.lease_expires is None or self.lease_expires < now)


def new_owner() -> str:
    """A driver's owner id: unique across hosts and pid reuse."""
    return uuid.uuid4().hex


def driver_label() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Enqueued:
    """What :meth:`JobTable.enqueue` found or made for one submission."""

    job: Job
    outcome: str  # 'new', 'queued' (waiting, or requeued after a failure/--rerun), 'running', 'done'


class JobTable:
    def __init__(self, store: Store):
        self.store = store

    @staticmethod
    def _get(db: Any, job_id: int) -> Job:
        return Job.from_row(db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

    def get(self, job_id: int) -> Job:
        return self._get(self.store.db, job_id)

    # --- queueing and claiming ------------------------------------------------------------------

    def enqueue(
        self, task: str, mode: str, info: Any, display_name: str, harness_version: str, rerun: bool
    ) -> Enqueued:
        """Puts the evaluation of ``info`` (a SubmissionInfo) in the queue unless it is there: a done job
        stays done (``rerun``: queued again, its next claim makes a new run row), a failed one is queued
        again; a queued or running one is left as it is."""
        key = (info.sha256, task, mode, harness_version)

        def txn(db: Any) -> Enqueued:
            inserted = db.execute(
                "INSERT INTO jobs (task, mode, submission_path, submission_sha256, display_name, harness_version,"
                " state, queued_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (submission_sha256, task, mode, harness_version) DO NOTHING",
                (task, mode, info.path, info.sha256, display_name, harness_version, QUEUED, now_iso()),
            ).rowcount
            job = Job.from_row(
                db.execute(
                    "SELECT * FROM jobs WHERE submission_sha256 = ? AND task = ? AND mode = ? AND harness_version = ?",
                    key,
                ).fetchone()
            )
            if inserted == 1:
                return Enqueued(job, "new")
            if job.state == FAILED or (job.state == DONE and rerun):
                reason = f"rerun after: {job.failure}" if job.state == FAILED else "rerun (--rerun)"
                db.execute(
                    "UPDATE jobs SET state = ?, run_id = NULL, verdict = NULL, failure = NULL, owner = NULL,"
                    " lease_expires = NULL, node = NULL, gpu = NULL, retry_reasons = ?, queued_at = ? WHERE id = ?",
                    (QUEUED, json.dumps([*job.retry_reasons, reason]), now_iso(), job.id),
                )
                return Enqueued(self._get(db, job.id), QUEUED)
            return Enqueued(job, job.state)

        out: Enqueued = self.store.transaction(txn)
        return out

    def claim_next(
        self,
        owner: str,
        sha256s: Sequence[str],
        task: str,
        mode: str,
        harness_version: str,
        begin_run: Callable[[Any, Job], int],
        lease_s: float = DEFAULT_LEASE_S,
    ) -> Job | None:
        """Claims one job among ``sha256s`` (for ``task``, ``mode``, ``harness_version``) that is queued or
        whose lease ran out, for ``owner``, until ``lease_s`` from now; None when there is none now.
        ``begin_run(db, job)`` inserts its 'incomplete' run row (same transaction) when it has none."""
        for start in range(0, len(sha256s), CLAIM_CHUNK):
            chunk = list(sha256s[start : start + CLAIM_CHUNK])

            def txn(db: Any, chunk: list[str] = chunk) -> Job | None:
                return self._claim_in(db, owner, chunk, task, mode, harness_version, begin_run, lease_s)

            job: Job | None = self.store.transaction(txn)
            if job is not None:
                return job
        return None

    def _claim_in(
        self,
        db: Any,
        owner: str,
        chunk: list[str],
        task: str,
        mode: str,
        harness_version: str,
        begin_run: Callable[[Any, Job], int],
        lease_s: float,
    ) -> Job | None:
        now = time.time()
        marks = ", ".join("?" * len(chunk))
        row = db.execute(
            f"SELECT * FROM jobs WHERE task = ? AND mode = ? AND harness_version = ? AND submission_sha256 IN ({marks})"
            " AND (state = ? OR (state = ? AND (lease_expires IS NULL OR lease_expires < ?)))"
            " ORDER BY id LIMIT 1" + db.skip_locked,
            (task, mode, harness_version, *chunk, QUEUED, RUNNING, now),
        ).fetchone()
        if row is None:
            return None
        job = Job.from_row(row)
        reasons = job.retry_reasons
        if job.state == RUNNING:
            reasons = [*reasons, f"taken over: the lease of driver {job.driver} ran out"]
        run_id = job.run_id
        if run_id is None or not _incomplete(db, run_id):
            run_id = begin_run(db, job)
        db.execute(
            "UPDATE jobs SET state = ?, owner = ?, driver = ?, lease_expires = ?, run_id = ?, retry_reasons = ?,"
            " node = NULL, gpu = NULL WHERE id = ?",
            (RUNNING, owner, driver_label(), now + lease_s, run_id, json.dumps(reasons), job.id),
        )
        return self._get(db, job.id)

    def outstanding(self, sha256s: Sequence[str], task: str, mode: str, harness_version: str) -> int:
        """How many of these jobs are still queued or running (anyone's)."""
        n = 0
        for start in range(0, len(sha256s), CLAIM_CHUNK):
            chunk = list(sha256s[start : start + CLAIM_CHUNK])
            row = self.store.db.execute(
                "SELECT count(*) AS n FROM jobs WHERE task = ? AND mode = ? AND harness_version = ? AND"
                f" submission_sha256 IN ({', '.join('?' * len(chunk))}) AND state IN (?, ?)",
                (task, mode, harness_version, *chunk, QUEUED, RUNNING),
            ).fetchone()
            n += int(row["n"])
        return n

    def heartbeat(self, owner: str, lease_s: float = DEFAULT_LEASE_S) -> int:
        """Renews every lease of ``owner``; returns how many it holds."""
        cur = self.store.transaction(
            lambda db: db.execute(
                "UPDATE jobs SET lease_expires = ? WHERE owner = ? AND state = ?",
                (time.time() + lease_s, owner, RUNNING),
            )
        )
        return int(cur.rowcount)

    # --- one job's life -------------------------------------------------------------------------

    def start(self, job_id: int, node: str | None, gpu: str | None, started_at: str | None = None) -> None:
        self.store.transaction(
            lambda db: db.execute(
                "UPDATE jobs SET attempts = attempts + 1, node = ?, gpu = ?, started_at = ? WHERE id = ?",
                (node, gpu, started_at or now_iso(), job_id),
            )
        )

    def place(self, job_id: int, node: str | None, gpu: str | None) -> None:
        """Where a running job runs, when that is known only later (Ray Client)."""
        self.store.transaction(
            lambda db: db.execute("UPDATE jobs SET node = ?, gpu = ? WHERE id = ?", (node, gpu, job_id))
        )

    def note_retry(self, job_id: int, reason: str) -> None:
        """The machine or the harness failed on this attempt; the owner tries again (it keeps the lease)."""

        def txn(db: Any) -> None:
            job = self._get(db, job_id)
            db.execute(
                "UPDATE jobs SET retry_reasons = ?, node = NULL, gpu = NULL WHERE id = ?",
                (json.dumps([*job.retry_reasons, reason]), job_id),
            )

        self.store.transaction(txn)

    def finish(self, job_id: int, owner: str | None, result: Any, display_name: str | None = None) -> bool:
        """Stores the result in the job's run row and marks the job done, atomically, when ``owner`` still
        holds it (None: whoever holds it, for a spooled result of a driver that is gone) and it is not done.
        Returns False (nothing written) otherwise: the job's one verdict is someone else's. Idempotent."""

        def txn(db: Any) -> bool:
            job = self._get(db, job_id)
            if job.state == DONE or job.run_id is None or (owner is not None and job.owner != owner):
                return False
            self.store.write_result(db, job.run_id, result, display_name)
            db.execute(
                "UPDATE jobs SET state = ?, verdict = ?, finished_at = ?, owner = NULL, lease_expires = NULL,"
                " failure = NULL WHERE id = ?",
                (DONE, result.verdict, now_iso(), job_id),
            )
            return True

        ok: bool = self.store.transaction(txn)
        return ok

    def fail_infrastructure(self, job_id: int, owner: str, reason: str) -> None:
        """Retries exhausted on failures of the machine or the harness: the job is ``failed`` with
        ``reason`` and no verdict; its unfinished run row goes (the next run-all queues it again)."""

        def txn(db: Any) -> None:
            job = self._get(db, job_id)
            if job.state != RUNNING or job.owner != owner:
                return
            if job.run_id is not None:
                _drop_incomplete(db, job.run_id)
            db.execute(
                "UPDATE jobs SET state = ?, failure = ?, retry_reasons = ?, finished_at = ?, owner = NULL,"
                " lease_expires = NULL, run_id = NULL, verdict = NULL WHERE id = ?",
                (FAILED, reason, json.dumps([*job.retry_reasons, reason]), now_iso(), job_id),
            )

        self.store.transaction(txn)

    def release(self, *, owner: str | None = None, stale: bool = False, job_ids: Sequence[int] = ()) -> int:
        """Returns running jobs to the queue: those of ``owner``, the stale ones, or ``job_ids``
        (running ones only). Their unfinished run rows are kept for the next claim. Returns how many."""
        clauses: list[str] = []
        params: list[Any] = []
        if owner is not None:
            clauses.append("owner = ?")
            params.append(owner)
        if stale:
            clauses.append("(lease_expires IS NULL OR lease_expires < ?)")
            params.append(time.time())
        if job_ids:
            clauses.append(f"id IN ({', '.join('?' * len(job_ids))})")
            params.extend(job_ids)
        if not clauses:
            return 0
        sql = (
            "UPDATE jobs SET state = ?, owner = NULL, lease_expires = NULL, node = NULL, gpu = NULL"
            " WHERE state = ? AND " + " AND ".join(clauses)
        )
        cur = self.store.transaction(lambda db: db.execute(sql, (QUEUED, RUNNING, *params)))
        return int(cur.rowcount)

    def owners(self) -> list[str]:
        rows = self.store.db.execute("SELECT DISTINCT owner FROM jobs WHERE owner IS NOT NULL").fetchall()
        return [r["owner"] for r in rows]

    def run_id_of(self, job_id: int) -> int | None:
        row = self.store.db.execute("SELECT run_id FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return None if row is None else row["run_id"]

    # --- reading --------------------------------------------------------------------------------

    def jobs(self, *, task: str | None = None, state: str | None = None) -> list[Job]:
        sql, params = "SELECT * FROM jobs", []
        clauses = []
        if task:
            clauses.append("task = ?")
            params.append(task)
        if state:
            clauses.append("state = ?")
            params.append(state)
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        return [Job.from_row(r) for r in self.store.db.execute(sql + " ORDER BY id", params).fetchall()]

    def counts(self, task: str | None = None) -> dict[str, int]:
        out = dict.fromkeys(STATES, 0)
        for job in self.jobs(task=task):
            out[job.state] = out.get(job.state, 0) + 1
        return out


def _incomplete(db: Any, run_id: int) -> bool:
    row = db.execute("SELECT complete, result_json FROM runs WHERE id = ?", (run_id,)).fetchone()
    return row is not None and not row["complete"] and row["result_json"] is None


def _drop_incomplete(db: Any, run_id: int) -> None:
    db.execute("DELETE FROM runs WHERE id = ? AND complete = 0 AND result_json IS NULL", (run_id,))
