"""The results store: every run the harness makes, in SQLite (the default) or PostgreSQL.

Where: ``--store`` / ``--results-dir`` (the same option), else ``$HARNESS_STORE``, else
``$HARNESS_RESULTS_DIR``, else ``./harness-results``. A ``postgresql://`` URL names a PostgreSQL
database (psycopg 3); a path ending in ``.sqlite`` or ``.db`` names an SQLite file; any other path is
a folder holding ``results.sqlite``. Schema and migrations: :mod:`harness.store.schema` (one set for
both); engines: :mod:`harness.store.backends`; the job table: :mod:`harness.store.jobs`.

Lifecycle of a run: :meth:`Store.begin_run` inserts a row with ``complete = 0`` and
``verdict = 'incomplete'`` before the submission starts; :meth:`Store.finish_run` fills it in, with
all its cases, in one transaction. A process killed in between leaves that 'incomplete' row and
nothing half-written. Several processes may write at once (see backends).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.results import DeviceInfo, RunResult, SubmissionInfo
from harness.store.backends import PostgresBackend, SQLiteBackend
from harness.store.rows import CaseRow, Filter, RunRow, case_row, run_row
from harness.store.schema import MIGRATIONS, SCHEMA_VERSION  # noqa: F401  (re-exported)

ENV_STORE = "HARNESS_STORE"
ENV_RESULTS_DIR = "HARNESS_RESULTS_DIR"
DEFAULT_RESULTS_DIR = "harness-results"
DB_FILENAME = "results.sqlite"
INCOMPLETE = "incomplete"  # verdict of a run that began and never finished
POSTGRES_PREFIXES = ("postgres://", "postgresql://")

__all__ = ["INCOMPLETE", "SCHEMA_VERSION", "CaseRow", "RunRow", "Store", "now_iso", "open_store"]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def resolve_location(location: str | None = None) -> str:
    """The store's location: the argument, else $HARNESS_STORE, else $HARNESS_RESULTS_DIR, else
    ./harness-results."""
    return location or os.environ.get(ENV_STORE) or os.environ.get(ENV_RESULTS_DIR) or DEFAULT_RESULTS_DIR


def open_store(location: str | None = None) -> Store:
    """Open (creating and migrating as needed) the store at a results dir, a .sqlite file or a
    postgresql:// URL."""
    location = resolve_location(location)
    if location.startswith(POSTGRES_PREFIXES):
        return Store(PostgresBackend(location))
    if "://" in location:
        raise UsageError(
            f"unknown store URL {location.split('://')[0]}://...: give an SQLite path (a folder, "
            "or a .sqlite/.db file) or a postgresql://user:password@host:port/database URL"
        )
    path = Path(location)
    if path.suffix not in (".sqlite", ".db"):
        if path.is_file():
            raise UsageError(
                f"the results store {path} is a file, not a folder; name an SQLite file with a "
                ".sqlite or .db suffix, or give a folder"
            )
        path = path / DB_FILENAME
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot create the results dir {path.parent}: {exc}; choose another with --store or --results-dir"
        ) from exc
    return Store(SQLiteBackend(path))


def git_commit_of(path: str | os.PathLike) -> str | None:
    """Short commit hash of the git checkout holding ``path``, or None outside git."""
    try:
        out = subprocess.run(
            ["git", "-C", str(Path(path).resolve().parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def _json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, allow_nan=False, default=str)


def _software(device: DeviceInfo | None) -> dict[str, Any]:
    sw: dict[str, Any] = {"python": platform.python_version()}
    if device is not None:
        for key in ("torch", "triton", "driver", "capability"):
            if getattr(device, key) is not None:
                sw[key] = getattr(device, key)
    return sw


class Store:
    """The results store over one backend connection; open one per process (or thread)."""

    def __init__(self, backend: Any):
        self.db = backend
        self.path = backend.path  # a Path for SQLite, the redacted URL for PostgreSQL
        self.location = backend.location

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        return self.db.schema_version()

    def transaction(self, fn: Callable[[Any], Any]) -> Any:
        return self.db.transaction(fn)

    # --- writing --------------------------------------------------------------------------------

    def begin_run(
        self,
        task: str,
        mode: str,
        submission: SubmissionInfo,
        *,
        display_name: str | None = None,
        device: DeviceInfo | None = None,
        harness_version: str | None = None,
        git_commit: str | None = None,
        started_at: str | None = None,
    ) -> int:
        """Insert an 'incomplete' row for a run that is about to start; returns its id."""
        return self.transaction(
            lambda db: self.insert_run(
                db, task, mode, submission, display_name, device, harness_version, git_commit, started_at
            )
        )

    @staticmethod
    def insert_run(
        db: Any,
        task: str,
        mode: str,
        submission: SubmissionInfo,
        display_name: str | None = None,
        device: DeviceInfo | None = None,
        harness_version: str | None = None,
        git_commit: str | None = None,
        started_at: str | None = None,
    ) -> int:
        row = (
            task,
            mode,
            submission.path,
            submission.sha256,
            submission.name,
            display_name or submission.name,
            device.name if device else None,
            device.kind if device else None,
            _json(_software(device)),
            harness_version,
            git_commit,
            started_at or now_iso(),
            INCOMPLETE,
        )
        return db.execute(
            "INSERT INTO runs (task, mode, submission_path, submission_sha256, submission_name, display_name,"
            " device_name, device_kind, software, harness_version, git_commit, started_at, verdict, complete)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0) RETURNING id",
            row,
        ).fetchone()["id"]

    def finish_run(self, run_id: int, result: RunResult, *, display_name: str | None = None) -> None:
        """Fill in a begun run with its result and cases, atomically."""
        self.transaction(lambda db: self.write_result(db, run_id, result, display_name))

    def write_result(self, db: Any, run_id: int, result: RunResult, display_name: str | None = None) -> None:
        """The statements of :meth:`finish_run`, inside the caller's transaction."""
        d = result.to_dict()
        run_values = {
            "task": result.task,
            "mode": result.mode,
            "submission_path": result.submission.path,
            "submission_sha256": result.submission.sha256,
            "submission_name": result.submission.name,
            "device_name": result.device.name,
            "device_kind": result.device.kind,
            "software": _json(_software(result.device)),
            "harness_version": result.harness_version or None,
            "finished_at": result.finished_at or now_iso(),
            "wall_s": d.get("wall_s"),
            "verdict": result.verdict,
            "message": result.message or "",
            "score_us": d.get("score_us"),
            "complete": 1 if result.complete else 0,
            "result_json": result.to_json(indent=None),
        }
        if result.started_at:
            run_values["started_at"] = result.started_at
        if display_name:
            run_values["display_name"] = display_name
        cases = []
        for idx, (case, cd) in enumerate(zip(result.cases, d["cases"])):
            s = cd.get("stats") or {}
            spec = json.dumps(case.spec, default=str)  # not sorted: keeps the task's key order
            cases.append(
                (
                    run_id,
                    idx,
                    case.kind,
                    spec,
                    case.verdict,
                    case.message or "",
                    s.get("runs"),
                    s.get("mean"),
                    s.get("std"),
                    s.get("stderr"),
                    s.get("median"),
                    s.get("min"),
                    s.get("max"),
                    _json(s["samples_ns"]) if s else None,
                    cd.get("baseline_us"),
                )
            )
        assignments = ", ".join(f"{k} = ?" for k in run_values)
        cur = db.execute(f"UPDATE runs SET {assignments} WHERE id = ?", [*run_values.values(), run_id])
        if cur.rowcount != 1:
            raise KeyError(f"no run with id {run_id} in {self.location}")
        db.execute("DELETE FROM cases WHERE run_id = ?", (run_id,))
        db.executemany("INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", cases)

    def record(self, result: RunResult, *, display_name: str | None = None, git_commit: str | None = None) -> int:
        """Store a finished result in one go (begin + finish); returns the run id."""

        def write(db: Any) -> int:
            run_id = self.insert_run(
                db,
                result.task,
                result.mode,
                result.submission,
                display_name,
                result.device,
                result.harness_version,
                git_commit,
                result.started_at or None,
            )
            self.write_result(db, run_id, result, display_name)
            return run_id

        return self.transaction(write)

    # --- reading --------------------------------------------------------------------------------

    def runs(
        self,
        *,
        task: str | None = None,
        device: str | None = None,
        sha256: str | None = None,
        path: str | None = None,
        name: str | None = None,
        ids: Iterable[int] | None = None,
    ) -> list[RunRow]:
        """Runs matching every given filter, oldest first."""
        f = Filter()
        for column, value in (
            ("task", task),
            ("device_name", device),
            ("submission_sha256", sha256),
            ("submission_path", path),
            ("display_name", name),
        ):
            if value is not None:
                f.add(f"{column} = ?", value)
        sql = "SELECT * FROM runs" + f.sql()
        params = list(f.params)
        if ids is not None:
            ids = list(ids)
            if not ids:
                return []
            sql += (" AND " if f.clauses else " WHERE ") + f"id IN ({', '.join('?' * len(ids))})"
            params += ids
        rows = self.db.execute(sql + " ORDER BY started_at, id", params).fetchall()
        return [run_row(r) for r in rows]

    def cases(self, run_ids: Iterable[int]) -> dict[int, list[CaseRow]]:
        """Cases of the given runs, by run id, in their original order."""
        out: dict[int, list[CaseRow]] = {}
        ids = list(run_ids)
        for start in range(0, len(ids), 500):  # stay under SQLite's bound-parameter limit
            chunk = ids[start : start + 500]
            rows = self.db.execute(
                f"SELECT * FROM cases WHERE run_id IN ({', '.join('?' * len(chunk))}) ORDER BY run_id, idx", chunk
            ).fetchall()
            for r in rows:
                out.setdefault(r["run_id"], []).append(case_row(r))
        return out

    def result_dict(self, run_id: int) -> dict[str, Any] | None:
        """The stored RunResult JSON as a dict, whatever its schema version."""
        row = self.db.execute("SELECT result_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        return json.loads(row["result_json"]) if row and row["result_json"] else None

    def result(self, run_id: int) -> RunResult | None:
        """The full stored RunResult of a finished run (None for an incomplete one)."""
        row = self.db.execute("SELECT result_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise KeyError(f"no run with id {run_id} in {self.location}")
        return RunResult.from_json(row["result_json"]) if row["result_json"] else None

    def tasks(self) -> list[str]:
        return [r["task"] for r in self.db.execute("SELECT DISTINCT task FROM runs ORDER BY task")]

    def devices(self, task: str | None = None) -> list[str]:
        sql = "SELECT DISTINCT device_name FROM runs WHERE device_name IS NOT NULL"
        rows = self.db.execute(
            sql + (" AND task = ?" if task else "") + " ORDER BY device_name", (task,) if task else ()
        )
        return [r["device_name"] for r in rows]
