"""Static pre-scan of a submission's source with ``kernelguard`` (optional dependency).

kernelguard is a rule-based detector built from cheating submissions of GPU-kernel competitions
(output caches keyed by pointers or shapes, timer monkeypatching, CUDA-graph replay, ...). It reads
the source only; nothing runs. Each match becomes a finding ``{"rule", "severity", "message",
"blocking"}``; ``blocking`` is kernelguard's own auto-filter decision (classification "hacked"), which
is what ``--scan-policy reject`` acts on. Lower-confidence rules (e.g. DECODE_MM_REF, which flags the
honest torch_nvfp4 example for calling torch.bmm) only warn.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.engine.process_tree import HELPER_PIDS, HELPERS_LOCK
from harness.errors import UsageError
from harness.optional import import_optional

POLICIES = ("warn", "reject", "off")

Finding = dict[str, Any]  # {"rule", "severity", "message", "blocking"}, stored as JSON with the result


class ScanUnavailable(UsageError):
    """kernelguard is not installed; the message names the 'scan' extra that installs it."""


def _kernelguard() -> ModuleType:
    try:
        return import_optional("kernelguard", "scan")
    except UsageError as exc:
        raise ScanUnavailable(f"{exc}; or pass --scan-policy off") from exc


def require_scanner() -> None:
    """Raises :class:`ScanUnavailable` (exit 2) when kernelguard is missing: ``--scan-policy reject``
    must not pass a submission it could not scan."""
    _kernelguard()


def scan_source(source: str) -> tuple[list[Finding], bool]:
    """(findings, blocking): the rule matches, and whether kernelguard would filter the submission. A
    source scanned before in this process (run-all's look-ahead, :class:`ScanAhead`) is not scanned again,
    and one being scanned in another thread (the look-ahead and a compile round can meet on a file) is
    waited for."""
    key = hashlib.sha256(source.encode()).hexdigest()
    with _LOCK:
        scanning = _SCANNING.setdefault(key, threading.Lock())
    try:
        with scanning:  # a scan of the same source under way (the look-ahead's, a round's): its result
            with _LOCK:
                known = _SCANNED.get(key)
            if known is not None:
                return copy.deepcopy(known[0]), known[1]
            findings, hacked = _analyze(source)
            with _LOCK:
                if len(_SCANNED) >= MAX_REMEMBERED:
                    _SCANNED.clear()
                _SCANNED[key] = (copy.deepcopy(findings), hacked)
            return findings, hacked
    finally:
        with _LOCK:
            if _SCANNING.get(key) is scanning and not scanning.locked():
                del _SCANNING[key]


MAX_REMEMBERED = 256  # sources whose scan this process keeps (by content)
_SCANNED: dict[str, tuple[list[Finding], bool]] = {}
_SCANNING: dict[str, threading.Lock] = {}  # per source: held while it is scanned, so it is scanned once
_LOCK = threading.Lock()
_ACTIVE: set[ScanAhead] = set()  # the look-aheads the jobs' own scans move on


SCAN_TIMEOUT_S = 60.0  # a source that keeps kernelguard busy longer is not vouched for
_CHILD = "import sys, json; sys.path[:] = json.loads(sys.argv[1]); from harness.engine.scan import _child; _child()"


class ScanFailed(RuntimeError):
    """kernelguard did not finish on a source (it crashed, or ran past SCAN_TIMEOUT_S)."""


def _analyze(source: str) -> tuple[list[Finding], bool]:
    """kernelguard's analysis in a child process: a few tenths of a second of pure Python an example,
    which in a thread of this process held the interpreter lock the run's own thread needed (on the
    device the run's preparation then took about as long as the scan), and which a crafted source could
    keep busy forever."""
    _kernelguard()  # missing: ScanUnavailable, with the extra that installs it
    pipe = subprocess.PIPE
    with HELPERS_LOCK:  # named before any supervisor can list it: run-all scans ahead while a job runs
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, json.dumps(sys.path)], stdin=pipe, stdout=pipe, stderr=pipe, text=True
        )
        HELPER_PIDS.add(child.pid)
    try:
        stdout, stderr = child.communicate(source, timeout=SCAN_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise ScanFailed(f"kernelguard did not finish in {SCAN_TIMEOUT_S:.0f} s") from exc
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        with HELPERS_LOCK:  # reaped: a later process with its id is not the harness's
            HELPER_PIDS.discard(child.pid)
    if child.returncode != 0:
        raise ScanFailed(f"kernelguard failed: {stderr.strip()[-300:]}")
    findings, hacked = json.loads(stdout)
    return findings, bool(hacked)


def _child() -> None:
    """The child process's side of :func:`_analyze`: the source on stdin, [findings, hacked] on stdout."""
    json.dump(_analyze_here(sys.stdin.read()), sys.stdout)


def _analyze_here(source: str) -> tuple[list[Finding], bool]:
    kernelguard = _kernelguard()
    report = kernelguard.analyze_code(source, compute_structural_hash=False)
    hacked = bool(report.get("should_filter"))
    findings = []
    for match in report.get("matched_patterns", []):
        rule = str(match.get("pattern", "?"))
        blocking = hacked and _auto_filters(kernelguard, rule)
        findings.append(
            {
                "rule": rule,
                "severity": str(match.get("severity", "?")),
                "message": str(match.get("evidence", "")),
                "blocking": blocking,
            }
        )
    return findings, hacked


def _auto_filters(kernelguard: ModuleType, rule: str) -> bool:
    try:
        return bool(kernelguard.classify([{"pattern": rule, "field": "code", "severity": "critical"}])[1])
    except Exception:
        return True


def scan_file(path: str | os.PathLike[str]) -> tuple[list[Finding], bool]:
    return scan_source(Path(path).read_text(errors="replace"))


def prescan(
    path: str | os.PathLike[str], policy: str, warnings: list[str], job: bool = True
) -> tuple[list[Finding], str | None]:
    """The static scan before a ranked run: (findings, the rejection message when ``policy`` is
    "reject" and kernelguard would filter the submission, else None). Findings become warnings; a
    missing kernelguard is a warning too. ``job``: a job's own scan, which lets run-all's look-ahead
    scan one more file (``harness.engine.compile_round`` asks without being one)."""
    if job:
        for ahead in list(_ACTIVE):
            ahead.consumed()
    try:
        findings, hacked = scan_file(path)
    except ScanUnavailable as exc:
        if policy == "reject":
            raise  # RunOptions.validate checks first; a scanner that vanished since is still no pass
        warnings.append(f"static scan skipped: {exc}")
        return [], None
    except ScanFailed as exc:
        if policy == "reject":
            return [], f"rejected: the static scan could not vouch for the source (--scan-policy reject): {exc}"
        warnings.append(f"static scan skipped: {exc}")
        return [], None
    for f in findings:
        warnings.append(f"static scan: {f['rule']} ({f['severity']}): {f['message']}")
    if hacked and policy == "reject":
        rules = ", ".join(sorted({f["rule"] for f in findings if f.get("blocking")}))
        return findings, (
            f"rejected by the static scan before running (--scan-policy reject): {rules}; see the findings"
        )
    return findings, None


class BackgroundPrescan:
    """:func:`prescan` in a thread (which waits on the scan's child process), started before the worker
    and read before the submission is imported: the scan overlaps the worker's start instead of delaying
    it, and a rejected submission still never runs. Its warnings join the run's in :meth:`result`."""

    def __init__(self, path: str | os.PathLike[str], policy: str) -> None:
        self._warnings: list[str] = []
        self._outcome: tuple[list[Finding], str | None] | BaseException = ([], None)
        self._thread = threading.Thread(target=self._work, args=(path, policy), name="prescan", daemon=True)
        self._thread.start()

    def _work(self, path: str | os.PathLike[str], policy: str) -> None:
        try:
            self._outcome = prescan(path, policy, self._warnings)
        except BaseException as exc:  # raised in the run's own thread by result()
            self._outcome = exc

    def result(self, warnings: list[str]) -> tuple[list[Finding], str | None]:
        """Waits for the scan: (findings, the rejection message or None), as :func:`prescan` returns them."""
        self._thread.join()
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        warnings.extend(self._warnings)
        return self._outcome


class ScanAhead:
    """run-all, serial: scans the next jobs' files in a background thread while the current job runs, at
    most ``window`` files ahead of the jobs' own scans (:meth:`consumed`), so a job finds its file already
    scanned. Scanning reads the source only; a file that fails here is scanned again by its job, which
    reports the failure."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]], window: int = 2) -> None:
        self._paths, self._window = list(paths), window
        self._done = self._used = 0
        self._turn = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._work, name="scan-ahead", daemon=True)
        _ACTIVE.add(self)
        self._thread.start()

    def consumed(self) -> None:
        """A job scanned its file: the thread may scan one more."""
        with self._turn:
            self._used += 1
            self._turn.notify()

    def close(self) -> None:
        _ACTIVE.discard(self)
        with self._turn:
            self._stop = True
            self._turn.notify()
        self._thread.join(timeout=5)

    def _work(self) -> None:
        for path in self._paths:
            with self._turn:
                self._turn.wait_for(lambda: self._stop or self._done - self._used < self._window)
                if self._stop:
                    return
            try:
                scan_file(path)
            except Exception:  # the job's own scan reports it
                pass
            with self._turn:
                self._done += 1
