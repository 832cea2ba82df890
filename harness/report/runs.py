"""Which stored runs belong to one submission (by file, content hash or name)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.engine.submission import display_name
from harness.errors import UsageError
from harness.store.database import RunRow, Store


def file_sha(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def find_runs(st: Store, task: str, ref: str) -> list[RunRow]:
    """Runs of ``task`` that belong to the submission ``ref`` (a file path or a name); oldest first. A
    file's are those of its content or its path (its earlier versions); only where there are none, those
    of its display name (a path recorded from another working folder), which other files may share."""
    runs = st.runs(task=task)
    path = Path(ref)
    if path.is_file():
        sha, resolved, name = file_sha(path), path.resolve(), display_name(path)
        own = [r for r in runs if r.submission_sha256 == sha or Path(r.submission_path).resolve() == resolved]
        return own or [r for r in runs if r.display_name == name]
    ref_l = ref.lower()
    is_hex = len(ref) >= 8 and all(c in "0123456789abcdef" for c in ref_l)
    return [
        r
        for r in runs
        if r.display_name == ref
        or Path(r.submission_path).stem == ref
        or (is_hex and r.submission_sha256.startswith(ref_l))
    ]


def no_runs_error(st: Store, task: str, ref: str) -> UsageError:
    names = sorted({r.display_name for r in st.runs(task=task)})
    known = ", ".join(repr(n) for n in names[:20]) or "none yet: run 'python -m harness run-all' first"
    return UsageError(f"no stored runs of {ref!r} for task {task!r}; submissions with runs: {known}")
