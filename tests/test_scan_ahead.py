"""run-all's look-ahead static scan: the next jobs' files are scanned in a background thread while a job
runs, at most a window ahead of the jobs' own scans, and a job then finds its file's scan done (the scan
is remembered by the source's content, so a changed file is scanned again)."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from harness.api import RunOptions, run_folder
from harness.engine import scan

ROOT = Path(__file__).resolve().parent.parent
MXFP4_SMALL = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")


@dataclass
class Analyzed:
    """The sources the scanner really analyzed, in order, and the thread each was analyzed on."""

    sources: list[str] = field(default_factory=list)
    threads: list[str] = field(default_factory=list)


@pytest.fixture()
def analyzed(monkeypatch):
    out, lock = Analyzed(), threading.Lock()

    def analyze(source):  # kernelguard itself is not needed
        with lock:
            out.sources.append(source)
            out.threads.append(threading.current_thread().name)
        return [], False

    monkeypatch.setattr(scan, "_analyze", analyze)
    monkeypatch.setattr(scan, "_SCANNED", {})  # nothing remembered from the scans of earlier tests
    return out


def _files(tmp_path: Path, n: int) -> list[Path]:
    out = []
    for i in range(n):
        p = tmp_path / f"f{i}.py"
        p.write_text(f"# {secrets.token_hex(8)}\n")  # content no earlier test scanned
        out.append(p)
    return out


def _wait(predicate, timeout_s: float = 10.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "timed out waiting for the look-ahead"
        time.sleep(0.01)


def test_it_stays_a_window_ahead_of_the_jobs_and_a_job_finds_its_scan_done(tmp_path, analyzed):
    files = _files(tmp_path, 4)
    ahead = scan.ScanAhead(files, window=2)
    try:
        _wait(lambda: len(analyzed.sources) == 2)
        time.sleep(0.2)  # time to go further, were it not held
        assert analyzed.sources == [files[0].read_text(), files[1].read_text()]
        findings, rejection = scan.prescan(files[0], "reject", [])  # a job's own scan: found, not redone
        assert (findings, rejection) == ([], None) and files[0].read_text() not in analyzed.sources[2:]
        _wait(lambda: len(analyzed.sources) == 3)  # the job moved the window on by one
        assert analyzed.sources[2] == files[2].read_text()
        files[1].write_text("# changed since\n")
        scan.prescan(files[1], "reject", [])  # new content: scanned again
        assert analyzed.sources[-1] == "# changed since\n"
    finally:
        ahead.close()


def test_two_threads_scanning_one_source_at_once_analyze_it_once(monkeypatch):
    """The look-ahead and run-all's first compile round can ask for the same file at the same moment:
    the second waits for the first's analysis instead of starting its own."""
    calls, started = [], threading.Event()

    def slow_analyze(source):
        calls.append(source)
        started.set()
        time.sleep(0.3)  # the other thread asks meanwhile
        return [{"rule": "R", "severity": "low", "message": "m", "blocking": False}], False

    monkeypatch.setattr(scan, "_analyze", slow_analyze)
    monkeypatch.setattr(scan, "_SCANNED", {})
    source = f"# {secrets.token_hex(8)}\n"
    results = []
    first = threading.Thread(target=lambda: results.append(scan.scan_source(source)))
    first.start()
    assert started.wait(5)
    results.append(scan.scan_source(source))  # while the first analysis still runs
    first.join()
    assert calls == [source]
    assert [r[0][0]["rule"] for r in results] == ["R", "R"] and scan._SCANNING == {}


def test_a_serial_ranked_run_all_scans_each_file_once(tmp_path, analyzed):
    subs = tmp_path / "subs"
    subs.mkdir()
    for i in range(3):
        text = (ROOT / "submissions" / "torch_mxfp4.py").read_text()
        (subs / f"copy{i}.py").write_text(text + f"\n# copy {i}\n")
    shutil.copy(ROOT / "submissions" / "torch_mxfp4.py", subs / "copy3.py")
    options = RunOptions(device="cpu", max_repeats=3, blocks=2, scan_policy="warn")
    report = run_folder(subs, MXFP4_SMALL, "leaderboard", options, results_dir=str(tmp_path / "res"))
    assert len(report.entries) == 4 and all(e.result.verdict == "pass" for e in report.entries)
    assert sorted(analyzed.sources) == sorted(p.read_text() for p in subs.glob("*.py"))  # each once, not twice
    assert analyzed.threads.count("scan-ahead") >= 2  # the later jobs' scans were done ahead, not by the job


def test_kernelguard_runs_in_a_child_process_not_in_a_thread_of_the_run(monkeypatch):
    """In a thread of the run's process the scan held the interpreter lock the run's own thread needed;
    kernelguard in this process is made to fail, so a scan that ran here could not return findings."""
    kernelguard = pytest.importorskip("kernelguard")

    def not_here(*_a, **_k):
        raise AssertionError("kernelguard ran in the run's own process")

    monkeypatch.setattr(kernelguard, "analyze_code", not_here)
    source = f"# {secrets.token_hex(8)}\n" + (ROOT / "submissions" / "torch_nvfp4.py").read_text()
    findings, hacked = scan.scan_source(source)
    assert not hacked and any(f["rule"] == "DECODE_MM_REF" for f in findings)  # the child's kernelguard found it


def test_a_scan_that_does_not_finish_is_no_pass_under_reject_and_a_warning_otherwise(tmp_path, monkeypatch):
    pytest.importorskip("kernelguard")
    monkeypatch.setattr(scan, "SCAN_TIMEOUT_S", 0.01)  # no child finishes its imports that fast
    sub = tmp_path / "sub.py"
    sub.write_text(f"# {secrets.token_hex(8)}\ndef custom_kernel(data):\n    return data\n")
    findings, rejection = scan.prescan(sub, "reject", [])
    assert findings == [] and rejection and "did not finish in 0 s" in rejection
    warnings: list[str] = []
    assert scan.prescan(sub, "warn", warnings) == ([], None)
    assert warnings == ["static scan skipped: kernelguard did not finish in 0 s"]


def test_a_scan_ahead_child_living_during_a_ranked_run_is_no_stray_of_the_submission(monkeypatch, tmp_path):
    """The look-ahead scans the next file in a child process while a job runs. On an H100 such a child
    was counted as the job's submission's child process, and an honest file was rejected ("leaves 1 child
    process(es) running during timed calls"). Here a scan's child lives through the run's timed calls."""
    from harness.api import run_submission
    from harness.engine import process_tree

    monkeypatch.setattr(scan, "_kernelguard", lambda: None)
    monkeypatch.setattr(scan, "_CHILD", "import sys, time; sys.stdin.read(); time.sleep(60)")
    monkeypatch.setattr(scan, "SCAN_TIMEOUT_S", 90.0)
    children: list[int] = []

    def scan_ahead_once(message: str) -> None:  # the run's progress: start the scan once its cases run
        if children or "benchmark" not in message:
            return
        before = set(process_tree.child_pids(os.getpid()) or [])
        threading.Thread(target=lambda: _ignore(scan._analyze, "x = 1"), daemon=True).start()
        deadline = time.monotonic() + 30
        while not children and time.monotonic() < deadline:
            children.extend(set(process_tree.child_pids(os.getpid()) or []) - before)
            time.sleep(0.05)

    opts = RunOptions(device="cpu", secret="s3cret", max_repeats=3, scan_policy="off")  # its own scan aside
    try:
        r = run_submission(ROOT / "submissions" / "torch_mxfp4.py", MXFP4_SMALL, "leaderboard", opts, scan_ahead_once)
        assert children, "the scan's child never started"
        assert r.verdict == "pass", r.message
        assert all(psutil_alive(pid) for pid in children), "the scan's child ended before the run did"
    finally:
        for pid in children:
            _ignore(os.kill, pid, signal.SIGKILL)


def psutil_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _ignore(fn, *args) -> None:
    try:
        fn(*args)
    except Exception:
        pass
