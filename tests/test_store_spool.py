"""A result measured while the store cannot take it is kept in the spool and stored by the next run;
temporary folders of processes that are gone are swept; the signal guard defers a stop past a write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import harness.engine.runner as runner
from harness.engine.executors.cleanup import sweep_temp_folders
from harness.engine.folder import run_folder
from harness.engine.options import RunOptions
from harness.engine.stop_signals import Signals, Stopped
from harness.store.backends import StoreUnavailable
from harness.store.database import open_store
from harness.store.jobs import JobTable
from tests.helpers import make_result

ROOT = Path(__file__).resolve().parents[1]
TASK = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_result_the_store_refused_is_spooled_and_stored_by_the_next_run(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_SPOOL_DIR", str(tmp_path / "spool"))
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("alpha", "beta"):
        (subs / f"{name}.py").write_text(f"# name: {name}\ndef custom_kernel(data):\n    return data\n")
    calls = []

    def fake_run_submission(path, task_obj, mode, options=None, progress=None):
        calls.append(Path(path).name)
        return make_result(Path(path).stem, (5.0, 6.0), task=task_obj.name, mode=mode, device="cpu", kind="cpu")

    monkeypatch.setattr(runner, "run_submission", fake_run_submission)
    real_finish = JobTable.finish

    def store_goes_away(self, *args, **kwargs):
        raise StoreUnavailable("lost the connection to the store (a test)")

    monkeypatch.setattr(JobTable, "finish", store_goes_away)
    store = str(tmp_path / "store")
    with pytest.raises(StoreUnavailable):
        run_folder(subs, TASK, "test", RunOptions(device="cpu"), results_dir=store)
    assert calls == ["alpha.py"]  # the run stopped at the first result it could not store
    (kept,) = (tmp_path / "spool").glob("*.json")
    with open_store(store) as st:
        assert JobTable(st).counts()["done"] == 0 and JobTable(st).counts()["running"] == 0  # released
    monkeypatch.setattr(JobTable, "finish", real_finish)
    lines: list[str] = []
    report = run_folder(subs, TASK, "test", RunOptions(device="cpu"), results_dir=store, progress=lines.append)
    assert calls == ["alpha.py", "beta.py"]  # alpha's kept result was stored, not measured again
    assert any("kept in" in line and "while the store was unreachable" in line for line in lines), lines
    assert not kept.exists() and [e.name for e in report.entries] == ["beta"]
    with open_store(store) as st:
        jobs = JobTable(st).jobs()
        assert [j.state for j in jobs] == ["done", "done"]
        runs = st.runs()
        assert len(runs) == 2 and all(r.complete and r.verdict == "pass" for r in runs)


def test_sweep_removes_only_the_folders_of_processes_that_are_gone(tmp_path):
    dead, alive = _dead_pid(), os.getpid()
    gone = [tmp_path / f"harness-job-{dead}-abc", tmp_path / f"harness-run-{dead}-def"]
    kept = [tmp_path / f"harness-run-{alive}-ghi", tmp_path / "harness-job-nopid", tmp_path / f"other-{dead}-x"]
    for folder in gone + kept:
        (folder / "sub").mkdir(parents=True)
    assert sorted(sweep_temp_folders(str(tmp_path))) == sorted(gone)
    assert all(not f.exists() for f in gone) and all(f.exists() for f in kept)


def test_a_signal_inside_a_write_waits_for_its_end():
    order = []
    with pytest.raises(Stopped) as stop, Signals() as signals:
        with signals.critical():
            os.kill(os.getpid(), signal.SIGTERM)
            order.append("write finished")
        order.append("not reached")
    assert order == ["write finished"] and stop.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # the old handler is back


def _job(tmp_path: Path) -> None:
    from harness.engine.executors.job import JobSpec, run_job
    from harness.results import SubmissionInfo

    info = SubmissionInfo(path="x.py", sha256="0" * 64, name="x")
    run_job(JobSpec(1, "x.py", b"def custom_kernel(data): pass\n", info, "x", TASK, "test"), RunOptions(device="cpu"))


def _run_folder(tmp_path: Path) -> None:
    import torch

    from harness.engine.sandbox import Sandbox
    from tasks.registry import load_task

    sandbox = Sandbox(
        ROOT / "submissions" / "torch_mxfp4.py",
        load_task(TASK),
        torch.device("cpu"),
        None,
        RunOptions(device="cpu"),
        [],
    )
    sandbox.remove()


@pytest.mark.parametrize("step", ["made", "removed"])
@pytest.mark.parametrize("folder, make", [("harness-job-", _job), ("harness-run-", _run_folder)])
def test_a_signal_while_a_temporary_folder_is_made_or_removed_leaves_no_folder(
    monkeypatch, tmp_path, step, folder, make
):
    """SIGTERM lands inside the making of a job's or a run's folder (just after it exists) or inside its
    removal (just before): the folder still goes. Its maker is alive, so the sweep would not remove it."""
    import shutil
    import tempfile

    def signal_here() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        str(0)  # a call: where Python runs the signal's handler

    real_mkdtemp, real_rmtree = tempfile.mkdtemp, shutil.rmtree

    def mkdtemp(*args, **kwargs):
        made = real_mkdtemp(*args, **kwargs)
        signal_here()
        return made

    def rmtree(*args, **kwargs):
        signal_here()
        return real_rmtree(*args, **kwargs)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(*((tempfile, "mkdtemp", mkdtemp) if step == "made" else (shutil, "rmtree", rmtree)))
    monkeypatch.setattr(runner, "run_submission", lambda *a, **k: make_result("x", (1.0,)))
    with pytest.raises(Stopped), Signals():
        make(tmp_path)
    assert list(tmp_path.glob(folder + "*")) == []


def test_migration_4_drops_duplicate_jobs_and_the_error_rows_of_failed_jobs(tmp_path):
    """A store written before leases: two jobs for one key (an old --rerun) and a failed job whose
    'error' run row was the harness's failure: after the migration, one job per key, no such row."""
    import sqlite3

    from harness.store.schema import statements

    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    for step in range(3):
        for sql in statements(step, "sqlite"):
            conn.execute(sql)
    conn.execute("PRAGMA user_version = 3")
    run = "INSERT INTO runs (id, task, mode, submission_path, submission_sha256, submission_name, started_at, verdict,"
    run += " complete) VALUES (?, 't', 'test', '/s.py', ?, 's', '2026-01-01', ?, 1)"
    conn.execute(run, (1, "a" * 64, "pass"))
    conn.execute(run, (2, "a" * 64, "pass"))
    conn.execute(run, (3, "b" * 64, "error"))
    job = "INSERT INTO jobs (task, mode, submission_path, submission_sha256, display_name, harness_version, state,"
    job += " driver, run_id, queued_at) VALUES ('t', 'test', '/s.py', ?, 's', '1', ?, 'h:1', ?, '2026-01-01')"
    conn.execute(job, ("a" * 64, "done", 1))
    conn.execute(job, ("a" * 64, "done", 2))
    conn.execute(job, ("b" * 64, "failed", 3))
    conn.commit()
    conn.close()
    with open_store(str(path)) as st:
        jobs = JobTable(st).jobs()
        assert [(j.submission_sha256[0], j.state, j.run_id) for j in jobs] == [("a", "done", 2), ("b", "failed", None)]
        assert jobs[1].failure and jobs[1].verdict is None
        assert sorted(r.id for r in st.runs()) == [1, 2]  # the old run stays in history; the error row is gone
