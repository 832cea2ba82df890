"""The results store on both backends (SQLite, PostgreSQL): round trip, migrations, concurrency,
interrupted runs, and the errors a wrong location gives.

``make_result`` (tests/helpers.py) builds synthetic RunResults.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from harness.cli.main import main as cli_main
from harness.errors import UsageError
from harness.results import PASS
from harness.store import database as store_mod
from harness.store.database import INCOMPLETE, open_store
from harness.store.schema import statements
from tests.helpers import make_result
from tests.store_backends import BACKENDS, fresh_location, run_in_processes

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=BACKENDS)
def location(request, tmp_path):
    return fresh_location(request.param, tmp_path)


def test_round_trip(location):
    with open_store(location) as st:
        result = make_result()
        run_id = st.record(result, display_name="Fast Kernel", git_commit="abc1234")
        (row,) = st.runs(task="mxfp4_mm")
        assert row.id == run_id and row.display_name == "Fast Kernel" and row.complete
        assert row.verdict == PASS and row.device_name == "NVIDIA H200" and row.git_commit == "abc1234"
        assert row.software["torch"] == "2.13.0" and "python" in row.software
        cases = st.cases([run_id])[run_id]
        assert [c.kind for c in cases] == ["test", "benchmark", "benchmark"]
        assert cases[1].stats.samples_ns == result.cases[1].stats.samples_ns  # raw, unrounded (float64)
        assert st.result(run_id) == result
        assert st.schema_version() == store_mod.SCHEMA_VERSION
        assert st.tasks() == ["mxfp4_mm"] and st.devices("mxfp4_mm") == ["NVIDIA H200"]


def test_sqlite_location_from_env(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESS_STORE", raising=False)
    monkeypatch.setenv("HARNESS_RESULTS_DIR", str(tmp_path / "env-dir"))
    with open_store(None) as st:
        assert st.path == tmp_path / "env-dir" / "results.sqlite"
    monkeypatch.setenv("HARNESS_STORE", str(tmp_path / "store.sqlite"))  # $HARNESS_STORE first
    with open_store(None) as st:
        assert st.path == tmp_path / "store.sqlite"
    assert (tmp_path / "res" / "results.sqlite").exists() is False


def _make_v1(location: str) -> None:
    """A database at schema version 1 holding one old run."""
    insert = (
        "INSERT INTO runs (task, mode, submission_path, submission_sha256, submission_name, started_at,"
        " verdict, complete) VALUES ('t', 'test', '/a.py', 'aa', 'old name', '2026-01-01', 'pass', 1)"
    )
    if location.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            for sql in statements(0, "postgresql"):
                conn.execute(sql)
            conn.execute("CREATE TABLE harness_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO harness_schema VALUES (1)")
            conn.execute(insert)
        return
    Path(location).mkdir(parents=True)
    conn = sqlite3.connect(Path(location) / "results.sqlite")
    for sql in statements(0, "sqlite"):
        conn.execute(sql)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(insert)
    conn.commit()
    conn.close()


def test_migration_from_v1(location):
    _make_v1(location)
    with open_store(location) as st:
        assert st.schema_version() == store_mod.SCHEMA_VERSION
        (row,) = st.runs()
        assert row.display_name == "old name"
        assert st.db.execute("SELECT count(*) AS n FROM jobs").fetchone()["n"] == 0  # step 3 ran


def test_newer_schema_is_refused(location):
    with open_store(location) as st:
        newer = store_mod.SCHEMA_VERSION + 1
        if location.startswith("postgresql://"):
            st.db.execute("UPDATE harness_schema SET version = ?", (newer,))
        else:
            st.db.execute(f"PRAGMA user_version = {newer}")
    with pytest.raises(UsageError, match="upgrade the harness"):
        open_store(location)


def test_a_client_stalled_holding_the_migration_lock_blocks_no_open_of_a_current_store(tmp_path):
    """A client stopped (SIGSTOP, a debugger) while it holds PostgreSQL's migration lock: once the schema
    is current, every other open goes ahead instead of waiting on that lock for ever."""
    import psycopg

    from harness.store.backends import MIGRATION_LOCK

    location = fresh_location("postgresql", tmp_path)
    open_store(location).close()  # created and migrated
    opened: list = []
    with psycopg.connect(location, autocommit=True) as holder, psycopg.connect(location, autocommit=True) as look:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        held = look.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND granted", (MIGRATION_LOCK,)
        ).fetchall()
        assert held == [(holder.info.backend_pid,)], "the stalled client does not hold the lock: nothing tested"
        opener = threading.Thread(target=lambda: opened.append(open_store(location)), daemon=True)
        opener.start()
        opener.join(20)
        assert opened, "opening a current store waited on the migration lock a stalled client holds"
    opened[0].close()


def _writer(location: str, worker: int, count: int) -> None:
    with open_store(location) as st:
        for i in range(count):
            st.record(make_result(name=f"w{worker}-{i}"))


def test_concurrent_writers_keep_every_run(location):
    run_in_processes(_writer, [(location, w, 40) for w in range(3)])
    with open_store(location) as st:
        runs = st.runs()
        assert len(runs) == 120 and len({r.display_name for r in runs}) == 120
        assert all(r.complete for r in runs)
        assert sum(len(v) for v in st.cases([r.id for r in runs]).values()) == 360


def test_killed_run_leaves_one_incomplete_row(location):
    code = textwrap.dedent(f"""
        import sys, time
        from harness.results import SubmissionInfo
        from harness.store.database import open_store
        st = open_store({location!r})
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
    with open_store(location) as st:
        (row,) = st.runs()
        assert not row.complete and row.verdict == INCOMPLETE and row.finished_at is None
        assert st.cases([row.id]) == {} and st.result(row.id) is None


def test_finish_run_updates_the_begun_row(location):
    with open_store(location) as st:
        result = make_result()
        run_id = st.begin_run(result.task, result.mode, result.submission)
        assert st.runs()[0].verdict == INCOMPLETE
        st.finish_run(run_id, result)
        (row,) = st.runs()
        assert row.id == run_id and row.complete and row.verdict == PASS
        with pytest.raises(KeyError):
            st.finish_run(run_id + 1, result)


# --- a wrong location: a clear usage error (exit 2), never a traceback ----------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "url, expected",
    [
        (
            lambda tmp: f"postgresql://harness:topsecret@127.0.0.1:{_free_port()}/nothing",
            "cannot connect to the PostgreSQL",
        ),
        (lambda tmp: "postgresql://harness@127.0.0.1:notaport/db", "cannot connect to the PostgreSQL"),
        (lambda tmp: "mysql://user@127.0.0.1/db", "unknown store URL mysql://"),
        (lambda tmp: str(tmp / "junk.sqlite"), "is it an SQLite database"),
        (lambda tmp: str(tmp / "plain-file"), "is a file, not a folder"),
    ],
)
def test_wrong_store_is_a_usage_error(tmp_path, capsys, url, expected):
    (tmp_path / "junk.sqlite").write_bytes(b"this is not a database, just text " * 200)
    (tmp_path / "plain-file").write_text("x")
    location = url(tmp_path)
    with pytest.raises(UsageError, match=expected):
        open_store(location)
    code = cli_main(["leaderboard", "--task", "mxfp4_mm", "--store", location])
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err
    assert "topsecret" not in err  # the password is never printed
    assert (tmp_path / "junk.sqlite").read_bytes().startswith(b"this is not")  # left as it was
