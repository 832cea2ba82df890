"""One job of run-all, as every executor runs it, what it reports back, and where jobs come from.

:func:`run_job` runs on the machine that executes the job (this process for the serial executor, a
Ray worker for the Ray one). It gets the submission's source (so a node needs no shared filesystem),
writes it into a private temporary folder, runs the isolated runner on the device it was given and
returns a :class:`JobReport`. A submission's own failure is inside the RunResult (its verdict); an
exception of the harness or an unusable GPU comes back as ``retry_reason`` and is retried.

Executors take their jobs from a :class:`JobSource` one at a time, when they have a free slot (the
driver claims each one in the store's job table then), and report to a :class:`JobSink`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.engine.options import RunOptions
from harness.engine.stop_signals import held
from harness.errors import UsageError
from harness.results import RunResult, SubmissionInfo

TEMP_PREFIX = "harness-job-"  # + the pid of the process that made it + "-": see temp_prefix()
RETRY_BACKOFF_S = 0.5  # the first retry waits this long, each later one twice as long as the one before
RETRY_BACKOFF_MAX_S = 8.0


def temp_prefix(kind: str = TEMP_PREFIX) -> str:
    """A temporary folder's prefix naming its maker's pid, so that a run that finds one whose maker is
    dead (SIGKILLed) may remove it (:func:`harness.engine.executors.cleanup.sweep_temp_folders`)."""
    return f"{kind}{os.getpid()}-"


def retry_delay_s(attempt: int) -> float:
    """How long to wait before retry number ``attempt + 1`` (exponential backoff, capped)."""
    return float(min(RETRY_BACKOFF_S * 2**attempt, RETRY_BACKOFF_MAX_S))


def load_task_or_usage_error(task: Any) -> Any:
    """A Task from a name or task.yml path; a clear UsageError for anything else."""
    if not isinstance(task, str):
        return task
    try:
        from tasks import load_task
    except ImportError as exc:
        raise UsageError(f"cannot import the task registry ({exc}); run from the repository root") from exc
    try:
        return load_task(task)
    except Exception as exc:
        raise UsageError(f"cannot load task {task!r}: {exc}") from exc


@dataclass
class JobSpec:
    """What a job needs; picklable (sent to Ray workers)."""

    job_id: int
    path: str  # the submission on the driver's machine
    source: bytes  # its contents (the sha256 in ``info`` is of these bytes)
    info: SubmissionInfo
    display_name: str
    task_ref: str  # a task name, or the path of a task.yml
    mode: str
    submitted_at: float = 0.0  # time.time() when the driver handed it to the executor (last attempt)


@dataclass
class JobStart:
    """Sent when the runner starts: where the job runs."""

    job_id: int
    node: str
    gpu: str | None  # the GPU id(s) this job may use, as the scheduler set them
    started_at: float  # time.time()
    pid: int


@dataclass
class JobReport:
    start: JobStart
    result: RunResult | None = None
    retry_reason: str | None = None  # the machine or the harness failed: retry (bounded)


class JobSource(Protocol):
    """Where an executor gets its jobs (harness.engine.folder claims them in the store)."""

    def next(self) -> JobSpec | None:
        """A job claimed for this driver now, or None (none claimable now)."""

    def exhausted(self) -> bool:
        """True when no job will come any more (all done, failed, or the run is stopping)."""


class JobSink:
    """What an executor tells the driver (harness.engine.folder implements it)."""

    def started(self, spec: JobSpec, start: JobStart) -> None: ...

    def placed(self, spec: JobSpec, start: JobStart) -> None:
        """Where a job ran, known only when it ended (Ray Client)."""

    def finished(self, spec: JobSpec, result: RunResult) -> None: ...

    def retrying(self, spec: JobSpec, reason: str) -> None: ...

    def failed(self, spec: JobSpec, reason: str) -> None:
        """The machine or the harness failed on it more often than the retries allow (no verdict)."""

    def tick(self) -> None: ...


def visible_gpu() -> str | None:
    """The GPU ids the scheduler gave this process (CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES)."""
    for var in ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"):
        if os.environ.get(var) not in (None, ""):
            return os.environ[var]
    return None


def job_start(spec: JobSpec) -> JobStart:
    return JobStart(spec.job_id, socket.gethostname(), visible_gpu(), time.time(), os.getpid())


@contextlib.contextmanager
def _job_folder() -> Iterator[str]:
    """The job's private temporary folder, made and removed with the driver's stop signals held back: a
    Stopped raised in the middle of either would leave it behind while its maker lives, where
    :func:`harness.engine.executors.cleanup.sweep_temp_folders` does not look."""
    folder = None
    try:
        with held():
            folder = tempfile.mkdtemp(prefix=temp_prefix())
        yield folder
    finally:
        if folder is not None:
            with held():
                shutil.rmtree(folder, ignore_errors=True)


def run_job(
    spec: JobSpec, options: RunOptions, start: JobStart | None = None, on_usage_error: str = "raise"
) -> JobReport:
    """Runs one job here. ``on_usage_error``: 'raise' (serial: the request is wrong, stop) or 'retry'
    (a worker node: its GPU could not be attached or the node lacks something; another may work)."""
    from harness.engine.runner import run_submission
    from harness.errors import HarnessError

    start = start or job_start(spec)
    with _job_folder() as tmp:
        copy = Path(tmp) / Path(spec.path).name
        copy.write_bytes(spec.source)
        try:
            task = load_task_or_usage_error(spec.task_ref)
            result = run_submission(
                copy, task, spec.mode, dataclasses.replace(options, extra_warnings=list(options.extra_warnings))
            )
        except HarnessError as exc:  # UsageError, DeviceError: the request, or this node's device
            if on_usage_error == "raise":
                raise
            return JobReport(start, retry_reason=f"the node {start.node} could not run it: {exc}")
        except Exception as exc:
            return JobReport(start, retry_reason=f"harness internal error: {exc!r}")
    result.submission = spec.info  # the driver's path; the same contents and sha256
    return JobReport(start, result=result)
