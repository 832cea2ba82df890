"""The harness as a library: what the CLI, ``scripts/ci_leaderboard.py`` and the benchmarks call.

- :func:`run_submission` runs one file on one task and returns its :class:`RunResult` (it never
  raises for a bad submission; a bad request raises :class:`UsageError`);
- :func:`run_folder` runs and stores every submission of a folder (``run-all``), taking the secret once;
- :func:`load_board` reads a task's leaderboard from the store, :func:`render_board` formats it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from harness.engine.folder import FolderEntry, FolderRun, run_folder
from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.errors import UsageError
from harness.report.board import load_board, render_board
from harness.results import RunResult
from tasks.registry import Task


def run_submission(
    path: str | os.PathLike[str],
    task: Task | str | os.PathLike[str],
    mode: Mode | str = Mode.TEST_BENCHMARK,
    options: RunOptions | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Runs ``path`` on ``task`` (a Task, a task name or a task.yml path) in ``mode``. The request is
    checked here, once, before torch is loaded (:func:`harness.engine.preflight.check_run_request`)."""
    from harness.engine.preflight import check_run_request

    request = check_run_request(path, task, mode, options)
    from harness.engine.runner import run_submission as _run  # loads torch: imported when called

    return _run(request.path, request.task, request.mode, request.options, progress)


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
