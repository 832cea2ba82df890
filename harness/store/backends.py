"""The two database engines behind the store, behind one small interface.

:class:`SQLiteBackend` (a file; the default) and :class:`PostgresBackend` (a ``postgresql://`` URL,
through psycopg 3). Both take SQL with ``?`` placeholders, return rows readable by column name, run
every write as one short transaction retried when the database is busy, and turn a wrong location
or a server that is down into a :class:`~harness.errors.UsageError` that says what to fix.

Concurrency: SQLite runs in WAL mode with a busy timeout and ``BEGIN IMMEDIATE`` transactions;
PostgreSQL transactions are retried on serialization failures and deadlocks, and migrations hold an
advisory lock so that many writers starting at once migrate the database once (a store already at
the current version is opened without that lock: one client stopped while holding it blocks no other).
"""

from __future__ import annotations

import os
import random
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from harness.errors import HarnessError, UsageError
from harness.store.schema import SCHEMA_VERSION, statements

BUSY_TIMEOUT_S = 30.0  # how long SQLite itself waits for a lock
WRITE_ATTEMPTS = 20  # then our own retries, with exponential backoff and jitter
CONNECT_TIMEOUT_S = 5  # PostgreSQL: a server that is down is reported after this
MIGRATION_LOCK = 0x68617273  # pg_advisory_xact_lock key held while migrating ('hars')
FIX_HINT = "choose another with --store (or --results-dir), or set $HARNESS_STORE"
RECONNECT_ENV = "HARNESS_STORE_RECONNECT_S"
RECONNECT_S = 120.0  # PostgreSQL: how long a lost connection is re-tried (with backoff) before giving up
EXIT_STORE_UNAVAILABLE = 75  # EX_TEMPFAIL: the store went away and did not come back in time


class StoreUnavailable(HarnessError):
    """The store's server went away and did not come back within the reconnect budget."""

    exit_code = EXIT_STORE_UNAVAILABLE


def reconnect_budget_s() -> float:
    """Seconds a lost PostgreSQL connection is re-tried: $HARNESS_STORE_RECONNECT_S, default 120."""
    text = os.environ.get(RECONNECT_ENV)
    if not text:
        return RECONNECT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise UsageError(f"${RECONNECT_ENV}={text!r} is not a number of seconds >= 0; fix or unset it")
    return value


def _backoff(attempt: int) -> None:
    time.sleep(min(0.01 * 2**attempt, 1.0) * (0.5 + random.random()))


def _newer_schema(where: str, version: int) -> UsageError:
    return UsageError(
        f"the results store {where} has schema version {version}, newer than this harness "
        f"({SCHEMA_VERSION}); upgrade the harness or {FIX_HINT}"
    )


def _migrate_to_latest(backend: Any, record_version: Callable[[int], Any]) -> None:
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
    skip_locked = ""  # BEGIN IMMEDIATE already serializes every claim

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

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
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

        def attempt() -> Any:
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

    def schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self, _self: Any) -> None:
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
    """One connection, re-established with backoff when the server goes away (a restart, a failover):
    a transaction cut by it runs again from its start on the new connection (every write of the
    harness is idempotent or guarded by the state it changes), within :func:`reconnect_budget_s`."""

    dialect = "postgresql"
    skip_locked = " FOR UPDATE SKIP LOCKED"

    def __init__(self, url: str):
        self.location = redact(url)
        self.path = self.location
        self._url = url
        self._in_txn = False
        self.reconnect_s = reconnect_budget_s()
        try:
            import psycopg
            from psycopg.rows import dict_row
        except ImportError as exc:
            raise UsageError(
                "a postgresql:// store needs psycopg 3: pip install 'psycopg[binary]' "
                "(or the harness's 'postgres' extra)"
            ) from exc
        self._psycopg = psycopg
        self._dict_row = dict_row
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(
                f"cannot connect to the PostgreSQL store {self.location}: {first}; check the "
                f"URL (postgresql://user:password@host:port/database) and that the server is "
                f"running, or {FIX_HINT}"
            ) from exc
        if self.schema_version() != SCHEMA_VERSION:  # current: no lock, so a stalled client blocks nobody
            self.transaction(self._migrate)

    def _connect(self) -> Any:
        return self._psycopg.connect(
            self._url, autocommit=True, row_factory=self._dict_row, connect_timeout=CONNECT_TIMEOUT_S
        )

    def close(self) -> None:
        self._conn.close()

    @staticmethod
    def _sql(sql: str) -> str:
        return sql.replace("%", "%%").replace("?", "%s")

    def _lost(self, exc: BaseException) -> bool:
        """The connection itself is gone (not a failed statement on a live one)."""
        psycopg = self._psycopg
        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)) and bool(
            self._conn.closed or self._conn.broken
        )

    def _reconnect(self, deadline: float, cause: BaseException) -> None:
        """A new connection, tried with backoff until ``deadline``; StoreUnavailable after it."""
        attempt = 0
        while True:
            try:
                self._conn.close()
            except self._psycopg.Error:
                pass
            try:
                self._conn = self._connect()
            except self._psycopg.Error as exc:
                cause = exc
            else:
                print(f"warning: reconnected to the PostgreSQL store {self.location}", file=sys.stderr, flush=True)
                return
            if time.monotonic() >= deadline:
                first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
                raise StoreUnavailable(
                    f"lost the connection to the PostgreSQL store {self.location} and could not reconnect "
                    f"within {self.reconnect_s:g} s ({first}); start the server (or raise "
                    f"${RECONNECT_ENV}) and run the command again: finished results are kept"
                ) from cause
            time.sleep(min(0.2 * 2**attempt, 5.0) * (0.5 + random.random()))
            attempt += 1

    def _reconnecting(self, op: Callable[[], Any]) -> Any:
        """``op()``, run again on a new connection when the server went away (not inside a transaction:
        the transaction as a whole is re-run by :meth:`transaction`)."""
        if self._in_txn:
            return op()
        deadline = None
        while True:
            try:
                return op()
            except (self._psycopg.OperationalError, self._psycopg.InterfaceError) as exc:
                if not self._lost(exc):
                    raise
                deadline = deadline or time.monotonic() + self.reconnect_s
                self._reconnect(deadline, exc)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._reconnecting(lambda: self._conn.execute(self._sql(sql), tuple(params)))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if rows:

            def many() -> None:
                with self._conn.cursor() as cur:
                    cur.executemany(self._sql(sql), rows)

            self._reconnecting(many)

    def transaction(self, fn: Callable[[PostgresBackend], Any]) -> Any:
        """``fn(self)`` in one transaction: re-run on serialization failures and deadlocks, and from the
        start on a new connection when the server went away."""
        if self._in_txn:
            return fn(self)
        return self._reconnecting(lambda: self._transaction_once(fn))

    def _transaction_once(self, fn: Callable[[PostgresBackend], Any]) -> Any:
        errors = self._psycopg.errors
        retryable = (errors.SerializationFailure, errors.DeadlockDetected)
        for attempt in range(WRITE_ATTEMPTS):
            try:
                self._in_txn = True
                with self._conn.transaction():
                    return fn(self)
            except retryable:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
                _backoff(attempt)
            finally:
                self._in_txn = False
        raise AssertionError("unreachable")

    def schema_version(self) -> int:
        row = self.execute("SELECT to_regclass('harness_schema') AS t").fetchone()
        if row["t"] is None:
            return 0
        return self.execute("SELECT version FROM harness_schema").fetchone()["version"]

    def _migrate(self, _self: Any) -> None:
        self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        self._conn.execute("CREATE TABLE IF NOT EXISTS harness_schema (version INTEGER NOT NULL)")
        if self._conn.execute("SELECT count(*) AS n FROM harness_schema").fetchone()["n"] == 0:
            self._conn.execute("INSERT INTO harness_schema VALUES (0)")
        _migrate_to_latest(
            self, lambda version: self._conn.execute("UPDATE harness_schema SET version = %s", (version,))
        )
