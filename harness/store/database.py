"""The results store: every run the harness makes, kept in one SQLite file.

Where: ``<results dir>/results.sqlite``; the results dir comes from ``--results-dir``, else the
``HARNESS_RESULTS_DIR`` environment variable, else ``./harness-results``. A path ending in ``.sqlite``
or ``.db`` names the database file itself.

Lifecycle of a run: :meth:`Store.begin_run` inserts a row with ``complete = 0`` and
``verdict = 'incomplete'`` before the submission starts; :meth:`Store.finish_run` fills it in, with
all its cases, in one transaction. A process killed in between leaves that 'incomplete' row and
nothing half-written.

Concurrency: several harness processes may write at once. The database runs in WAL mode with a
busy timeout, every write is one short ``BEGIN IMMEDIATE`` transaction, and a write that still meets
SQLITE_BUSY is retried with backoff.

Schema history (``PRAGMA user_version``, one step per entry of ``MIGRATIONS``):
  1 - runs (one row per run, with the whole RunResult JSON) and cases (per-case stats, raw samples).
  2 - runs.display_name (the name from the submission's header), indexes for the leaderboard and
      for history look-ups by content hash.
"""
from __future__ import annotations

import json
import os
import platform
import random
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from harness.errors import UsageError
from harness.results import DeviceInfo, RunResult, Stats, SubmissionInfo

ENV_RESULTS_DIR = "HARNESS_RESULTS_DIR"
DEFAULT_RESULTS_DIR = "harness-results"
DB_FILENAME = "results.sqlite"
INCOMPLETE = "incomplete"      # verdict of a run that began and never finished
BUSY_TIMEOUT_S = 30.0          # how long SQLite itself waits for a lock
WRITE_ATTEMPTS = 20            # then our own retries, with exponential backoff and jitter

# MIGRATIONS[i] takes a database from user_version i to i + 1. Append, never edit a released step.
MIGRATIONS: list[list[str]] = [
    [  # 1
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            task TEXT NOT NULL,
            mode TEXT NOT NULL,
            submission_path TEXT NOT NULL,
            submission_sha256 TEXT NOT NULL,
            submission_name TEXT NOT NULL,
            device_name TEXT,
            device_kind TEXT,
            software TEXT NOT NULL DEFAULT '{}',
            harness_version TEXT,
            git_commit TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT,
            wall_s REAL,
            verdict TEXT NOT NULL,
            message TEXT NOT NULL DEFAULT '',
            score_us REAL,
            complete INTEGER NOT NULL DEFAULT 0,
            result_json TEXT
        )""",
        """CREATE TABLE cases (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            kind TEXT NOT NULL,
            spec TEXT NOT NULL,
            verdict TEXT NOT NULL,
            message TEXT NOT NULL DEFAULT '',
            runs INTEGER,
            mean_ns REAL,
            std_ns REAL,
            stderr_ns REAL,
            median_ns REAL,
            min_ns REAL,
            max_ns REAL,
            samples_ns TEXT,
            baseline_us REAL,
            PRIMARY KEY (run_id, idx)
        )""",
        "CREATE INDEX runs_task ON runs(task)",
    ],
    [  # 2
        "ALTER TABLE runs ADD COLUMN display_name TEXT",
        "UPDATE runs SET display_name = submission_name WHERE display_name IS NULL",
        "CREATE INDEX runs_task_device ON runs(task, device_name, complete)",
        "CREATE INDEX runs_sha256 ON runs(submission_sha256)",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)


@dataclass
class RunRow:
    """One row of ``runs``: what the leaderboard, history and export read."""

    id: int
    task: str
    mode: str
    submission_path: str
    submission_sha256: str
    submission_name: str
    display_name: str
    device_name: str | None
    device_kind: str | None
    software: dict[str, Any]
    harness_version: str | None
    git_commit: str | None
    started_at: str
    finished_at: str | None
    wall_s: float | None
    verdict: str
    message: str
    score_us: float | None
    complete: bool


@dataclass
class CaseRow:
    run_id: int
    idx: int
    kind: str
    spec: dict[str, Any]
    verdict: str
    message: str = ""
    stats: Stats | None = None
    baseline_us: float | None = None


@dataclass
class _Filter:
    clauses: list[str] = field(default_factory=list)
    params: list[Any] = field(default_factory=list)

    def add(self, clause: str, value: Any) -> None:
        self.clauses.append(clause)
        self.params.append(value)

    def sql(self) -> str:
        return (" WHERE " + " AND ".join(self.clauses)) if self.clauses else ""


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def resolve_location(results_dir: str | None = None) -> str:
    """The store's location: the argument, else $HARNESS_RESULTS_DIR, else ./harness-results."""
    return results_dir or os.environ.get(ENV_RESULTS_DIR) or DEFAULT_RESULTS_DIR


def open_store(results_dir: str | None = None) -> "Store":
    """Open (creating and migrating as needed) the store at a results dir, a .sqlite file or a URL."""
    location = resolve_location(results_dir)
    if location.startswith(("postgres://", "postgresql://")):
        raise UsageError("a PostgreSQL results store is not supported yet; pass a folder to "
                         "--results-dir (or set HARNESS_RESULTS_DIR) to use SQLite")
    path = Path(location)
    if path.suffix not in (".sqlite", ".db"):
        path = path / DB_FILENAME
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the results dir {path.parent}: {exc}; "
                         "choose another with --results-dir") from exc
    return Store(path)


def git_commit_of(path: str | os.PathLike) -> str | None:
    """Short commit hash of the git checkout holding ``path``, or None outside git."""
    try:
        out = subprocess.run(["git", "-C", str(Path(path).resolve().parent), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


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
    """A SQLite results store. One connection per object; open one per process."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        try:
            self._conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as exc:
            raise UsageError(f"cannot open the results store {self.path}: {exc}; "
                             "choose another with --results-dir") from exc
        self._conn.row_factory = sqlite3.Row
        self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        self._retry(lambda: self._conn.execute("PRAGMA journal_mode = WAL"))
        self._write(self._migrate)

    # --- plumbing -------------------------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _retry(self, fn: Callable[[], Any]) -> Any:
        for attempt in range(WRITE_ATTEMPTS):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or attempt == WRITE_ATTEMPTS - 1:
                    raise
                time.sleep(min(0.01 * 2 ** attempt, 1.0) * (0.5 + random.random()))
        raise AssertionError("unreachable")

    def _write(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run ``fn`` in one BEGIN IMMEDIATE transaction, retrying the whole of it on SQLITE_BUSY."""
        def attempt():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(self._conn)
                self._conn.execute("COMMIT")
                return out
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
        return self._retry(attempt)

    def schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise UsageError(f"the results store {self.path} has schema version {version}, newer than "
                             f"this harness ({SCHEMA_VERSION}); upgrade the harness or use another "
                             "--results-dir")
        for step in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[step]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {step + 1}")

    # --- writing --------------------------------------------------------------------------------

    def begin_run(self, task: str, mode: str, submission: SubmissionInfo, *, display_name: str | None = None,
                  device: DeviceInfo | None = None, harness_version: str | None = None,
                  git_commit: str | None = None, started_at: str | None = None) -> int:
        """Insert an 'incomplete' row for a run that is about to start; returns its id."""
        row = (task, mode, submission.path, submission.sha256, submission.name, display_name or submission.name,
               device.name if device else None, device.kind if device else None, _json(_software(device)),
               harness_version, git_commit, started_at or now_iso(), INCOMPLETE)
        return self._write(lambda c: c.execute(
            "INSERT INTO runs (task, mode, submission_path, submission_sha256, submission_name, display_name,"
            " device_name, device_kind, software, harness_version, git_commit, started_at, verdict, complete)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)", row).lastrowid)

    def finish_run(self, run_id: int, result: RunResult, *, display_name: str | None = None) -> None:
        """Fill in a begun run with its result and cases, atomically."""
        d = result.to_dict()
        run_values = {
            "task": result.task, "mode": result.mode,
            "submission_path": result.submission.path, "submission_sha256": result.submission.sha256,
            "submission_name": result.submission.name,
            "device_name": result.device.name, "device_kind": result.device.kind,
            "software": _json(_software(result.device)), "harness_version": result.harness_version or None,
            "finished_at": result.finished_at or now_iso(), "wall_s": d.get("wall_s"),
            "verdict": result.verdict, "message": result.message or "", "score_us": d.get("score_us"),
            "complete": 1 if result.complete else 0, "result_json": result.to_json(indent=None),
        }
        if result.started_at:
            run_values["started_at"] = result.started_at
        if display_name:
            run_values["display_name"] = display_name
        cases = []
        for idx, (case, cd) in enumerate(zip(result.cases, d["cases"])):
            s = cd.get("stats") or {}
            spec = json.dumps(case.spec, default=str)   # not sorted: keeps the task's key order
            cases.append((run_id, idx, case.kind, spec, case.verdict, case.message or "",
                          s.get("runs"), s.get("mean"), s.get("std"), s.get("stderr"), s.get("median"),
                          s.get("min"), s.get("max"), _json(s["samples_ns"]) if s else None, cd.get("baseline_us")))

        def write(c: sqlite3.Connection) -> None:
            assignments = ", ".join(f"{k} = ?" for k in run_values)
            cur = c.execute(f"UPDATE runs SET {assignments} WHERE id = ?", [*run_values.values(), run_id])
            if cur.rowcount != 1:
                raise KeyError(f"no run with id {run_id} in {self.path}")
            c.execute("DELETE FROM cases WHERE run_id = ?", (run_id,))
            c.executemany("INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", cases)
        self._write(write)

    def abandon_run(self, run_id: int) -> None:
        """Delete a begun run that never started (the harness refused the request); finished runs stay."""
        self._write(lambda c: c.execute("DELETE FROM runs WHERE id = ? AND complete = 0 AND result_json IS NULL",
                                        (run_id,)))

    def record(self, result: RunResult, *, display_name: str | None = None, git_commit: str | None = None) -> int:
        """Store a finished result in one go (begin + finish); returns the run id."""
        run_id = self.begin_run(result.task, result.mode, result.submission, display_name=display_name,
                                device=result.device, harness_version=result.harness_version,
                                git_commit=git_commit, started_at=result.started_at or None)
        self.finish_run(run_id, result, display_name=display_name)
        return run_id

    # --- reading --------------------------------------------------------------------------------

    def runs(self, *, task: str | None = None, device: str | None = None, sha256: str | None = None,
             path: str | None = None, name: str | None = None, ids: Iterable[int] | None = None) -> list[RunRow]:
        """Runs matching every given filter, oldest first."""
        f = _Filter()
        for column, value in (("task", task), ("device_name", device), ("submission_sha256", sha256),
                              ("submission_path", path), ("display_name", name)):
            if value is not None:
                f.add(f"{column} = ?", value)
        sql = "SELECT * FROM runs" + f.sql()
        params = list(f.params)
        if ids is not None:
            ids = list(ids)
            sql += (" AND " if f.clauses else " WHERE ") + f"id IN ({', '.join('?' * len(ids))})"
            params += ids
        rows = self._conn.execute(sql + " ORDER BY started_at, id", params).fetchall()
        return [_run_row(r) for r in rows]

    def cases(self, run_ids: Iterable[int]) -> dict[int, list[CaseRow]]:
        """Cases of the given runs, by run id, in their original order."""
        out: dict[int, list[CaseRow]] = {}
        ids = list(run_ids)
        for start in range(0, len(ids), 500):   # stay under SQLite's bound-parameter limit
            chunk = ids[start:start + 500]
            rows = self._conn.execute(
                f"SELECT * FROM cases WHERE run_id IN ({', '.join('?' * len(chunk))}) ORDER BY run_id, idx",
                chunk).fetchall()
            for r in rows:
                out.setdefault(r["run_id"], []).append(_case_row(r))
        return out

    def result(self, run_id: int) -> RunResult | None:
        """The full stored RunResult of a finished run (None for an incomplete one)."""
        row = self._conn.execute("SELECT result_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise KeyError(f"no run with id {run_id} in {self.path}")
        return RunResult.from_json(row[0]) if row[0] else None

    def result_dict(self, run_id: int) -> dict[str, Any] | None:
        """The stored RunResult JSON as a dict, whatever its schema version."""
        row = self._conn.execute("SELECT result_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    def tasks(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT DISTINCT task FROM runs ORDER BY task")]

    def devices(self, task: str | None = None) -> list[str]:
        sql = "SELECT DISTINCT device_name FROM runs WHERE device_name IS NOT NULL"
        rows = self._conn.execute(sql + (" AND task = ?" if task else "") + " ORDER BY device_name",
                                  (task,) if task else ())
        return [r[0] for r in rows]


def _run_row(r: sqlite3.Row) -> RunRow:
    return RunRow(id=r["id"], task=r["task"], mode=r["mode"], submission_path=r["submission_path"],
                  submission_sha256=r["submission_sha256"], submission_name=r["submission_name"],
                  display_name=r["display_name"] or r["submission_name"], device_name=r["device_name"],
                  device_kind=r["device_kind"], software=json.loads(r["software"] or "{}"),
                  harness_version=r["harness_version"], git_commit=r["git_commit"], started_at=r["started_at"],
                  finished_at=r["finished_at"], wall_s=r["wall_s"], verdict=r["verdict"], message=r["message"],
                  score_us=r["score_us"], complete=bool(r["complete"]))


def _nan_if_none(x: float | None) -> float:
    return float("nan") if x is None else x


def _case_row(r: sqlite3.Row) -> CaseRow:
    stats = None
    if r["samples_ns"] is not None:
        stats = Stats(samples_ns=json.loads(r["samples_ns"]), runs=r["runs"], mean=_nan_if_none(r["mean_ns"]),
                      std=_nan_if_none(r["std_ns"]), stderr=_nan_if_none(r["stderr_ns"]),
                      median=_nan_if_none(r["median_ns"]), min=_nan_if_none(r["min_ns"]),
                      max=_nan_if_none(r["max_ns"]))
    return CaseRow(run_id=r["run_id"], idx=r["idx"], kind=r["kind"], spec=json.loads(r["spec"]),
                   verdict=r["verdict"], message=r["message"], stats=stats, baseline_us=r["baseline_us"])
