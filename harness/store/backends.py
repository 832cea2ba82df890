"""The two database engines behind the store, behind one small interface.

:class:`SQLiteBackend` (a file; the default) and :class:`PostgresBackend` (a ``postgresql://`` URL,
through psycopg 3). Both take SQL with ``?`` placeholders, return rows readable by column name, run
every write as one short transaction retried when the database is busy, and turn a wrong location
or a server that is down into a :class:`~harness.errors.UsageError` that says what to fix.

Concurrency: SQLite runs in WAL mode with a busy timeout and ``BEGIN IMMEDIATE`` transactions;
PostgreSQL transactions are retried on serialization failures and deadlocks, and migrations hold an
advisory lock so that many writers starting at once migrate the database once.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from harness.errors import UsageError
from harness.store.schema import SCHEMA_VERSION, statements

BUSY_TIMEOUT_S = 30.0  # how long SQLite itself waits for a lock
WRITE_ATTEMPTS = 20  # then our own retries, with exponential backoff and jitter
CONNECT_TIMEOUT_S = 5  # PostgreSQL: a server that is down is reported after this
MIGRATION_LOCK = 0x68617273  # pg_advisory_xact_lock key held while migrating ('hars')
FIX_HINT = "choose another with --store (or --results-dir), or set $HARNESS_STORE"


def _backoff(attempt: int) -> None:
    time.sleep(min(0.01 * 2**attempt, 1.0) * (0.5 + random.random()))


def _newer_schema(where: str, version: int) -> UsageError:
    return UsageError(
        f"the results store {where} has schema version {version}, newer than this harness "
        f"({SCHEMA_VERSION}); upgrade the harness or {FIX_HINT}"
    )


def _migrate_to_latest(backend, record_version: Callable[[int], Any]) -> None:
    """Runs the migrations after the backend's schema version, recording each step's version; refuses
    a store written by a newer harness. Inside the caller's transaction."""
    version = backend.schema_version()
    if version > SCHEMA_VERSION:
        raise _newer_schema(backend.location, version)
    for step in range(version, SCHEMA_VERSION):
        for sql in statements(step, backend.dialect):
            backend._conn.execute(sql)
        record_version(step + 1)


class SQLiteBackend:
    dialect = "sqlite"

    def __init__(self, path: Path):
        self.path = path
        self.location = str(path)
        try:
            self._conn = sqlite3.connect(
                str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            self._conn.row_factory = sqlite3.Row
            self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            self._retry(lambda: self._conn.execute("PRAGMA journal_mode = WAL"))
            self.transaction(self._migrate)
        except sqlite3.DatabaseError as exc:
            raise UsageError(
                f"cannot use {path} as the results store: {exc} (is it an SQLite database "
                f"written by the harness?); {FIX_HINT}"
            ) from exc

    def close(self) -> None:
        self._conn.close()

    def execute(self, sql: str, params=()) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows) -> None:
        self._conn.executemany(sql, rows)

    def _retry(self, fn: Callable[[], Any]) -> Any:
        for attempt in range(WRITE_ATTEMPTS):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                text = str(exc).lower()
                if not ("locked" in text or "busy" in text) or attempt == WRITE_ATTEMPTS - 1:
                    raise
                _backoff(attempt)
        raise AssertionError("unreachable")

    def transaction(self, fn: Callable[[SQLiteBackend], Any]) -> Any:
        """Run ``fn(self)`` in one BEGIN IMMEDIATE transaction, retrying all of it on SQLITE_BUSY."""

        def attempt():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                out = fn(self)
                self._conn.execute("COMMIT")
                return out
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

        return self._retry(attempt)

    def lock(self, key: str) -> None:
        """Serialize transactions on ``key``: BEGIN IMMEDIATE already serializes every write."""

    def schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self, _self) -> None:
        _migrate_to_latest(self, lambda version: self._conn.execute(f"PRAGMA user_version = {version}"))


def redact(url: str) -> str:
    """The URL with its password replaced by '***' (for messages and the 'results in' line)."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = parts.netloc.rsplit("@", 1)
        user = parts.username or ""
        host = netloc[1] if len(netloc) == 2 else ""
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:
        return "<unparseable URL>"


class PostgresBackend:
    dialect = "postgresql"

    def __init__(self, url: str):
        self.location = redact(url)
        self.path = self.location
        try:
            import psycopg
            from psycopg.rows import dict_row
        except ImportError as exc:
            raise UsageError(
                "a postgresql:// store needs psycopg 3: pip install 'psycopg[binary]' "
                "(or the harness's 'postgres' extra)"
            ) from exc
        self._psycopg = psycopg
        try:
            self._conn = psycopg.connect(url, autocommit=True, row_factory=dict_row, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(
                f"cannot connect to the PostgreSQL store {self.location}: {first}; check the "
                f"URL (postgresql://user:password@host:port/database) and that the server is "
                f"running, or {FIX_HINT}"
            ) from exc
        self.transaction(self._migrate)

    def close(self) -> None:
        self._conn.close()

    @staticmethod
    def _sql(sql: str) -> str:
        return sql.replace("%", "%%").replace("?", "%s")

    def execute(self, sql: str, params=()):
        return self._conn.execute(self._sql(sql), tuple(params))

    def executemany(self, sql: str, rows) -> None:
        rows = list(rows)
        if rows:
            with self._conn.cursor() as cur:
                cur.executemany(self._sql(sql), rows)

    def transaction(self, fn: Callable[[PostgresBackend], Any]) -> Any:
        errors = self._psycopg.errors
        retryable = (errors.SerializationFailure, errors.DeadlockDetected)
        for attempt in range(WRITE_ATTEMPTS):
            try:
                with self._conn.transaction():
                    return fn(self)
            except retryable:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
                _backoff(attempt)
        raise AssertionError("unreachable")

    def lock(self, key: str) -> None:
        """Serialize transactions on ``key`` (until this transaction ends): two drivers claiming
        the same job at once would otherwise both see none and both insert one."""
        self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))

    def schema_version(self) -> int:
        row = self._conn.execute("SELECT to_regclass('harness_schema') AS t").fetchone()
        if row["t"] is None:
            return 0
        return self._conn.execute("SELECT version FROM harness_schema").fetchone()["version"]

    def _migrate(self, _self) -> None:
        self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        self._conn.execute("CREATE TABLE IF NOT EXISTS harness_schema (version INTEGER NOT NULL)")
        if self._conn.execute("SELECT count(*) AS n FROM harness_schema").fetchone()["n"] == 0:
            self._conn.execute("INSERT INTO harness_schema VALUES (0)")
        _migrate_to_latest(
            self, lambda version: self._conn.execute("UPDATE harness_schema SET version = %s", (version,))
        )
