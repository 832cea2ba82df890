"""The job table on both backends: queueing, claiming by lease (held, expired and taken over,
renewed, released), infrastructure failures (no verdict), concurrent drivers sharing the queue, and
the ``jobs`` command."""

from __future__ import annotations

import json
import time

import pytest

from harness.cli.main import main as cli_main
from harness.engine.folder import claim_note
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


def enqueue(st, i, version="0.1.0", mode="leaderboard", rerun=False):
    sub = info(i)
    return JobTable(st).enqueue("mxfp4_mm", mode, sub, sub.name, version, rerun)


def claim(st, owner, ids, version="0.1.0", mode="leaderboard", lease_s=60.0):
    def begin(db, job):
        sub = info(int(job.submission_sha256, 16))
        return st.insert_run(db, "mxfp4_mm", mode, sub, sub.name)

    return JobTable(st).claim_next(owner, [info(i).sha256 for i in ids], "mxfp4_mm", mode, version, begin, lease_s)


def _expire(st, job_id):
    st.transaction(lambda db: db.execute("UPDATE jobs SET lease_expires = ? WHERE id = ?", (time.time() - 1, job_id)))


def test_enqueue_claim_finish_and_skip(location):
    with open_store(location) as st:
        jobs = JobTable(st)
        first = enqueue(st, 1)
        assert first.outcome == "new" and first.job.state == "queued" and first.job.run_id is None
        assert enqueue(st, 1).outcome == "queued" and len(jobs.jobs()) == 1  # once, however often queued
        job = claim(st, "A", [1])
        assert job.state == "running" and job.owner == "A" and job.lease_expires > time.time() + 50
        assert st.runs()[0].verdict == INCOMPLETE and st.runs()[0].id == job.run_id
        assert claim(st, "B", [1]) is None  # A holds it
        jobs.start(job.id, "node-a", "1")
        (running,) = jobs.jobs(state="running")
        assert (running.node, running.gpu, running.attempts) == ("node-a", "1", 1) and running.started_at
        result = make_result("s1", sha=info(1).sha256)
        assert not jobs.finish(job.id, "B", result, display_name="s1")  # not B's: nothing written
        assert jobs.finish(job.id, "A", result, display_name="s1")
        assert not jobs.finish(job.id, "A", result, display_name="s1")  # done stays done: written once
        (done,) = jobs.jobs()
        assert done.state == "done" and done.verdict == "pass" and done.finished_at and done.owner is None
        (run,) = st.runs()
        assert run.complete and run.id == done.run_id
        assert enqueue(st, 1).outcome == "done"
        assert enqueue(st, 1, version="0.2.0").outcome == "new"  # another harness version: a new job
        assert jobs.counts() == {"queued": 1, "running": 0, "done": 1, "failed": 0}


def test_an_expired_lease_is_taken_over_and_only_the_new_owner_stores(location):
    with open_store(location) as st:
        jobs = JobTable(st)
        enqueue(st, 1)
        a = claim(st, "A", [1])
        assert claim(st, "B", [1]) is None
        _expire(st, a.id)
        assert jobs.get(a.id).stale()
        b = claim(st, "B", [1])
        assert b is not None and b.id == a.id and b.owner == "B" and b.run_id == a.run_id  # same run row
        assert "lease" in b.retry_reasons[-1] and len(st.runs()) == 1
        # A died after its claim, before its attempt began: the rerun still says it took the job over
        # (test_faults once killed a driver in that moment, and the rerun said nothing)
        assert b.attempts == 0 and claim_note(b, "s1.py") == f"starting s1.py: job {b.id} ({b.retry_reasons[-1]})"
        assert claim_note(a, "s1.py") is None  # a fresh claim: nothing to say
        assert jobs.heartbeat("A") == 0 and jobs.heartbeat("B") == 1
        assert not jobs.finish(a.id, "A", make_result("s1", sha=info(1).sha256))
        assert jobs.finish(a.id, "B", make_result("s1", sha=info(1).sha256))
        (run,) = st.runs()
        assert run.complete and run.verdict == "pass"


def test_heartbeat_renews_and_release_gives_jobs_back(location):
    with open_store(location) as st:
        jobs = JobTable(st)
        for i in range(3):
            enqueue(st, i)
        held = [claim(st, "A", range(3), lease_s=0.2) for _ in range(2)]
        time.sleep(0.3)
        assert all(jobs.get(j.id).stale() for j in held)
        assert jobs.heartbeat("A", lease_s=30) == 2
        assert not any(jobs.get(j.id).stale() for j in held)
        _expire(st, held[0].id)
        assert jobs.release(stale=True) == 1 and jobs.get(held[0].id).state == "queued"
        assert jobs.release(owner="A") == 1 and jobs.counts()["queued"] == 3
        again = claim(st, "B", [int(held[1].submission_sha256, 16)])
        assert again.run_id == held[1].run_id and len(st.runs()) == 2  # the released job's run row, reused


def test_infrastructure_failure_is_no_verdict_and_the_rerun_replaces_it(location):
    with open_store(location) as st:
        jobs = JobTable(st)
        enqueue(st, 3)
        job = claim(st, "A", [3])
        jobs.start(job.id, "n", "0")
        jobs.note_retry(job.id, "Ray: WorkerCrashedError: the worker died")
        jobs.start(job.id, "n", "1")
        jobs.fail_infrastructure(job.id, "A", "Ray: the node died")
        (failed,) = jobs.jobs()
        assert failed.state == "failed" and failed.attempts == 2 and failed.verdict is None
        assert failed.failure == "Ray: the node died" and failed.run_id is None and failed.owner is None
        assert failed.retry_reasons == ["Ray: WorkerCrashedError: the worker died", "Ray: the node died"]
        assert st.runs() == []  # never a row with the verdict 'error' for the harness's failure
        assert claim(st, "A", [3]) is None  # failed: not claimed again in the same run
        assert enqueue(st, 3).outcome == "queued"  # the next run queues it again
        rerun = claim(st, "B", [3])
        assert jobs.finish(rerun.id, "B", make_result("s3", sha=info(3).sha256))
        (run,) = st.runs()
        assert run.verdict == "pass" and jobs.get(job.id).state == "done"


def _driver(location: str, owner: str, count: int, out) -> None:
    done = 0
    with open_store(location) as st:
        for i in range(count):
            enqueue(st, i)
        while (job := claim(st, owner, range(count))) is not None:
            if JobTable(st).finish(job.id, owner, make_result(f"s{i}", sha=job.submission_sha256)):
                done += 1
    out.put((owner, done))


def test_concurrent_drivers_share_the_queue_without_duplicates(location):
    import multiprocessing

    queue = multiprocessing.get_context("spawn").Queue()
    run_in_processes(_driver, [(location, f"D{k}", 15, queue) for k in range(3)])
    finished = dict(queue.get(timeout=10) for _ in range(3))
    assert sum(finished.values()) == 15, finished
    with open_store(location) as st:
        jobs = JobTable(st).jobs()
        assert len(jobs) == 15 and len({j.submission_sha256 for j in jobs}) == 15
        assert all(j.state == "done" for j in jobs)
        runs = st.runs()
        assert len(runs) == 15 and all(r.complete for r in runs)


def test_jobs_command_shows_owner_lease_and_stale_and_releases(location, capsys):
    with open_store(location) as st:
        jobs = JobTable(st)
        for i in range(4):
            enqueue(st, i)
        a = claim(st, "a1b2c3d4e5", range(4))
        b = claim(st, "f6f7f8f9", range(4))
        jobs.start(a.id, "node-a", "1")
        jobs.start(b.id, "node-b", "0")
        jobs.finish(b.id, "f6f7f8f9", make_result("s1", sha=b.submission_sha256), display_name="s1")
        _expire(st, a.id)
    assert cli_main(["jobs", "--store", location]) == 0
    out, err = capsys.readouterr()
    assert "2 queued, 1 running, 1 done, 0 failed (4 jobs); 1 stale" in err
    lines = [line.split() for line in out.splitlines()[2:]]
    assert [(r[0], r[1], r[2]) for r in lines[:2]] == [("3", "queued", "1"), ("4", "queued", "2")]
    assert lines[2][:2] == [str(a.id), "running"] and "a1b2c3d4" in lines[2] and "STALE" in lines[2]
    assert all(r[1] != "done" for r in lines)
    assert cli_main(["jobs", "--store", location, "--format", "json", "--all"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {"queued": 2, "running": 1, "done": 1, "failed": 0} and len(data["jobs"]) == 4
    assert [j["owner"] for j in data["jobs"] if j["stale"]] == ["a1b2c3d4e5"]
    assert cli_main(["jobs", "--store", location, "--release", "zzzz"]) == 2
    assert "no running job has it" in capsys.readouterr().err
    assert cli_main(["jobs", "--store", location, "--release", "a1b2"]) == 0
    assert "released 1 job(s)" in capsys.readouterr().err
    assert cli_main(["jobs", "--store", location, "--release", "--stale"]) == 0
    assert "released 0 stale" in capsys.readouterr().err
    with open_store(location) as st:
        assert JobTable(st).counts() == {"queued": 3, "running": 0, "done": 1, "failed": 0}


def test_run_all_then_rerun_skips_done_jobs_and_every_command_reads_the_store(location, tmp_path, capsys, monkeypatch):
    """run-all (serial, with a stand-in runner) into either backend; the rerun skips; the readers read it."""
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
        assert len(st.runs()) == 4 and len(JobTable(st).jobs()) == 2  # one job per file, two runs each
    for command in (
        ["leaderboard", "--task", task, "--format", "json"],
        ["history", "alpha", "--task", "mxfp4_small"],
        ["export", "--task", "mxfp4_small", "--format", "json"],
        ["jobs", "--all", "--format", "json"],
    ):
        assert cli_main([*command, "--store", location]) == 0, command
        out = capsys.readouterr().out
        assert "alpha" in out, command
    assert json.loads(out)["counts"]["done"] == 2
    assert cli_main(["jobs", "--store", location]) == 0  # every job done: a note, not a table of headers alone
    out, err = capsys.readouterr()
    assert out == "" and "0 queued, 0 running, 2 done" in err and "--all lists the done ones" in err


def test_a_long_message_on_the_progress_line_is_cut_at_a_word():
    """The progress line of a run that did not pass gives its message's first line; a long one is cut at
    a word with ' ...' (it was cut at 100 characters, mid-word: 'after the end event, b)')."""
    from harness.engine.folder import SUMMARY_CHARS, _summary

    message = (
        "9 pass, 1 rejected; first problem: the device was still busy 20.7 us per call after the end event, "
        "beyond the normal gap: work escaped the timed region (another stream or thread)\nsecond line"
    )
    line = _summary(make_result(verdict="rejected", message=message))
    note = line[line.index("(") + 1 : -1]
    assert line.startswith("rejected (9 pass, 1 rejected; first problem: the device was still busy 20.7 us")
    assert note.endswith(" ...") and len(note) <= SUMMARY_CHARS and message.startswith(note[: -len(" ...")]), line
    assert _summary(make_result(verdict="error", message="short")) == "error (short)"
