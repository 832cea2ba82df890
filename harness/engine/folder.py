"""Runs every submission of a folder on one task and stores each result as it ends (``run-all``).

Which files: every ``*.py`` directly in the folder, sorted, except ``__init__.py``, files starting
with ``_``, and files meant for another task (``harness.engine.submission.discover``). Each one is a
job in the store's job table (:mod:`harness.store.jobs`): a job already done for the same file
contents, task, mode and harness version is skipped (and said so). The driver (this process, with a
uuid as its owner id) then claims the jobs one at a time, whenever its executor has a free slot
(:mod:`harness.engine.executors`: serial here, or Ray across GPUs), under a lease its heartbeat
thread renews; other drivers on the same store claim the rest, and a job whose lease ran out (its
driver is gone) is taken over, reusing its run row. Each result is stored the moment its job ends,
with the job marked done in the same transaction, by its owner only: one verdict per job.

Failures: a submission's own is its verdict; the machine's, Ray's or the harness's are retried with
backoff and then leave the job ``failed`` (infrastructure) with its reason and no verdict, for the
next run to take up; a store that stays unreachable ends the run (its measured result is kept in a
local spool file and written by the next run: :mod:`harness.store.spool`); a lost Ray cluster ends it
at once. SIGINT and SIGTERM stop claiming, release the running jobs to the queue (a result being
written is written first) and end the run with ``FolderRun.stopped`` set.

The secret of a ranked run is taken once, here, before any executor starts, and handed to every job.
"""

from __future__ import annotations

import dataclasses
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import harness
from harness.engine.diagnosis import diagnose_result
from harness.engine.executors.cleanup import sweep_temp_folders
from harness.engine.executors.job import JobSink, JobSpec, JobStart, load_task_or_usage_error
from harness.engine.executors.serial import SerialExecutor
from harness.engine.lease import Heartbeat
from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.progress import Progress
from harness.engine.scan import ScanAhead
from harness.engine.stop_signals import Signals, Stopped
from harness.engine.submission import discover, display_name, submission_info
from harness.errors import UsageError
from harness.results import RunResult, SubmissionInfo
from harness.store import spool
from harness.store.backends import StoreUnavailable
from harness.store.database import Store, git_commit_of, open_store, resolve_location
from harness.store.jobs import DEFAULT_LEASE_S, Job, JobTable, new_owner

if TYPE_CHECKING:  # imported where used: it imports torch, which the CLI imports after warming the pool
    from harness.engine.compile_round import CompileRounds, RoundRecord

__all__ = ["FolderEntry", "FolderRun", "InfraFailure", "load_task_or_usage_error", "run_folder"]


@dataclass
class FolderEntry:
    """One submission's run in a folder run."""

    path: Path
    name: str
    run_id: int
    result: RunResult
    elapsed_s: float
    internal_error: bool = False  # always False: such a job has no entry (see FolderRun.infra_failed)
    job_id: int | None = None
    attempts: int = 1
    node: str | None = None
    gpu: str | None = None
    overhead_s: float | None = None  # job handed to the executor -> runner started (last attempt)


@dataclass
class InfraFailure:
    """A job the machine, Ray or the harness failed on beyond its retries: no verdict, back in the queue."""

    path: Path
    name: str
    job_id: int
    reason: str


@dataclass
class FolderRun:
    task: str
    mode: str
    store_path: str
    entries: list[FolderEntry] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)
    already_done: list[Path] = field(default_factory=list)
    busy: list[Path] = field(default_factory=list)  # running under another driver when this one began
    executor: str = "serial"
    wall_s: float = 0.0
    owner: str = ""
    infra_failed: list[InfraFailure] = field(default_factory=list)
    stopped: int | None = None  # the signal that stopped the run (SIGINT, SIGTERM), else None
    released: int = 0  # jobs this driver gave back to the queue when it ended
    lost: list[str] = field(default_factory=list)  # results not stored: another driver took the job over
    compile_rounds: list[RoundRecord] = field(default_factory=list)  # serial: new files compiled between jobs

    @property
    def internal_errors(self) -> int:
        """Jobs failed (infrastructure) in this run."""
        return len(self.infra_failed)


def _task_ref(task: Any) -> str:
    """How a job names the task: the built-in name, else the path of its task.yml."""
    from tasks.registry import TASKS_DIR

    return task.name if Path(task.path).resolve().parent == TASKS_DIR.resolve() else str(Path(task.path) / "task.yml")


@dataclass
class _Sub:
    """A submission this driver holds: what a job of it needs."""

    path: Path
    info: SubmissionInfo
    name: str
    source: bytes


class _Claimer:
    """The executors' job source: claims this driver's next job in the store when asked."""

    def __init__(
        self,
        jobs: JobTable,
        report: FolderRun,
        subs: dict[str, _Sub],
        task: Any,
        begin_run: Callable[[Any, Job], int],
        lease_s: float,
        say: Callable[[str], None],
        signals: Signals,
    ):
        self.jobs, self.report, self.subs, self.task = jobs, report, subs, task
        self.begin_run, self.lease_s, self.say, self.signals = begin_run, lease_s, say, signals
        self.hashes = list(subs)
        self.stopping = False
        self.rounds: CompileRounds | None = None  # serial: compiles the next new files before a job

    def next(self) -> JobSpec | None:
        if self.stopping or not self.hashes:
            return None
        with self.signals.critical():  # a claim is never cut in half by a signal
            job = self.jobs.claim_next(
                self.report.owner,
                self.hashes,
                self.task.name,
                self.report.mode,
                harness.__version__,
                self.begin_run,
                self.lease_s,
            )
        if job is None:
            return None
        sub = self.subs[job.submission_sha256]
        note = claim_note(job, sub.path.name)
        if note:
            self.say(note)
        if self.rounds is not None:
            self.rounds.before(job.submission_sha256)
        return JobSpec(job.id, str(sub.path), sub.source, sub.info, sub.name, _task_ref(self.task), self.report.mode)

    def exhausted(self) -> bool:
        if self.stopping or not self.hashes:
            return True
        return self.jobs.outstanding(self.hashes, self.task.name, self.report.mode, harness.__version__) == 0


class _StoreSink(JobSink):
    """Writes every job event to the job table and the progress display."""

    def __init__(
        self,
        jobs: JobTable,
        report: FolderRun,
        progress: Progress,
        signals: Signals,
        location: str,
        target_gpu: str | None = None,
    ):
        self.jobs, self.report, self.progress, self.signals = jobs, report, progress, signals
        self.location, self.target_gpu = location, target_gpu
        self.total = progress.total
        self.starts: dict[int, JobStart] = {}
        self.attempts: dict[int, int] = {}

    def started(self, spec: JobSpec, start: JobStart) -> None:
        first = spec.job_id not in self.starts
        self.starts[spec.job_id] = start
        self.attempts[spec.job_id] = self.attempts.get(spec.job_id, 0) + 1
        with self.signals.critical():
            self.jobs.start(spec.job_id, start.node, start.gpu, _iso(start.started_at))
        if first:
            self.progress.move("queued", "running")

    def placed(self, spec: JobSpec, start: JobStart) -> None:
        self.starts[spec.job_id] = start
        self.jobs.place(spec.job_id, start.node, start.gpu)

    def _entry(self, spec: JobSpec, result: RunResult) -> FolderEntry:
        start = self.starts.get(spec.job_id)
        elapsed = time.time() - start.started_at if start else 0.0
        entry = FolderEntry(
            Path(spec.path),
            spec.display_name,
            self.jobs.run_id_of(spec.job_id) or 0,
            result,
            elapsed,
            False,
            spec.job_id,
            self.attempts.get(spec.job_id, 0),
            start.node if start else None,
            start.gpu if start else None,
            max(0.0, start.started_at - spec.submitted_at) if start else None,
        )
        self.report.entries.append(entry)
        where = f", {entry.node} GPU {entry.gpu}" if entry.gpu is not None and self.report.executor != "serial" else ""
        self.progress.line(f"{self._count()} {Path(spec.path).name}: {_summary(result)} [{elapsed:.1f} s{where}]")
        hint = diagnose_result(result, self.target_gpu or "")
        if hint:
            self.progress.line(f"{self._count()} {Path(spec.path).name}: {hint}")
        return entry

    def _count(self) -> str:
        return f"[{len(self.report.entries) + len(self.report.infra_failed)}/{self.total}]"

    def finished(self, spec: JobSpec, result: RunResult) -> None:
        with self.signals.critical():
            try:
                stored = self.jobs.finish(spec.job_id, self.report.owner, result, display_name=spec.display_name)
            except Exception as exc:
                kept = spool.save(self.location, spec.job_id, result, spec.display_name)
                self.progress.line(f"{Path(spec.path).name}: {result.verdict}, kept in {kept} (the store failed)")
                if isinstance(exc, StoreUnavailable):
                    raise
                raise StoreUnavailable(
                    f"writing the result of {Path(spec.path).name} to the store {self.jobs.store.location} failed "
                    f"({type(exc).__name__}: {exc}); it is kept in {kept} and written by the next run-all"
                ) from exc
            self.progress.move("running", "done")
            if stored:
                self._entry(spec, result)
            else:
                self.report.lost.append(spec.display_name)
                self.progress.line(
                    f"{Path(spec.path).name}: result not stored: job {spec.job_id} was taken over by another "
                    "driver (this driver's lease ran out); its verdict is that driver's"
                )

    def retrying(self, spec: JobSpec, reason: str) -> None:
        with self.signals.critical():
            self.jobs.note_retry(spec.job_id, reason)
        self.progress.line(f"retrying {Path(spec.path).name}: {reason}")

    def failed(self, spec: JobSpec, reason: str) -> None:
        with self.signals.critical():
            self.jobs.fail_infrastructure(spec.job_id, self.report.owner, reason)
        self.report.infra_failed.append(InfraFailure(Path(spec.path), spec.display_name, spec.job_id, reason))
        self.progress.move("running" if spec.job_id in self.starts else "queued", "failed")
        self.progress.line(
            f"{self._count()} {Path(spec.path).name}: failed (infrastructure): {reason[:200]}; no verdict stored, "
            "the job is back in the queue: rerun to evaluate it"
        )

    def tick(self) -> None:
        self.progress.tick()


def _iso(t: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def run_folder(
    folder: str | Path,
    task: Any,
    mode: str = "leaderboard",
    options: RunOptions | None = None,
    *,
    results_dir: str | None = None,
    secret_file: str | None = None,
    everything: bool = False,
    progress: Callable[[str], None] | None = None,
    executor: Any = None,
    retries: int = 2,
    live: bool | None = None,
    rerun: bool = False,
    lease_s: float = DEFAULT_LEASE_S,
) -> FolderRun:
    """Runs and stores every submission in ``folder`` for ``task`` on ``executor`` (a
    :mod:`harness.engine.executors` object, or a callable making one once the secret is taken;
    default: serial). ``rerun``: run jobs already done again (new runs) instead of skipping them.
    ``results_dir`` is any store location (folder, .sqlite file, postgresql:// URL). ``lease_s``:
    how long a claim lasts without a heartbeat. ``progress`` receives one line of text per event (for
    stderr). Raises UsageError for a bad request, never for a bad submission; StoreUnavailable or
    EngineLost (exit 75) when the store or the Ray cluster went away. A SIGINT or SIGTERM returns the
    report with ``stopped`` set."""
    from harness.engine.preflight import check_store_writable
    from harness.engine.seeds import secret_notes, take_secret

    say = progress or (lambda line: None)
    (options or RunOptions()).validate()
    if not lease_s > 0:
        raise UsageError(f"the lease must be a positive number of seconds, not {lease_s}")
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
    if parsed_mode.ranked:
        if options.secret is None:
            secret, source = take_secret(secret_file)  # once, for every job, before any executor starts
            options = dataclasses.replace(
                options, secret=secret, extra_warnings=[*options.extra_warnings, *secret_notes(source)]
            )
        from harness.engine.sandbox import make_undumpable

        make_undumpable()  # the driver holds the secret: its memory is root-only, whichever executor runs
    sweep_temp_folders()
    location = resolve_location(results_dir)
    run = _FolderJob(folder, files, skipped, task, parsed_mode.value, options, say, live, rerun, lease_s, location)
    try:
        with open_store(location) as st:
            spool.replay(st, location, say)
            if executor is None:
                executor = SerialExecutor(retries)
            elif callable(executor) and not hasattr(executor, "run"):
                executor = executor()
            try:
                return run.execute(st, executor)
            finally:
                executor.close()
    finally:
        sweep_temp_folders()


@dataclass
class _FolderJob:
    folder: Any
    files: list[Path]
    skipped: list[Path]
    task: Any
    mode: str
    options: RunOptions
    say: Callable[[str], None]
    live: bool | None
    rerun: bool
    lease_s: float
    location: str

    def execute(self, st: Store, executor: Any) -> FolderRun:
        device = None
        if executor.name == "serial":  # recorded at begin, so a killed run keeps its device
            from harness.engine.device import device_info, select_device

            device = device_info(select_device(self.options.device))
        jobs = JobTable(st)
        report = FolderRun(
            task=self.task.name,
            mode=self.mode,
            store_path=str(st.location),
            skipped=self.skipped,
            executor=executor.name,
            owner=new_owner(),
        )
        subs, todo = self._enqueue(jobs, report)
        self.say(
            f"run-all: {todo} job(s) to run for {self.task.name}, mode {self.mode}, on the {executor.name} executor "
            f"({executor.slots} at a time), driver {report.owner[:8]}, results in {st.location}"
        )

        def begin_run(db: Any, job: Job) -> int:
            sub = subs[job.submission_sha256]
            return st.insert_run(
                db, self.task.name, self.mode, sub.info, sub.name, device, harness.__version__, git_commit_of(sub.path)
            )

        prog = Progress(todo, self.say, live=self.live)
        t0 = time.monotonic()
        with Signals() as signals, Heartbeat(self.location, report.owner, self.lease_s, self.say):
            claimer = _Claimer(jobs, report, subs, self.task, begin_run, self.lease_s, self.say, signals)
            sink = _StoreSink(jobs, report, prog, signals, self.location, self.task.target_gpu)
            ahead = self._scan_ahead(executor, [sub.path for sub in subs.values()])
            claimer.rounds = self._compile_rounds(executor, subs, device, prog.line)
            try:
                executor.run(claimer, self.options, sink)
            except Stopped as stop:
                claimer.stopping = True
                report.stopped = stop.signum
            finally:
                report.wall_s = time.monotonic() - t0
                claimer.stopping = True
                self._release(jobs, report)
                if ahead is not None:
                    ahead.close()
                if claimer.rounds is not None:
                    report.compile_rounds = claimer.rounds.records
        prog.close()
        if report.stopped is not None:
            self.say(
                f"stopped by {Stopped(report.stopped)}: {len(report.entries)} result(s) stored, "
                f"{report.released} job(s) released to the queue; run the same command again to finish"
            )
        return report

    def _release(self, jobs: JobTable, report: FolderRun) -> None:
        """This driver's running jobs back to the queue (a lost store: their leases run out instead)."""
        try:
            report.released += jobs.release(owner=report.owner)
        except Exception as exc:
            self.say(f"warning: could not release this driver's jobs ({type(exc).__name__}); their leases run out")

    def _scan_ahead(self, executor: Any, paths: list[Path]) -> ScanAhead | None:
        """Serial ranked runs: the next jobs' static scans run while a job runs (the first job scans its
        own file); other executors run their jobs in other processes, which scan for themselves."""
        if executor.name != "serial" or not Mode.parse(self.mode).ranked or self.options.scan_policy == "off":
            return None
        return ScanAhead(paths[1:]) if len(paths) > 1 else None

    def _compile_rounds(
        self, executor: Any, subs: dict[str, _Sub], device: Any, say: Callable[[str], None]
    ) -> CompileRounds | None:
        """Serial: the new files' kernels compiled together between jobs (harness.engine.compile_round);
        other executors' jobs compile ahead one by one, beside other GPUs' timing."""
        from harness.engine.compile_round import CompileRounds

        if executor.name != "serial" or device is None or not CompileRounds.useful(self.options, device.kind != "cpu"):
            return None
        queue = [(sha, sub.path.name, sub.source) for sha, sub in subs.items()]
        return CompileRounds(queue, self.task, self.mode, self.options, say, device)

    def _enqueue(self, jobs: JobTable, report: FolderRun) -> tuple[dict[str, _Sub], int]:
        """Every file in the queue; returns the ones this driver may claim (by sha256) and how many
        jobs are left to run."""
        subs: dict[str, _Sub] = {}
        todo = 0
        for path in self.files:
            info, name = submission_info(path), display_name(path)
            if info.sha256 in subs:
                self.say(f"skipping {path.name}: the same contents as {subs[info.sha256].path.name} (one job)")
                continue
            got = jobs.enqueue(self.task.name, self.mode, info, name, harness.__version__, self.rerun)
            if got.outcome == "done":
                report.already_done.append(path)
                self.say(
                    f"skipping {path.name}: already done for these contents, task, mode and harness version "
                    f"(job {got.job.id}, verdict {got.job.verdict}, run {got.job.run_id})"
                )
                continue
            if got.outcome == "running" and not got.job.stale():
                report.busy.append(path)
                self.say(
                    f"{path.name}: job {got.job.id} is running under driver {got.job.driver} "
                    f"(owner {(got.job.owner or '')[:8]}); taken over if its lease runs out"
                )
            subs[info.sha256] = _Sub(Path(path), info, name, Path(path).read_bytes())
            todo += 1
        return subs, todo


SUMMARY_CHARS = 160  # of a run's message on its progress line (cut at a word: the JSON has all of it)


def _summary(result: RunResult) -> str:
    from harness.report.tables import us

    score = f" {us(result.score_us)} us" if result.score_us is not None else ""
    note = ""
    if result.verdict != "pass" and result.message:
        note = f" ({textwrap.shorten(result.message.splitlines()[0], SUMMARY_CHARS, placeholder=' ...')})"
    return f"{result.verdict}{score}{note}"


def claim_note(job: Job, name: str) -> str | None:
    """What to say when a driver claims a job that has been tried before: resumed after an attempt that
    ended without a result, or taken over from a driver that died after its claim, before its attempt
    began (no attempt counted yet, but the job is not a fresh one)."""
    if not job.retry_reasons:
        return None
    return f"{'resuming' if job.attempts else 'starting'} {name}: job {job.id} ({job.retry_reasons[-1]})"
