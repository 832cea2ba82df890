"""Temporary folders a killed process left behind: ``harness-job-<pid>-*`` (a job's copy of the
submission) and ``harness-run-<pid>-*`` (a run's sandbox). Every path that ends normally, by an
exception or by SIGINT/SIGTERM removes its own; a SIGKILLed process cannot, so each run-all removes,
when it starts and when it ends, those on this machine whose maker no longer exists."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

_NAME = re.compile(r"^harness-(job|run)-(\d+)-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def sweep_temp_folders(folder: str | None = None) -> list[Path]:
    """Removes the harness's temporary folders in ``folder`` (default: the temp dir) whose making
    process is gone; returns the ones removed."""
    removed: list[Path] = []
    root = Path(folder or tempfile.gettempdir())
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is None or _alive(int(match.group(2))) or not entry.is_dir() or entry.is_symlink():
            continue
        shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            removed.append(entry)
    return removed
