"""Runs every submission of a folder on one task and stores each result as it ends (``run-all``).

Which files: every ``*.py`` directly in the folder, sorted, except ``__init__.py``, files starting
with ``_``, and files meant for another task (``harness.engine.submission.discover``). Each one runs
through :func:`harness.engine.runner.run_submission` in its own worker process; a broken submission
never stops the others. Its row is stored as 'incomplete' before it starts and filled in when it
ends, so an interrupted run leaves 'incomplete' rows, never half-written ones.

The secret of a ranked run is taken once, here, and handed to every submission's run.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import harness
from harness.engine.diagnosis import diagnose_result
from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.submission import discover, display_name, submission_info
from harness.errors import UsageError
from harness.results import ERROR, DeviceInfo, RunResult, SubmissionInfo
from harness.store.database import git_commit_of, now_iso, open_store


@dataclass
class FolderEntry:
    """One submission's run in a folder run."""
    path: Path
    name: str
    run_id: int
    result: RunResult
    elapsed_s: float
    internal_error: bool = False       # the harness itself failed on this submission (stored as 'error')


@dataclass
class FolderRun:
    task: str
    mode: str
    store_path: str
    entries: list[FolderEntry] = field(default_factory=list)
    skipped: list[Path] = field(default_factory=list)

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
    except Exception as exc:  # noqa: BLE001 - TaskSpecError or unknown name: a user error
        raise UsageError(f"cannot load task {task!r}: {exc}") from exc


def _internal_error(task_name: str, mode: str, info: SubmissionInfo, device: DeviceInfo, exc: BaseException,
                    started: str) -> RunResult:
    return RunResult(task=task_name, submission=info, mode=mode, device=device,
                     verdict=ERROR, message=f"harness internal error: {exc!r} (please report it)",
                     started_at=started, finished_at=now_iso(), complete=True)


def run_folder(folder, task, mode: str = "leaderboard", options=None, *, results_dir: str | None = None,
               secret_file: str | None = None, everything: bool = False,
               progress: Callable[[str], None] | None = None) -> FolderRun:
    """Runs and stores every submission in ``folder`` for ``task``. ``progress`` receives one line of
    text per event (for stderr). Raises UsageError for a bad request; never for a bad submission."""
    # the engine, imported late so that importing this module needs no torch
    from harness.engine.device import device_info, select_device
    from harness.engine.runner import run_submission
    from harness.engine.seeds import take_secret

    from harness.engine.preflight import check_store_writable
    say = progress or (lambda line: None)
    (options or RunOptions()).validate()
    check_store_writable(results_dir)
    task = load_task_or_usage_error(task)
    parsed_mode = Mode.parse(mode)
    files, skipped = discover(folder, (task.name, task.compat_dir.parent.name), everything=everything)
    for p in skipped:
        say(f"skipping {p.name}: its header or name says another task (use --all to run it)")
    if not files:
        raise UsageError(f"no submissions for task {task.name!r} in {folder} (looked for *.py; "
                         "files starting with '_' are skipped)")
    options = options or RunOptions()
    if parsed_mode.ranked and options.secret is None:
        secret, source = take_secret(secret_file)      # once, for every submission of the folder
        options = dataclasses.replace(options, secret=secret,
                                      extra_warnings=[*options.extra_warnings, f"secret seed: {source}"])
    device = device_info(select_device(options.device))   # recorded at begin, so a killed run keeps its device
    with open_store(results_dir) as st:
        report = FolderRun(task=task.name, mode=parsed_mode.value, store_path=str(st.path), skipped=skipped)
        say(f"run-all: {len(files)} submission(s) for {task.name}, mode {parsed_mode.value}, results in {st.path}")
        for i, path in enumerate(files, 1):
            info, name = submission_info(path), display_name(path)
            started = now_iso()
            run_id = st.begin_run(task.name, parsed_mode.value, info, display_name=name, device=device,
                                  harness_version=harness.__version__, git_commit=git_commit_of(path),
                                  started_at=started)
            say(f"[{i}/{len(files)}] {path.name} ...")
            t0 = time.monotonic()
            internal = False
            try:
                result = run_submission(info.path, task, parsed_mode.value,
                                        dataclasses.replace(options, extra_warnings=list(options.extra_warnings)))
            except UsageError:
                st.abandon_run(run_id)    # a bad request (e.g. unusable device): nothing ran
                say(f"[{i}/{len(files)}] {path.name}: not run")
                raise
            except Exception as exc:  # noqa: BLE001 - a harness bug on one submission must not stop the rest
                result = _internal_error(task.name, parsed_mode.value, info, device, exc, started)
                internal = True
            st.finish_run(run_id, result, display_name=name)
            entry = FolderEntry(path, name, run_id, result, time.monotonic() - t0, internal)
            report.entries.append(entry)
            say(f"[{i}/{len(files)}] {path.name}: {_summary(result)} [{entry.elapsed_s:.1f} s]")
            hint = diagnose_result(result, task.target_gpu)
            if hint:
                say(f"[{i}/{len(files)}] {path.name}: {hint}")
    return report


def _summary(result: RunResult) -> str:
    from harness.report.tables import us
    score = f" {us(result.score_us)} us" if result.score_us is not None else ""
    note = f" ({result.message.splitlines()[0][:100]})" if result.verdict != "pass" and result.message else ""
    return f"{result.verdict}{score}{note}"
