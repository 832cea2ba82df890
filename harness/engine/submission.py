"""A submission file's metadata: its display name, the task it declares, its content hash.

Header lines (first 40 lines): ``# name: Fast Kernel`` (or ``#!POPCORN name ...``) names it on the
leaderboard, else the file stem; ``# task: mxfp4_mm`` (or ``#!POPCORN leaderboard ...``) says which
task it is for, else a keyword in the file name (``mxfp4``/``gluon`` -> mxfp4_mm, ``nvfp4`` ->
nvfp4_gemm, generally the first word of the task name); a file with no hint applies to any task.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

from harness.errors import UsageError
from harness.results import SubmissionInfo

KEYWORDS = {"mxfp4_mm": ("mxfp4", "gluon"), "nvfp4_gemm": ("nvfp4",)}
_HEADER_LINES = 40
_NAME_RE = re.compile(r"^#\s*name\s*:\s*(.+?)\s*$|^#!POPCORN\s+name\s+(.+?)\s*$", re.I)
_TASK_RE = re.compile(r"^#\s*task\s*:\s*(\S+)|^#!POPCORN\s+leaderboard\s+(\S+)", re.I)


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


def applies_to(path: str | Path, task: str | Iterable[str]) -> bool:
    """Whether a submission file is meant for ``task``: a name, or several names of one task (e.g. a
    small-shape copy and the task it implements). See the module docstring for the rule."""
    names = {task} if isinstance(task, str) else set(task)
    declared = declared_task(path)
    if declared is not None:
        return any(declared == t or declared.endswith("_" + t) for t in names)
    stem = Path(path).stem.lower()
    hinted = {t for t in set(KEYWORDS) | names if any(k in stem for k in _keywords(t))}
    return not hinted or bool(names & hinted)


def check_submissions_folder(folder: str | Path) -> Path:
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder; pass the folder that holds the submissions")
    return folder


def discover(
    folder: str | Path, task: str | Iterable[str], *, everything: bool = False
) -> tuple[list[Path], list[Path]]:
    """(files to run, files skipped as meant for another task), both sorted."""
    folder = check_submissions_folder(folder)
    files = sorted(
        p for p in folder.glob("*.py") if p.is_file() and p.name != "__init__.py" and not p.name.startswith("_")
    )
    chosen = [p for p in files if everything or applies_to(p, task)]
    return chosen, [p for p in files if p not in chosen]


def recorded_path(path: Path) -> str:
    """The submission's path as results record it: relative to the working folder when the file lies below it,
    else as given; never resolved to an absolute path (a results file must not carry the machine's folders)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (OSError, ValueError):
        return str(path)


def submission_info(path: str | Path) -> SubmissionInfo:
    path = Path(path)
    return SubmissionInfo(
        path=recorded_path(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest(), name=display_name(path)
    )
