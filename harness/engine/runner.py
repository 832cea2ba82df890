"""The engine's entry point: :func:`run_submission` checks the request and runs it (``harness.engine.run``).

The parts of a run, each in its own module of ``harness.engine``: ``sandbox`` (the run's folder and the
worker's confinement), ``session`` (the worker process), ``inputs`` (seeds and fingerprints), ``checks``
(outputs rebuilt and checked), ``benchmark`` with ``stop_rule`` (the timed loop), ``timing_checks``
(plausibility), ``kernel_only``, ``verdicts`` (planning, verdicts, score) and ``scan`` (static scan).
"""

from __future__ import annotations

from pathlib import Path

from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.run import Run
from harness.engine.sandbox import privilege_drop_possible as _privilege_drop_possible
from harness.errors import UsageError
from harness.results import RunResult


def run_submission(
    path, task, mode: str = "test+benchmark", options: RunOptions | None = None, progress=None
) -> RunResult:
    """Runs ``path`` on ``task`` (a Task or a task name) in ``mode``; never raises for a bad submission.
    Raises UsageError for a bad request (missing file, unknown mode, unusable device)."""
    from tasks import TaskSpecError, load_task

    path = Path(path)
    mode = Mode.parse(mode)
    if not path.is_file():
        raise UsageError(
            f"submission file {str(path)!r} does not exist; give the path to a .py file "
            "that defines custom_kernel(data)"
        )
    if path.suffix != ".py":
        raise UsageError(f"submission {str(path)!r} is not a .py file; submissions are single Python files")
    if isinstance(task, str):
        try:
            task = load_task(task)
        except TaskSpecError as exc:
            raise UsageError(str(exc)) from exc
    options = options or RunOptions()
    if mode.ranked and options.secret is None:
        from harness.engine.seeds import take_secret

        options.secret, source = take_secret()
        options.extra_warnings.append(f"secret seed: {source}")
    return Run(path, task, mode, options, progress).execute()


__all__ = ["_privilege_drop_possible", "run_submission"]
