"""The SQLite results store: round trip, migrations, concurrency, interrupted runs.

``make_result`` (tests/helpers.py) builds synthetic RunResults.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.store import database as store_mod
from harness.errors import UsageError
from tests.helpers import make_result
from harness.results import PASS
from harness.store.database import INCOMPLETE, open_store

ROOT = Path(__file__).resolve().parents[1]
def test_round_trip(tmp_path):
    with open_store(str(tmp_path)) as st:
        result = make_result()
        run_id = st.record(result, display_name="Fast Kernel", git_commit="abc1234")
        (row,) = st.runs(task="mxfp4_mm")
        assert row.id == run_id and row.display_name == "Fast Kernel" and row.complete
        assert row.verdict == PASS and row.device_name == "NVIDIA H200" and row.git_commit == "abc1234"
        assert row.software["torch"] == "2.13.0" and "python" in row.software
        cases = st.cases([run_id])[run_id]
        assert [c.kind for c in cases] == ["test", "benchmark", "benchmark"]
        assert cases[1].stats.samples_ns == result.cases[1].stats.samples_ns   # raw, unrounded
        assert st.result(run_id) == result
        assert st.schema_version() == store_mod.SCHEMA_VERSION
    assert (tmp_path / "results.sqlite").exists()


def test_location_from_env_and_postgres_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_RESULTS_DIR", str(tmp_path / "env-dir"))
    with open_store(None) as st:
        assert st.path == tmp_path / "env-dir" / "results.sqlite"
    with pytest.raises(UsageError, match="not supported yet"):
        open_store("postgresql://user@host/db")


def test_migration_from_v1(tmp_path):
    path = tmp_path / "results.sqlite"
    conn = sqlite3.connect(path)
    for statement in store_mod.MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO runs (task, mode, submission_path, submission_sha256, submission_name, started_at,"
                 " verdict, complete) VALUES ('t', 'test', '/a.py', 'aa', 'old name', '2026-01-01', 'pass', 1)")
    conn.commit()
    conn.close()
    with open_store(str(path)) as st:
        assert st.schema_version() == 2
        (row,) = st.runs()
        assert row.display_name == "old name"
        indexes = {r[0] for r in st._conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert {"runs_task_device", "runs_sha256"} <= indexes


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "results.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {store_mod.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(UsageError, match="upgrade the harness"):
        open_store(str(path))


def _writer(db: str, worker: int, count: int) -> None:
    with open_store(db) as st:
        for i in range(count):
            st.record(make_result(name=f"w{worker}-{i}"))


def test_concurrent_writers_keep_every_run(tmp_path):
    db = str(tmp_path / "results.sqlite")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(db, w, 50)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with open_store(db) as st:
        runs = st.runs()
        assert len(runs) == 100 and len({r.display_name for r in runs}) == 100
        assert all(r.complete for r in runs)
        assert sum(len(v) for v in st.cases([r.id for r in runs]).values()) == 300


def test_killed_run_leaves_one_incomplete_row(tmp_path):
    db = str(tmp_path / "results.sqlite")
    code = textwrap.dedent(f"""
        import sys, time
        from harness.results import SubmissionInfo
        from harness.store.database import open_store
        st = open_store({db!r})
        st.begin_run("mxfp4_mm", "leaderboard", SubmissionInfo("/subs/k.py", "ab" * 32, "k"))
        print("begun", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "begun"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    with open_store(db) as st:
        (row,) = st.runs()
        assert not row.complete and row.verdict == INCOMPLETE and row.finished_at is None
        assert st.cases([row.id]) == {} and st.result(row.id) is None


def test_finish_run_updates_the_begun_row(tmp_path):
    with open_store(str(tmp_path)) as st:
        result = make_result()
        run_id = st.begin_run(result.task, result.mode, result.submission)
        assert st.runs()[0].verdict == INCOMPLETE
        st.finish_run(run_id, result)
        (row,) = st.runs()
        assert row.id == run_id and row.complete and row.verdict == PASS
        with pytest.raises(KeyError):
            st.finish_run(run_id + 1, result)
