"""The harness as a library: what the CLI, ``scripts/ci_leaderboard.py`` and the benchmarks call.

- :func:`run_submission` runs one file on one task and returns its :class:`RunResult` (it never
  raises for a bad submission; a bad request raises :class:`UsageError`);
- :func:`run_folder` runs and stores every submission of a folder (``run-all``), taking the secret once;
- :func:`load_board` reads a task's leaderboard from the store, :func:`render_board` formats it.
"""

from __future__ import annotations

from harness.engine.folder import FolderEntry, FolderRun, run_folder
from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.errors import UsageError
from harness.report.board import load_board, render_board
from harness.results import RunResult


def run_submission(path, task, mode: str = "test+benchmark", options=None, progress=None) -> RunResult:
    """Runs ``path`` on ``task`` (a Task, a task name or a task.yml path) in ``mode``."""
    from harness.engine.preflight import check_submission_file

    check_submission_file(path)
    (options or RunOptions()).validate()
    from harness.engine.runner import run_submission as _run  # loads torch: imported when called

    return _run(path, task, mode, options, progress)


__all__ = [
    "FolderEntry",
    "FolderRun",
    "Mode",
    "RunOptions",
    "RunResult",
    "UsageError",
    "load_board",
    "render_board",
    "run_folder",
    "run_submission",
]
