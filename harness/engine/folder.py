"""Runs every submission of a folder on one task and stores each result as it ends (``run-all``).

Which files: every ``*.py`` directly in the folder, sorted, except ``__init__.py``, files starting
with ``_``, and files meant for another task (``harness.engine.submission.discover``). Each one is a
job in the store's job table (:mod:`harness.store.jobs`): a job already done for the same file
contents, task, mode and harness version is skipped (and said so); one left queued or running by a
driver that is gone is taken over, reusing its run row, so a rerun after a crash adds no duplicates.
Jobs run on an executor (:mod:`harness.engine.executors`: serial here, or Ray across GPUs); each
result is stored the moment its job ends, with the job marked done in the same transaction.

The secret of a ranked run is taken once, here, before any executor starts, and handed to every job.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import harness
from harness.engine.diagnosis import diagnose_result
from harness.engine.executors.job import JobSink, JobSpec, JobStart
from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.progress import Progress
from harness.engine.submission import discover, display_name, submission_info
from harness.errors import HarnessError, UsageError
from harness.results import ERROR, DeviceInfo, RunResult, SubmissionInfo
from harness.store.database import git_commit_of, now_iso, open_store
from harness.store.jobs import JobTable


@dataclass
class FolderEntry:
    """One submission's run in a folder run."""

    path: Path
    name: str
    run_id: int
    result: RunResult
    elapsed_s: float
    internal_error: bool = False  # the harness or the machine failed on it (stored as 'error')
    job_id: int | None = None
    attempts: int = 1
    node: str | None = None
    gpu: str | None = None
    overhead_s: float | None = None  # job handed to the executor -> runner started (last attempt)


@dataclass
class FolderRun:
    task: str
    mode: str
    store_path: str
    entries: list[FolderEntry] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    already_done: list[Path] = field(default_factory=list)
    busy: list[Path] = field(default_factory=list)
    executor: str = "serial"
    wall_s: float = 0.0

    @property
    def internal_errors(self) -> int:
        return sum(e.internal_error for e in self.entries)


def load_task_or_usage_error(task):
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


def _task_ref(task) -> str:
    """How a job names the task: the built-in name, else the path of its task.yml."""
    from tasks.registry import TASKS_DIR

    return task.name if Path(task.path).resolve().parent == TASKS_DIR.resolve() else str(Path(task.path) / "task.yml")


def _internal_error(
    task_name: str, mode: str, info: SubmissionInfo, device: DeviceInfo | None, reason: str, started: str
) -> RunResult:
    return RunResult(
        task=task_name,
        submission=info,
        mode=mode,
        device=device or DeviceInfo("unknown", "unknown"),
        verdict=ERROR,
        message=f"the harness could not evaluate it: {reason} (please report it)",
        started_at=started,
        finished_at=now_iso(),
        complete=True,
        harness_version=harness.__version__,
    )


class _StoreSink(JobSink):
    """Writes every job event to the job table and the progress display."""

    def __init__(
        self,
        jobs: JobTable,
        report: FolderRun,
        specs: list[JobSpec],
        progress: Progress,
        device: DeviceInfo | None,
        target_gpu: str | None = None,
    ):
        self.jobs, self.report, self.progress, self.device = jobs, report, progress, device
        self.target_gpu = target_gpu
        self.total = len(specs)
        self.starts: dict[int, JobStart] = {}
        self.attempts: dict[int, int] = {}

    def started(self, spec, start):
        self.starts[spec.job_id] = start
        self.attempts[spec.job_id] = self.attempts.get(spec.job_id, 0) + 1
        self.jobs.start(spec.job_id, start.node, start.gpu, _iso(start.started_at))
        self.progress.move("queued", "running")

    def placed(self, spec, start):
        self.starts[spec.job_id] = start
        self.jobs.place(spec.job_id, start.node, start.gpu)

    def _entry(self, spec, result, internal) -> FolderEntry:
        start = self.starts.get(spec.job_id)
        job = self.jobs.store.db.execute("SELECT run_id FROM jobs WHERE id = ?", (spec.job_id,)).fetchone()
        elapsed = time.time() - start.started_at if start else 0.0
        entry = FolderEntry(
            Path(spec.path),
            spec.display_name,
            job["run_id"],
            result,
            elapsed,
            internal,
            spec.job_id,
            self.attempts.get(spec.job_id, 0),
            start.node if start else None,
            start.gpu if start else None,
            max(0.0, start.started_at - spec.submitted_at) if start else None,
        )
        self.report.entries.append(entry)
        where = f", {entry.node} GPU {entry.gpu}" if entry.gpu is not None and self.report.executor != "serial" else ""
        self.progress.line(
            f"[{len(self.report.entries)}/{self.total}] {Path(spec.path).name}: {_summary(result)}"
            f" [{elapsed:.1f} s{where}]"
        )
        hint = diagnose_result(result, self.target_gpu)
        if hint:
            self.progress.line(f"[{len(self.report.entries)}/{self.total}] {Path(spec.path).name}: {hint}")
        return entry

    def finished(self, spec, result):
        self.jobs.finish(spec.job_id, result, display_name=spec.display_name)
        self.progress.move("running", "done")
        self._entry(spec, result, False)

    def retrying(self, spec, reason):
        self.jobs.requeue(spec.job_id, reason)
        if self.starts.pop(spec.job_id, None) is not None:  # an attempt that never started stays queued
            self.progress.move("running", "queued")
        self.progress.line(f"retrying {Path(spec.path).name}: {reason}")

    def failed(self, spec, reason):
        start = self.starts.get(spec.job_id)
        result = _internal_error(
            self.report.task,
            self.report.mode,
            spec.info,
            self.device,
            reason,
            now_iso() if start is None else _iso(start.started_at),
        )
        self.jobs.fail(spec.job_id, reason, result, display_name=spec.display_name)
        self.progress.move("running" if start else "queued", "failed")
        self._entry(spec, result, True)

    def tick(self):
        self.progress.tick()


def _iso(t: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def run_folder(
    folder,
    task,
    mode: str = "leaderboard",
    options=None,
    *,
    results_dir: str | None = None,
    secret_file: str | None = None,
    everything: bool = False,
    progress: Callable[[str], None] | None = None,
    executor=None,
    retries: int = 2,
    live: bool | None = None,
    rerun: bool = False,
) -> FolderRun:
    """Runs and stores every submission in ``folder`` for ``task`` on ``executor`` (a
    :mod:`harness.engine.executors` object, or a callable making one once the secret is taken;
    default: serial). ``rerun``: run jobs already done again (new runs) instead of skipping them.
    ``results_dir`` is any store location (folder, .sqlite file, postgresql:// URL).
    ``progress`` receives one line of text per event (for stderr). Raises UsageError for a bad
    request; never for a bad submission."""
    from harness.engine.executors.serial import SerialExecutor
    from harness.engine.preflight import check_store_writable
    from harness.engine.seeds import take_secret

    say = progress or (lambda line: None)
    (options or RunOptions()).validate()
    check_store_writable(results_dir)
    task = load_task_or_usage_error(task)
    parsed_mode = Mode.parse(mode)
    files, skipped = discover(folder, (task.name, task.compat_dir.parent.name), everything=everything)
    for p in skipped:
        say(f"skipping {p.name}: its header or name says another task (use --all to run it)")
    if not files:
        raise UsageError(
            f"no submissions for task {task.name!r} in {folder} (looked for *.py; files starting with '_' are skipped)"
        )
    options = options or RunOptions()
    if parsed_mode.ranked and options.secret is None:
        secret, source = take_secret(secret_file)  # once, for every job, before any executor starts
        from harness.engine.sandbox import make_undumpable

        make_undumpable()  # the driver holds it now: its memory is root-only, whichever executor runs
        options = dataclasses.replace(
            options, secret=secret, extra_warnings=[*options.extra_warnings, f"secret seed: {source}"]
        )
    with open_store(results_dir) as st:
        if executor is None:
            executor = SerialExecutor(retries)
        elif callable(executor) and not hasattr(executor, "run"):
            executor = executor()
        try:
            return _run_jobs(st, files, skipped, task, parsed_mode.value, options, executor, say, live, rerun)
        finally:
            executor.close()


def _run_jobs(st, files, skipped, task, mode, options, executor, say, live, rerun) -> FolderRun:
    device = None
    if executor.name == "serial":  # recorded at begin, so a killed run keeps its device
        from harness.engine.device import device_info, select_device

        device = device_info(select_device(options.device))
    jobs = JobTable(st)
    report = FolderRun(task=task.name, mode=mode, store_path=str(st.location), skipped=skipped, executor=executor.name)
    specs, seen = [], {}
    for path in files:
        info, name = submission_info(path), display_name(path)
        if info.sha256 in seen:
            say(f"skipping {path.name}: the same contents as {seen[info.sha256].name} (one job)")
            continue
        seen[info.sha256] = path
        claim = jobs.claim(
            task.name,
            mode,
            info,
            name,
            harness.__version__,
            lambda db, info=info, name=name, path=path: st.insert_run(
                db, task.name, mode, info, name, device, harness.__version__, git_commit_of(path)
            ),
            rerun=rerun,
        )
        if claim.outcome == "done":
            report.already_done.append(path)
            say(
                f"skipping {path.name}: already done for these contents, task, mode and harness version "
                f"(job {claim.job.id}, verdict {claim.job.verdict}, run {claim.job.run_id})"
            )
            continue
        if claim.outcome == "busy":
            report.busy.append(path)
            say(f"skipping {path.name}: job {claim.job.id} is {claim.job.state} under driver {claim.job.driver}")
            continue
        if claim.outcome == "retake":
            say(f"resuming {path.name}: job {claim.job.id} ({claim.job.retry_reasons[-1]})")
        specs.append(JobSpec(claim.job.id, str(path), Path(path).read_bytes(), info, name, _task_ref(task), mode))
    say(
        f"run-all: {len(specs)} job(s) for {task.name}, mode {mode}, on the {executor.name} executor "
        f"({executor.slots} at a time), results in {st.location}"
    )
    prog = Progress(len(specs), say, live=live)
    sink = _StoreSink(jobs, report, specs, prog, device, task.target_gpu)
    t0 = time.monotonic()
    try:
        executor.run(specs, options, sink)
    except HarnessError:
        for spec in specs:  # a bad request (e.g. unusable device): what did not end is removed
            row = st.db.execute("SELECT run_id, state FROM jobs WHERE id = ?", (spec.job_id,)).fetchone()
            if row and row["state"] in ("queued", "running"):
                jobs.release(spec.job_id)
                if row["run_id"]:
                    st.abandon_run(row["run_id"])
        raise
    finally:
        report.wall_s = time.monotonic() - t0
    prog.close()
    return report


def _summary(result: RunResult) -> str:
    from harness.report.tables import us

    score = f" {us(result.score_us)} us" if result.score_us is not None else ""
    note = f" ({result.message.splitlines()[0][:100]})" if result.verdict != "pass" and result.message else ""
    return f"{result.verdict}{score}{note}"
