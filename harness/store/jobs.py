"""The job table: what run-all has to evaluate, and where each evaluation stands.

One row per (submission contents, task, mode, harness version). States:

- ``queued``: waiting for a GPU; ``running``: a runner has it (``node``, ``gpu``, ``started_at``);
- ``done``: its result is stored (``run_id``, ``verdict``), whatever the verdict: a submission's own
  failure, crash, timeout or rejection is its verdict;
- ``failed``: the machine or the harness failed on it more times than allowed (``retry_reasons``).

``attempts`` counts the runner starts; ``retry_reasons`` lists, as JSON, why each retry happened.
``driver`` is the ``host:pid`` of the run-all that owns the job: a rerun takes over the queued and
running jobs of a driver on the same host that is gone, and leaves those of a live one alone.
A job's result and its ``done`` state are written in one transaction (:meth:`JobTable.finish`).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field

from harness.store.database import Store, now_iso

QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
STATES = (QUEUED, RUNNING, DONE, FAILED)


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
    driver: str | None = None
    run_id: int | None = None
    verdict: str | None = None
    retry_reasons: list[str] = field(default_factory=list)
    queued_at: str = ""
    started_at: str | None = None
    finished_at: str | None = None

    @classmethod
    def from_row(cls, r) -> Job:
        names = [f.name for f in cls.__dataclass_fields__.values()]
        values = {n: r[n] for n in names}
        values["retry_reasons"] = json.loads(values["retry_reasons"] or "[]")
        return cls(**values)


def this_driver() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _driver_gone(driver: str | None) -> bool:
    """True when ``driver`` (host:pid) ran on this host and that process no longer exists."""
    if not driver or ":" not in driver:
        return True
    host, pid = driver.rsplit(":", 1)
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError):
        return False
    return int(pid) == os.getpid()  # our own pid: a job from an earlier run in this same process


@dataclass
class Claim:
    """What :meth:`JobTable.claim` decided for one submission."""

    job: Job
    outcome: str  # 'new', 'retake' (a gone driver's, or a failed job), 'done' (skip), 'busy' (skip)


class JobTable:
    def __init__(self, store: Store):
        self.store = store

    def _get(self, db, job_id: int) -> Job:
        return Job.from_row(db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone())

    def claim(
        self, task: str, mode: str, info, display_name: str, harness_version: str, begin_run, rerun: bool = False
    ) -> Claim:
        """Queue the evaluation of ``info`` (SubmissionInfo) unless it is done (``rerun``: a done job
        gets a new one, to measure again) or owned by a live driver. ``begin_run(db)`` inserts its
        'incomplete' run row and returns the id (same transaction)."""
        me = this_driver()

        def txn(db):
            db.lock(f"job:{info.sha256}:{task}:{mode}:{harness_version}")
            row = db.execute(
                "SELECT * FROM jobs WHERE submission_sha256 = ? AND task = ? AND mode = ? AND"
                " harness_version = ? ORDER BY id DESC LIMIT 1",
                (info.sha256, task, mode, harness_version),
            ).fetchone()
            if row is not None:
                job = Job.from_row(row)
                if job.state == DONE and not rerun:
                    return Claim(job, "done")
                if job.state in (QUEUED, RUNNING) and not _driver_gone(job.driver):
                    return Claim(job, "busy")
            if row is not None and job.state != DONE:
                reasons = job.retry_reasons + (
                    [f"taken over from driver {job.driver} ({job.state})"]
                    if job.state != FAILED
                    else ["rerun after failure"]
                )
                run_id = job.run_id if job.run_id is not None and job.state != FAILED else begin_run(db)
                db.execute(
                    "UPDATE jobs SET state = ?, driver = ?, run_id = ?, retry_reasons = ?, node = NULL,"
                    " gpu = NULL, submission_path = ?, display_name = ?, queued_at = ? WHERE id = ?",
                    (QUEUED, me, run_id, json.dumps(reasons), info.path, display_name, now_iso(), job.id),
                )
                return Claim(self._get(db, job.id), "retake")
            run_id = begin_run(db)
            job_id = db.execute(
                "INSERT INTO jobs (task, mode, submission_path, submission_sha256, display_name, harness_version,"
                " state, driver, run_id, queued_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (task, mode, info.path, info.sha256, display_name, harness_version, QUEUED, me, run_id, now_iso()),
            ).fetchone()["id"]
            return Claim(self._get(db, job_id), "new")

        return self.store.transaction(txn)

    def start(self, job_id: int, node: str | None, gpu: str | None, started_at: str | None = None) -> None:
        self.store.transaction(
            lambda db: db.execute(
                "UPDATE jobs SET state = ?, attempts = attempts + 1, node = ?, gpu = ?, started_at = ? WHERE id = ?",
                (RUNNING, node, gpu, started_at or now_iso(), job_id),
            )
        )

    def place(self, job_id: int, node: str | None, gpu: str | None) -> None:
        """Where a running job runs, when that is known only later (Ray Client)."""
        self.store.transaction(
            lambda db: db.execute("UPDATE jobs SET node = ?, gpu = ? WHERE id = ?", (node, gpu, job_id))
        )

    def requeue(self, job_id: int, reason: str) -> None:
        """The machine or the harness failed on this attempt: back to the queue, with the reason."""

        def txn(db):
            job = self._get(db, job_id)
            db.execute(
                "UPDATE jobs SET state = ?, retry_reasons = ?, node = NULL, gpu = NULL WHERE id = ?",
                (QUEUED, json.dumps([*job.retry_reasons, reason]), job_id),
            )

        self.store.transaction(txn)

    def finish(self, job_id: int, result, display_name: str | None = None) -> None:
        """Store the result in the job's run row and mark the job done, atomically."""

        def txn(db):
            job = self._get(db, job_id)
            self.store.write_result(db, job.run_id, result, display_name)
            db.execute(
                "UPDATE jobs SET state = ?, verdict = ?, finished_at = ? WHERE id = ?",
                (DONE, result.verdict, now_iso(), job_id),
            )

        self.store.transaction(txn)

    def fail(self, job_id: int, reason: str, result=None, display_name: str | None = None) -> None:
        """Retries exhausted: the job is failed; ``result`` (an 'error' RunResult) fills its run row."""

        def txn(db):
            job = self._get(db, job_id)
            if result is not None and job.run_id is not None:
                self.store.write_result(db, job.run_id, result, display_name)
            db.execute(
                "UPDATE jobs SET state = ?, verdict = ?, finished_at = ?, retry_reasons = ? WHERE id = ?",
                (
                    FAILED,
                    result.verdict if result else None,
                    now_iso(),
                    json.dumps([*job.retry_reasons, reason]),
                    job_id,
                ),
            )

        self.store.transaction(txn)

    def release(self, job_id: int) -> None:
        """A job this driver claimed that did not end (the request was refused): removed."""
        self.store.transaction(
            lambda db: db.execute("DELETE FROM jobs WHERE id = ? AND state IN (?, ?)", (job_id, QUEUED, RUNNING))
        )

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
