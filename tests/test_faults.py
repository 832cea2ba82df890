"""Fault injection into real run-all drivers (subprocesses, CPU, the small mxfp4 fixture task, mode
test): a SIGKILLed driver and its dead leases, SIGINT, SIGTERM, PostgreSQL restarted mid-run, two
drivers sharing one PostgreSQL queue, and (marked slow) the raylet of the driver's Ray cluster killed.

Each fault lands at a random point (after a random number of finished jobs, the seed printed) of a
run of 10 submissions: 8 correct (the torch example, each with a different comment, so 8 jobs), one
wrong (``fail``), one raising (``error``). Then the run is completed (or resumed by a rerun) and
checked against an undisturbed run of the same folder: every submission has exactly one finished run
with the undisturbed verdict, no false ``error``, no job left running, the documented exit code, and
no ``harness-*`` temporary folder left in the drivers' temp dir.

PostgreSQL cases need $HARNESS_TEST_POSTGRES_URL (.ci/run starts a server with scripts/test_postgres.sh,
whose folder, $PG_TEST_DIR, the restart case needs too); without it they are skipped, saying so.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.store.database import open_store
from harness.store.jobs import JobTable
from tests.store_backends import PG_ENV, fresh_location

ROOT = Path(__file__).resolve().parents[1]
TASK = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
CORRECT = ROOT / "submissions" / "torch_mxfp4.py"
WRONG = ROOT / "tests" / "fixtures" / "submissions" / "wrong_zeros.py"
RAISES = ROOT / "tests" / "fixtures" / "submissions" / "raises.py"
DEADLINE_S = 240


def _subs(folder: Path, correct: int = 8, pause_s: float = 0.0) -> Path:
    """``correct`` correct files, one wrong, one that raises; ``pause_s``: each correct one sleeps that
    long when imported (a run long enough for a fault to land in its middle: warm workers start a job
    in a fraction of a second)."""
    folder.mkdir(parents=True, exist_ok=True)
    pause = f"import time as _t\n_t.sleep({pause_s})\n" if pause_s else ""
    for i in range(correct):
        (folder / f"ok{i:02d}.py").write_text(f"# name: ok{i:02d}\n# variant {i}\n{pause}" + CORRECT.read_text())
    (folder / "wrong.py").write_text(WRONG.read_text())
    (folder / "raises.py").write_text(RAISES.read_text())
    return folder


def _env(tmp: Path) -> dict[str, str]:
    temp = tmp / "tmp"
    temp.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(TMPDIR=str(temp), HARNESS_SPOOL_DIR=str(tmp / "spool"), PYTHONPATH=str(ROOT))
    return env


def _cmd(subs: Path, store: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "harness",
        "run-all",
        str(subs),
        "--task",
        TASK,
        "--mode",
        "test",
        "--device",
        "cpu",
        "--store",
        store,
        "--lease",
        "3",
        *extra,
    ]


def _start(subs: Path, store: str, tmp: Path, *extra: str) -> subprocess.Popen:
    log = open(tmp / f"driver-{time.monotonic_ns()}.log", "w")
    return subprocess.Popen(_cmd(subs, store, *extra), cwd=ROOT, env=_env(tmp), stdout=log, stderr=log, text=True)


def _finish(subs: Path, store: str, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        _cmd(subs, store, *extra), cwd=ROOT, env=_env(tmp), capture_output=True, text=True, timeout=DEADLINE_S
    )


def _done(store: str) -> int:
    try:
        with open_store(store) as st:
            return JobTable(st).counts()["done"]
    except Exception:  # not created yet
        return 0


def _wait_done(store: str, proc: subprocess.Popen, at_least: int) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while _done(store) < at_least:
        assert proc.poll() is None, f"the driver ended (exit {proc.returncode}) before {at_least} jobs were done"
        assert time.monotonic() < deadline, f"fewer than {at_least} jobs done after {DEADLINE_S} s"
        time.sleep(0.2)


def _running(store: str) -> bool:
    with open_store(store) as st:
        return bool(JobTable(st).jobs(state="running"))


def _kill_holding_a_job(store: str, proc: subprocess.Popen) -> None:
    """SIGKILLs the driver while it holds a job. It claims the next job a moment after the last ended, and
    a job can end between a look at the store and the kill: so the driver is stopped (SIGSTOP) before the
    look that decides, and the kill follows only if a job is still running; else it goes on and the look
    is repeated. A stopped driver writes nothing, so the job the look saw is still the driver's when it dies."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        assert proc.poll() is None, f"the driver ended (exit {proc.returncode}) with no job left running"
        assert time.monotonic() < deadline, f"no job running after {DEADLINE_S} s"
        if _running(store):
            proc.send_signal(signal.SIGSTOP)
            try:
                held = _running(store)
            except Exception:  # a store the stopped driver held locked: look again
                held = False
            if held:
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
                return
            proc.send_signal(signal.SIGCONT)
        time.sleep(0.05)


def _random_point(low: int = 1, high: int = 6) -> int:
    seed = int(os.environ.get("HARNESS_FAULT_SEED") or time.time_ns() % 100_000)
    point = random.Random(seed).randint(low, high)
    print(f"fault after {point} finished jobs (HARNESS_FAULT_SEED={seed} repeats it)")
    return point


def _verdicts(store: str) -> dict[str, list[str]]:
    """Every finished run's verdict, by the submission's display name."""
    with open_store(store) as st:
        out: dict[str, list[str]] = {}
        for run in st.runs():
            if run.complete:
                out.setdefault(run.display_name, []).append(run.verdict)
        return out


def _check_complete(store: str, tmp: Path, expected: dict[str, str]) -> None:
    """Exactly one finished verdict per submission, the undisturbed one; no job left; no temp folder."""
    got = _verdicts(store)
    assert {name: len(v) for name, v in got.items()} == dict.fromkeys(expected, 1), got
    assert {name: v[0] for name, v in got.items()} == expected
    with open_store(store) as st:
        jobs = JobTable(st).jobs()
        assert len(jobs) == len(expected) and all(j.state == "done" for j in jobs), [(j.id, j.state) for j in jobs]
        assert all(r.complete for r in st.runs()), "an incomplete run row was left"
    left = sorted(p.name for p in (tmp / "tmp").glob("harness-*"))
    assert left == [], left


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory) -> dict[str, str]:
    """The verdicts of an undisturbed run of the fixture folder (what every fault must end with)."""
    tmp = tmp_path_factory.mktemp("undisturbed")
    subs = _subs(tmp / "subs")
    out = _finish(subs, str(tmp / "store"), tmp)
    assert out.returncode == 0, out.stderr
    got = _verdicts(str(tmp / "store"))
    assert all(len(v) == 1 for v in got.values()), got
    verdicts = {name: v[0] for name, v in got.items()}
    assert len(verdicts) == 10 and verdicts["wrong"] == "fail" and verdicts["raises"] == "error", verdicts
    assert sum(v == "pass" for v in verdicts.values()) == 8, verdicts
    return verdicts


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path) -> str:
    return fresh_location(request.param, tmp_path)


def test_a_sigkilled_driver_leaves_stale_leases_that_the_rerun_takes_over(undisturbed, store, tmp_path):
    subs = _subs(tmp_path / "subs")
    driver = _start(subs, store, tmp_path)
    try:
        _wait_done(store, driver, _random_point())
        _kill_holding_a_job(store, driver)
    finally:
        driver.kill()
    with open_store(store) as st:
        running = JobTable(st).jobs(state="running")
    assert running, "the driver had no job running when it was killed: the fault never fired"
    time.sleep(3.5)  # the lease (--lease 3) runs out: the dead driver's jobs are stale
    jobs = subprocess.run(
        [sys.executable, "-m", "harness", "jobs", "--store", store], cwd=ROOT, capture_output=True, text=True
    )
    assert jobs.returncode == 0 and f"{len(running)} stale" in jobs.stderr and "STALE" in jobs.stdout, jobs
    out = _finish(subs, store, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "taken over: the lease of driver" in out.stderr, out.stderr
    _check_complete(store, tmp_path, undisturbed)


def test_a_dead_drivers_jobs_are_released_by_the_jobs_command(undisturbed, tmp_path):
    store = str(tmp_path / "store")
    subs = _subs(tmp_path / "subs")
    driver = _start(subs, store, tmp_path, "--lease", "600")  # a long lease: only --release frees them now
    try:
        _wait_done(store, driver, _random_point(1, 4))
        _kill_holding_a_job(store, driver)
    finally:
        driver.kill()
    with open_store(store) as st:
        (held,) = JobTable(st).jobs(state="running")
    release = subprocess.run(
        [sys.executable, "-m", "harness", "jobs", "--store", store, "--release", held.owner[:8]],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert release.returncode == 0 and "released 1 job(s)" in release.stderr, release.stderr
    out = _finish(subs, store, tmp_path, "--lease", "600")
    assert out.returncode == 0, out.stderr
    _check_complete(store, tmp_path, undisturbed)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_releases_the_running_jobs_keeps_the_results_and_exits_with_its_code(
    undisturbed, tmp_path, signum, code
):
    store = str(tmp_path / "store")
    subs = _subs(tmp_path / "subs")
    driver = _start(subs, store, tmp_path)
    try:
        _wait_done(store, driver, _random_point(1, 4))
        done_before = _done(store)
        assert driver.poll() is None, "the driver ended before the signal: the fault never fired"
        driver.send_signal(signum)
        assert driver.wait(60) == code, sorted(tmp_path.glob("driver-*.log"))[-1].read_text()
    finally:
        driver.kill()
    log = sorted(tmp_path.glob("driver-*.log"))[-1].read_text()
    assert f"stopped by {signal.Signals(signum).name}" in log and "Traceback" not in log, log
    with open_store(store) as st:
        counts = JobTable(st).counts()
    assert counts["running"] == 0 and counts["done"] >= done_before and counts["failed"] == 0, counts
    assert counts["queued"] > 0, "every job had ended before the signal: the fault never fired"
    assert all(v in ("pass", "fail", "error") for vs in _verdicts(store).values() for v in vs)
    assert [p.name for p in (tmp_path / "tmp").glob("harness-*")] == []
    out = _finish(subs, store, tmp_path)
    assert out.returncode == 0, out.stderr
    _check_complete(store, tmp_path, undisturbed)


def _pg_ctl(action: str, *args: str) -> None:
    folder = os.environ.get("PG_TEST_DIR")
    if not folder:
        pytest.skip("$PG_TEST_DIR unset: the PostgreSQL restart needs the test server's folder")
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    cmd = [str(bins[-1]), "-D", f"{folder}/data", "-l", f"{folder}/server.log", "-w", action, *args]
    if os.geteuid() == 0:
        owner = Path(folder, "data").owner()
        cmd = ["runuser", "-u", owner, "--", *cmd]
    # the server outlives pg_ctl: it must not hold a pipe of ours open
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def test_postgresql_restarted_mid_run_loses_nothing(undisturbed, tmp_path):
    store = fresh_location("postgresql", tmp_path)
    subs = _subs(tmp_path / "subs")
    driver = _start(subs, store, tmp_path)
    try:
        _wait_done(store, driver, _random_point(1, 5))
        _pg_ctl("restart", "-m", "fast")
        assert driver.wait(DEADLINE_S) == 0
    finally:
        driver.kill()
    log = sorted(tmp_path.glob("driver-*.log"))[-1].read_text()
    assert "reconnected to the PostgreSQL store" in log and "Traceback" not in log, log
    _check_complete(store, tmp_path, undisturbed)


def test_two_drivers_split_a_20_file_run_on_postgresql(tmp_path):
    if not os.environ.get(PG_ENV):
        pytest.skip(f"no test PostgreSQL server (${PG_ENV} unset; .ci/run starts one)")
    store = fresh_location("postgresql", tmp_path)
    subs = _subs(tmp_path / "subs", correct=18)
    drivers = [_start(subs, store, tmp_path) for _ in range(2)]
    try:
        codes = [d.wait(DEADLINE_S) for d in drivers]
    finally:
        for d in drivers:
            d.kill()
    assert codes == [0, 0]
    logs = [p.read_text() for p in sorted(tmp_path.glob("driver-*.log"))]
    ran = [sum(1 for line in log.splitlines() if line.startswith("[") and "/" in line.split()[0]) for log in logs]
    assert sum(ran) == 20 and all(n > 0 for n in ran), ran  # both worked, nothing twice
    expected = {f"ok{i:02d}": "pass" for i in range(18)} | {"wrong": "fail", "raises": "error"}
    _check_complete(store, tmp_path, expected)
