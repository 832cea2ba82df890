"""The worker process's first code: it confines itself (:mod:`harness.worker.sandbox`) before torch,
the task or the submission is imported, so no thread or library starts outside the sandbox, then runs
the worker loop (:func:`harness.worker.main.worker_main`). Imports nothing heavy at module level: the
spawned child unpickles its target (this module) and its config before anything else runs.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from harness.worker import sandbox
from harness.worker.config import WorkerConfig


def _die_with_parent(parent: int) -> None:
    """Linux: the worker gets SIGKILL when the process that started it dies (a killed run-all or Ray
    worker), so no submission keeps running, on a GPU the next job is given, after its harness is gone.
    Set after the privilege drop, which clears it."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the setting took hold
        os._exit(1)


def _isolate(cfg: WorkerConfig) -> dict:
    """Everything before the submission can run: own process group, output files, limits, then the
    sandbox (harness.worker.sandbox). Returns the sandbox's report for the parent."""
    parent = os.getppid()
    os.setsid()  # own process group: the parent can kill everything the submission starts
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    out = os.open(cfg.stdout_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    err = os.open(cfg.stderr_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.close(out)
    os.close(err)
    resource.setrlimit(resource.RLIMIT_FSIZE, (cfg.output_limit_bytes, cfg.output_limit_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.environ.update(cfg.env)
    # the harness's own modules still to be imported come from the tree the worker started from,
    # not from the working directory, which becomes the run folder ('' on sys.path meant the former)
    sys.path[:] = [sandbox.harness_root() if p in ("", ".") else p for p in sys.path]
    confine = cfg.confine  # False only when measuring the sandbox's own cost
    report = _namespaces() if confine and os.geteuid() == 0 else {}
    user = _change_user(cfg, report, confine)
    _die_with_parent(parent)
    run_dir = cfg.run_dir or os.path.dirname(os.path.abspath(cfg.submission_path))
    os.chdir(run_dir)
    if not confine:
        return {"off": "turned off to measure its cost (bench/sandbox_overhead.py)", "user": user}
    return dict(
        sandbox.confine(run_dir, cfg.sandbox_writable, cfg.sandbox_readable, user, report.get("netns", False)), **report
    )


def _namespaces() -> dict[str, Any]:
    """Root only: a network namespace (loopback only) and the system's unix sockets covered."""
    report: dict[str, Any] = {}
    try:
        sandbox.new_network_namespace()
        report["netns"] = True
    except OSError as exc:
        report["netns_error"] = str(exc)
    try:
        report["hidden_sockets"] = sandbox.hide_unix_sockets()
    except OSError as exc:
        report["sockets_error"] = str(exc)
    return report


def _change_user(cfg: WorkerConfig, report: dict, confine: bool) -> str:
    """'nobody' (the drop), 'root' (stays root: without capabilities when confined) or 'same'."""
    if cfg.run_as_uid is not None:
        os.setgroups([])
        os.setgid(cfg.run_as_gid if cfg.run_as_gid is not None else cfg.run_as_uid)
        os.setuid(cfg.run_as_uid)
        return "nobody"
    if os.geteuid() != 0:
        return "same"
    if confine:
        try:
            sandbox.drop_capabilities()
            report["capabilities_dropped"] = True
        except OSError as exc:
            report["capabilities_error"] = str(exc)
    return "root"


def start(conn: Connection, cfg: WorkerConfig) -> None:
    t0 = time.perf_counter()
    try:
        confinement = _isolate(cfg)
    except FileNotFoundError:
        if not os.path.isdir(os.path.dirname(os.path.abspath(cfg.stdout_path))):
            # the run this worker was started for is over: its folder is gone (the harness, stopped by a
            # signal while this worker was being forked, removed it). Nobody waits for it: a quiet exit,
            # not a traceback on the stopped harness's terminal
            os._exit(1)
        raise
    t1 = time.perf_counter()
    from harness.worker.main import worker_main

    worker_main(conn, cfg, confinement, {"isolate": t1 - t0, "imports": time.perf_counter() - t1})
