"""``run-all``: evaluate every submission in a folder and store each result.

Which files: every ``*.py`` directly in the folder, sorted, except ``__init__.py``, files starting
with ``_``, and files meant for another task. A file says which task it is for with a header line
``# task: mxfp4_mm`` or ``#!POPCORN leaderboard amd-mxfp4-mm``; without one, a file name containing a
task's keyword decides (``mxfp4`` or ``gluon`` -> mxfp4_mm, ``nvfp4`` -> nvfp4_gemm, generally the
first word of the task name); a file with no hint at all is run. ``--all`` runs every file regardless.
The name shown on the leaderboard comes from a ``# name: Fast Kernel`` (or ``#!POPCORN name ...``)
header line, else the file stem.

Each submission runs through ``harness.runner.run_submission`` (its own worker process); a broken
submission never stops the others. Its row is stored as 'incomplete' before it starts and filled in
when it ends, so an interrupted run-all leaves 'incomplete' rows, never half-written ones.
"""
from __future__ import annotations

import sys
import time

from harness.commands.leaderboard import add_results_dir_argument, us
from harness.errors import EXIT_INTERNAL, EXIT_OK, UsageError
from harness.results import ERROR, DeviceInfo, RunResult, SubmissionInfo
from harness.store import git_commit_of, now_iso, open_store
from harness.submission import discover, display_name, submission_info

NAME = "run-all"
HELP = "evaluate every submission in a folder and store the results (exit 0 when all ran, whatever the verdicts)"
EXAMPLES = """  python -m harness run-all submissions/ --task mxfp4_mm
  python -m harness run-all submissions/ --task mxfp4_mm --mode test --results-dir /tmp/res
  python -m harness leaderboard --task mxfp4_mm        # then look at the ranking

Exit status: 0 when every submission was run and stored, whatever their verdicts (those are in the
store: see 'leaderboard' and 'history'); 2 for a usage error; 70 when the harness itself failed on
a submission (that run is stored with verdict 'error' and the rest still run)."""

MODES = ("leaderboard", "test", "benchmark", "test+benchmark")


def add_arguments(parser) -> None:
    parser.add_argument("folder", metavar="DIR", help="folder holding the submissions (*.py)")
    parser.add_argument("--task", required=True, help="task name or path to a task.yml")
    parser.add_argument("--mode", choices=MODES, default="leaderboard", help="what to run (default: leaderboard)")
    parser.add_argument("--device", default=None, help="auto (default), cpu, or cuda[:N]")
    parser.add_argument("--max-repeats", type=int, help="most samples per benchmark case (default 100 GPU, 10 CPU)")
    parser.add_argument("--max-time", type=float, metavar="S", help="measured seconds per case before stopping")
    parser.add_argument("--timeout-scale", type=float, default=1.0, help="multiply the task's timeouts by this")
    parser.add_argument("--all", action="store_true", help="also run files whose header or name says another task")
    add_results_dir_argument(parser)


# --- the command -------------------------------------------------------------------------------

def _load_task(task: str):
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


def run(args) -> int:
    # the engine, imported late so that the store commands work without torch
    from harness.device import device_info, select_device
    from harness.runner import RunOptions, run_submission

    task = _load_task(args.task)
    files, skipped = discover(args.folder, (task.name, task.compat_dir.parent.name), everything=args.all)
    for p in skipped:
        print(f"skipping {p.name}: its header or name says another task (use --all to run it)", file=sys.stderr)
    if not files:
        raise UsageError(f"no submissions for task {task.name!r} in {args.folder} (looked for *.py; "
                         "files starting with '_' are skipped)")
    import harness
    device = device_info(select_device(args.device))   # recorded at begin, so a killed run keeps its device
    status = EXIT_OK
    with open_store(args.results_dir) as st:
        print(f"run-all: {len(files)} submission(s) for {task.name}, mode {args.mode}, results in {st.path}",
              file=sys.stderr)
        for i, path in enumerate(files, 1):
            info, name = submission_info(path), display_name(path)
            started = now_iso()
            run_id = st.begin_run(task.name, args.mode, info, display_name=name, device=device,
                                  harness_version=harness.__version__, git_commit=git_commit_of(path),
                                  started_at=started)
            print(f"[{i}/{len(files)}] {path.name} ...", end="", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            options = RunOptions(device=args.device, max_repeats=args.max_repeats, max_time_s=args.max_time,
                                 timeout_scale=args.timeout_scale)
            try:
                result = run_submission(info.path, task, args.mode, options)
            except UsageError:
                st.abandon_run(run_id)    # a bad request (e.g. unusable device): nothing ran
                print(" not run", file=sys.stderr)
                raise
            except Exception as exc:  # noqa: BLE001 - a harness bug on one submission must not stop the rest
                result = _internal_error(task.name, args.mode, info, device, exc, started)
                status = EXIT_INTERNAL
            st.finish_run(run_id, result, display_name=name)
            score = f" {us(result.score_us)} us" if result.score_us is not None else ""
            note = f" ({result.message.splitlines()[0][:100]})" if result.verdict != "pass" and result.message else ""
            print(f" {result.verdict}{score}{note} [{time.monotonic() - t0:.1f} s]", file=sys.stderr)
    return status
