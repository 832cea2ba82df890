"""The engine's entry point: :func:`run_submission` runs a checked request (``harness.engine.run``).

The parts of a run, each in its own module of ``harness.engine``: ``sandbox`` (the run's folder and the
worker's confinement), ``session`` (the worker process), ``inputs`` (seeds and fingerprints), ``checks``
(outputs rebuilt and checked), ``benchmark`` with ``stop_rule`` (the timed loop), ``timing_checks``
(plausibility), ``kernel_only``, ``verdicts`` (planning, verdicts, score) and ``scan`` (static scan).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.run import Run
from harness.engine.sandbox import privilege_drop_possible as _privilege_drop_possible
from harness.results import RunResult
from tasks.registry import Task


def run_submission(
    path: Path,
    task: Task,
    mode: Mode | str,
    options: RunOptions,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Runs ``path`` on ``task`` in ``mode``; never raises for a bad submission. The request was checked
    where it entered (``harness.api.run_submission``, or ``run_folder`` for the jobs of run-all)."""
    mode = Mode.parse(mode)  # a no-op on a Mode; a job's stored mode (JobSpec.mode) is its string value
    if mode.ranked and options.secret is None:
        from harness.engine.seeds import give_secret

        give_secret(options)
    return Run(Path(path), task, mode, options, progress).execute()


__all__ = ["_privilege_drop_possible", "run_submission"]
