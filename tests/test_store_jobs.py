"""The job table on both backends: claiming (new, done, busy, taken over), retries, failure, concurrent
drivers, and the ``jobs`` command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from harness.cli.main import main as cli_main
from harness.results import SubmissionInfo
from harness.store.database import INCOMPLETE, open_store
from harness.store.jobs import JobTable
from tests.helpers import make_result
from tests.store_backends import BACKENDS, fresh_location, run_in_processes


@pytest.fixture(params=BACKENDS)
def location(request, tmp_path):
    return fresh_location(request.param, tmp_path)


def info(i: int) -> SubmissionInfo:
    return SubmissionInfo(path=f"/subs/s{i}.py", sha256=f"{i:064x}", name=f"s{i}")


def claim(st, i, version="0.1.0", mode="leaderboard"):
    sub = info(i)
    return JobTable(st).claim(
        "mxfp4_mm", mode, sub, sub.name, version, lambda db: st.insert_run(db, "mxfp4_mm", mode, sub, sub.name)
    )


def _set_driver(st, job_id, driver):
    st.transaction(lambda db: db.execute("UPDATE jobs SET driver = ? WHERE id = ?", (driver, job_id)))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_claim_finish_and_skip(location):
    with open_store(location) as st:
        jobs = JobTable(st)
        first = claim(st, 1)
        assert first.outcome == "new" and first.job.state == "queued" and first.job.attempts == 0
        assert st.runs()[0].verdict == INCOMPLETE and st.runs()[0].id == first.job.run_id
        jobs.start(first.job.id, "node-a", "1")
        (running,) = jobs.jobs(state="running")
        assert (running.node, running.gpu, running.attempts) == ("node-a", "1", 1) and running.started_at
        result = make_result("s1", sha=info(1).sha256)
        jobs.finish(first.job.id, result, display_name="s1")
        (done,) = jobs.jobs()
        assert done.state == "done" and done.verdict == "pass" and done.finished_at
        (run,) = st.runs()
        assert run.complete and run.id == done.run_id
        again = claim(st, 1)
        assert again.outcome == "done" and again.job.id == first.job.id
        other_version = claim(st, 1, version="0.2.0")  # another harness version: a new job
        assert other_version.outcome == "new" and len(st.runs()) == 2
        assert jobs.counts() == {"queued": 1, "running": 0, "done": 1, "failed": 0}


def test_live_driver_keeps_its_job_and_a_gone_one_is_taken_over(location):
    with open_store(location) as st:
        jobs = JobTable(st)
        a, b = claim(st, 1).job, claim(st, 2).job
        _set_driver(st, a.id, f"{socket.gethostname()}:{os.getppid()}")  # alive: pytest's parent
        _set_driver(st, b.id, f"{socket.gethostname()}:{_dead_pid()}")
        jobs.start(b.id, "node-a", "0")
        assert claim(st, 1).outcome == "busy"
        retake = claim(st, 2)
        assert retake.outcome == "retake" and retake.job.state == "queued" and retake.job.node is None
        assert retake.job.run_id == b.run_id and len(st.runs()) == 2  # the same run row, no duplicate
        assert "taken over from driver" in retake.job.retry_reasons[0] and retake.job.attempts == 1


def test_retries_and_failure(location):
    with open_store(location) as st:
        jobs = JobTable(st)
        job = claim(st, 3).job
        jobs.start(job.id, "n", "0")
        jobs.requeue(job.id, "Ray: WorkerCrashedError: the worker died")
        jobs.start(job.id, "n", "1")
        error = make_result("s3", sha=info(3).sha256, verdict="error", message="harness internal error: x")
        jobs.fail(job.id, "harness internal error: x", error, display_name="s3")
        (failed,) = jobs.jobs()
        assert failed.state == "failed" and failed.attempts == 2 and failed.verdict == "error"
        assert failed.retry_reasons == ["Ray: WorkerCrashedError: the worker died", "harness internal error: x"]
        assert st.runs()[0].complete and st.runs()[0].verdict == "error"
        rerun = claim(st, 3)  # a failed job runs again, into a new run row
        assert rerun.outcome == "retake" and rerun.job.run_id != failed.run_id and len(st.runs()) == 2


def _claimer(location: str, count: int) -> None:
    with open_store(location) as st:
        for i in range(count):
            c = claim(st, i)
            if c.outcome == "new":
                JobTable(st).finish(c.job.id, make_result(f"s{i}", sha=info(i).sha256), display_name=f"s{i}")


def test_concurrent_drivers_make_one_job_each(location):
    run_in_processes(_claimer, [(location, 15)] * 3)
    with open_store(location) as st:
        jobs = JobTable(st).jobs()
        assert len(jobs) == 15 and len({j.submission_sha256 for j in jobs}) == 15
        assert len(st.runs()) == 15


def test_jobs_command(location, capsys):
    with open_store(location) as st:
        jobs = JobTable(st)
        ids = [claim(st, i).job.id for i in range(4)]
        jobs.start(ids[0], "node-a", "1")
        jobs.start(ids[1], "node-b", "0")
        jobs.finish(ids[1], make_result("s1", sha=info(1).sha256), display_name="s1")
    assert cli_main(["jobs", "--store", location]) == 0
    out, err = capsys.readouterr()
    assert "2 queued, 1 running, 1 done, 0 failed (4 jobs)" in err
    lines = [line.split() for line in out.splitlines()[2:]]
    assert [(r[0], r[1], r[2]) for r in lines[:2]] == [(str(ids[2]), "queued", "1"), (str(ids[3]), "queued", "2")]
    assert lines[2][:2] == [str(ids[0]), "running"] and "node-a" in lines[2]
    assert all(r[1] != "done" for r in lines)
    assert cli_main(["jobs", "--store", location, "--format", "json", "--all"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {"queued": 2, "running": 1, "done": 1, "failed": 0} and len(data["jobs"]) == 4


def test_run_all_then_rerun_skips_done_jobs_and_every_command_reads_the_store(location, tmp_path, capsys, monkeypatch):
    """run-all (serial, with a stand-in runner) into either backend; the rerun skips; the readers read it."""
    import json
    from pathlib import Path

    import harness.engine.runner as runner

    root = Path(__file__).resolve().parents[1]
    task = str(root / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("alpha", "beta"):
        (subs / f"{name}.py").write_text(f"# name: {name}\ndef custom_kernel(data):\n    return data\n")
    calls = []

    def fake_run_submission(path, task_obj, mode, options=None, progress=None):
        calls.append(Path(path).name)
        r = make_result(Path(path).stem, (5.0, 6.0), task=task_obj.name, mode=mode, device="cpu", kind="cpu")
        r.score_us = 5.5
        return r

    monkeypatch.setattr(runner, "run_submission", fake_run_submission)
    args = ["run-all", str(subs), "--task", task, "--mode", "benchmark", "--store", location]
    assert cli_main(args) == 0
    out, err = capsys.readouterr()
    assert calls == ["alpha.py", "beta.py"] and "[2/2] beta.py: pass" in err and "rank" in out  # the board: stdout
    assert cli_main(args) == 0
    out, err = capsys.readouterr()
    assert calls == ["alpha.py", "beta.py"] and err.count("already done for these contents") == 2
    assert "alpha" in out and "beta" in out  # a rerun that skipped every file shows the stored board
    with open_store(location) as st:
        assert len(st.runs()) == 2 and all(r.complete for r in st.runs())
    assert cli_main([*args, "--rerun"]) == 0  # --rerun measures them again, as new runs
    assert calls == ["alpha.py", "beta.py"] * 2 and "already done" not in capsys.readouterr().err
    with open_store(location) as st:
        assert len(st.runs()) == 4 and len(JobTable(st).jobs()) == 4
    for command in (
        ["leaderboard", "--task", task, "--format", "json"],
        ["history", "alpha", "--task", "mxfp4_small"],
        ["export", "--task", "mxfp4_small", "--format", "json"],
        ["jobs", "--all", "--format", "json"],
    ):
        assert cli_main([*command, "--store", location]) == 0, command
        out = capsys.readouterr().out
        assert "alpha" in out, command
    assert json.loads(out)["counts"]["done"] == 4
