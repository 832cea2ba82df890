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

import hashlib
import re
import sys
import time
from pathlib import Path

from harness.commands.leaderboard import add_results_dir_argument, us
from harness.errors import EXIT_INTERNAL, EXIT_OK, UsageError
from harness.results import ERROR, DeviceInfo, RunResult, SubmissionInfo
from harness.store import git_commit_of, now_iso, open_store

NAME = "run-all"
HELP = "evaluate every submission in a folder and store the results (exit 0 when all ran, whatever the verdicts)"
EXAMPLES = """  python -m harness run-all submissions/ --task mxfp4_mm
  python -m harness run-all submissions/ --task mxfp4_mm --mode test --results-dir /tmp/res
  python -m harness leaderboard --task mxfp4_mm        # then look at the ranking

Exit status: 0 when every submission was run and stored, whatever their verdicts (those are in the
store: see 'leaderboard' and 'history'); 2 for a usage error; 70 when the harness itself failed on
a submission (that run is stored with verdict 'error' and the rest still run)."""

MODES = ("leaderboard", "test", "benchmark", "test+benchmark")
KEYWORDS = {"mxfp4_mm": ("mxfp4", "gluon"), "nvfp4_gemm": ("nvfp4",)}
_HEADER_LINES = 40
_NAME_RE = re.compile(r"^#\s*name\s*:\s*(.+?)\s*$|^#!POPCORN\s+name\s+(.+?)\s*$", re.I)
_TASK_RE = re.compile(r"^#\s*task\s*:\s*(\S+)|^#!POPCORN\s+leaderboard\s+(\S+)", re.I)


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


# --- submission files --------------------------------------------------------------------------

def _header(path: Path) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [line.rstrip("\n") for _, line in zip(range(_HEADER_LINES), f)]
    except OSError:
        return []


def display_name(path: str | Path) -> str:
    """The name a submission shows on the leaderboard: its '# name:' header, else its file stem."""
    for line in _header(Path(path)):
        m = _NAME_RE.match(line)
        if m:
            return (m.group(1) or m.group(2)).strip()
    return Path(path).stem


def declared_task(path: str | Path) -> str | None:
    """The task a file names in a '# task:' or '#!POPCORN leaderboard' header line, normalized."""
    for line in _header(Path(path)):
        m = _TASK_RE.match(line)
        if m:
            return (m.group(1) or m.group(2)).strip().lower().replace("-", "_")
    return None


def _keywords(task: str) -> tuple[str, ...]:
    return KEYWORDS.get(task, (task.split("_")[0].lower(),))


def applies_to(path: str | Path, task: str) -> bool:
    """Whether a submission file is meant for ``task`` (see the module docstring for the rule)."""
    declared = declared_task(path)
    if declared is not None:
        return declared == task or declared.endswith("_" + task)
    stem = Path(path).stem.lower()
    hinted = {t for t in set(KEYWORDS) | {task} if any(k in stem for k in _keywords(t))}
    return not hinted or task in hinted


def discover(folder: str | Path, task: str, *, everything: bool = False) -> tuple[list[Path], list[Path]]:
    """(files to run, files skipped as meant for another task), both sorted."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder; pass the folder that holds the submissions")
    files = sorted(p for p in folder.glob("*.py")
                   if p.is_file() and p.name != "__init__.py" and not p.name.startswith("_"))
    chosen = [p for p in files if everything or applies_to(p, task)]
    return chosen, [p for p in files if p not in chosen]


def submission_info(path: Path) -> SubmissionInfo:
    return SubmissionInfo(path=str(path.resolve()), sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
                          name=path.stem)


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
    files, skipped = discover(args.folder, task.name, everything=args.all)
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
