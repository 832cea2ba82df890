"""Checks made before anything runs, so that a user's mistake costs seconds, not a whole benchmark:
a run's request (:func:`check_run_request`: the submission file, the task, the mode, the options), an
output path, the results store's folder. Each raises UsageError naming the problem and the fix.
Torch-free; the store module is not touched (its location rule is read from it).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.submission import applies_to
from harness.errors import UsageError
from tasks.registry import Task, TaskSpecError, load_task

_STORE_SUFFIXES = (".sqlite", ".db")


@dataclass(frozen=True)
class RunRequest:
    """One run's request, checked: what the engine's :func:`harness.engine.runner.run_submission` takes."""

    path: Path
    task: Task
    mode: Mode
    options: RunOptions


def check_run_request(
    path: str | os.PathLike[str],
    task: Task | str | os.PathLike[str],
    mode: Mode | str = Mode.TEST_BENCHMARK,
    options: RunOptions | None = None,
) -> RunRequest:
    """The one check of a run's request, where it enters (``harness.api.run_submission``, which the CLI
    calls): the submission file, the mode, the options' values, then the task (a Task, a task name or a
    task.yml path). Raises UsageError naming the problem and the fix."""
    checked_path = check_submission_file(path)
    checked_mode = Mode.parse(mode)
    checked_options = (options or RunOptions()).validate()
    if not isinstance(task, Task):
        try:
            task = load_task(task)
        except TaskSpecError as exc:
            raise UsageError(str(exc)) from exc
    if not applies_to(checked_path, (task.name, task.compat_dir.parent.name)):
        note = f"{checked_path.name}: its header or name says another task than {task.compat_dir.parent.name}; is --task the one it was written for?"
        checked_options = dataclasses.replace(checked_options, extra_warnings=[*checked_options.extra_warnings, note])
    return RunRequest(checked_path, task, checked_mode, checked_options)


def check_submission_file(path: str | os.PathLike[str]) -> Path:
    """The submission must be an existing, readable .py file (a folder is a common first mistake)."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(
            f"{str(path)!r} is a folder, not a submission file; give one .py file that defines "
            f"custom_kernel(data) (to run every file of a folder use 'python -m harness run-all "
            f"{path} --task TASK')"
        )
    if not path.exists():
        raise UsageError(
            f"submission file {str(path)!r} does not exist; give the path to a .py file "
            "that defines custom_kernel(data)"
        )
    if path.suffix != ".py":
        raise UsageError(f"submission {str(path)!r} is not a .py file; submissions are single Python files")
    if not os.access(path, os.R_OK):
        raise UsageError(f"submission file {str(path)!r} is not readable; fix its permissions (chmod a+r)")
    return path


def _can_create_in(folder: Path) -> bool:
    """Whether this process can create entries in ``folder``: tried, not guessed from the mode bits
    (root passes every os.access check, yet cannot write /proc or a read-only mount). Leaves nothing."""
    try:
        probe = tempfile.mkdtemp(prefix=".harness-write-check-", dir=folder)
    except OSError:
        return False
    os.rmdir(probe)
    return True


def _nearest_existing(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def check_output_file(path: str | os.PathLike[str] | None, flag: str = "--json") -> None:
    """``path`` can be written now (its folder exists and is writable; the file, if there, is a writable
    file). Writes nothing."""
    if path in (None, "-"):
        return
    p = Path(path)
    if p.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; give a file name such as {p / 'result.json'}")
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(
            f"{flag} {path}: the folder {folder} does not exist; create it (mkdir -p {folder}) or choose another path"
        )
    if (p.exists() and not os.access(p, os.W_OK)) or (not p.exists() and not _can_create_in(folder)):
        raise UsageError(f"{flag} {path}: not writable by this user; choose another path")


def store_location(results_dir: str | None) -> str:
    from harness.store.database import resolve_location

    return resolve_location(results_dir)


def _is_url(location: str) -> bool:
    return "://" in location


def _store_folder(location: str) -> Path:
    p = Path(location)
    return p.parent if p.suffix in _STORE_SUFFIXES else p


def _store_file(location: str) -> Path:
    from harness.store.database import DB_FILENAME

    return Path(location) if Path(location).suffix in _STORE_SUFFIXES else Path(location) / DB_FILENAME


def check_store_writable(results_dir: str | None) -> None:
    """Before a run whose result will be stored: the results folder exists and is writable, or can be
    created (its nearest existing parent is a writable folder). Creates nothing."""
    location = store_location(results_dir)
    if _is_url(location):
        return  # the store module says what it makes of a URL
    folder = _store_folder(location)
    existing = _nearest_existing(folder.absolute())
    if not existing.is_dir():
        raise UsageError(
            f"--results-dir {location}: {existing} is a file, not a folder; choose another "
            f"--results-dir (or set HARNESS_RESULTS_DIR)"
        )
    if not _can_create_in(existing):
        what = "the results folder" if existing == folder.absolute() else f"cannot create {folder}: {existing}"
        raise UsageError(
            f"--results-dir {location}: {what} is not writable by this user; choose another "
            f"--results-dir (or set HARNESS_RESULTS_DIR)"
        )
    db = _store_file(location)
    if db.exists() and not os.access(db, os.W_OK):
        raise UsageError(
            f"--results-dir {location}: the store {db} is read-only for this user; choose another --results-dir"
        )


def check_store_exists(results_dir: str | None) -> None:
    """For commands that only read the store: it must be there already (opening it would create it)."""
    location = store_location(results_dir)
    if _is_url(location):
        return
    if Path(location).is_file() and Path(location).suffix not in _STORE_SUFFIXES:
        raise UsageError(
            f"the results store {location} is a file, not a folder; name an SQLite file with a "
            f".sqlite or .db suffix, or a folder (--results-dir / --store)"
        )
    db = _store_file(location)
    if not db.is_file():
        raise UsageError(
            f"no results store at {location} (no {db}); store runs first with 'python -m harness "
            f"run FILE --task TASK --save' or 'run-all', or point --results-dir (or "
            f"HARNESS_RESULTS_DIR) at an existing one"
        )
