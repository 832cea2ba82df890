"""The two store backends for the store tests: an SQLite folder, and a fresh schema in the test
PostgreSQL server named by $HARNESS_TEST_POSTGRES_URL (started by .ci/run through
scripts/test_postgres.sh; the PostgreSQL cases are skipped, saying so, when it is not set)."""

from __future__ import annotations

import multiprocessing
import os
import uuid
from urllib.parse import quote

import pytest

PG_ENV = "HARNESS_TEST_POSTGRES_URL"
BACKENDS = ["sqlite", "postgresql"]


def fresh_location(kind: str, tmp_path) -> str:
    if kind == "sqlite":
        return str(tmp_path / "res")
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"no test PostgreSQL server (${PG_ENV} unset; .ci/run starts one)")
    import psycopg

    schema = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


def run_in_processes(target, args_list, timeout: float = 180) -> None:
    """Runs ``target(*args)`` for each of ``args_list`` at once, in spawned processes, and checks that
    every one exited cleanly."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=args) for args in args_list]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
        assert p.exitcode == 0
