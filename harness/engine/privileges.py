"""The running-as-root warning: said once per process, with advice that can be followed here."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

_said = False


def first_blocking_folder(paths: Iterable[str | os.PathLike[str]]) -> Path | None:
    """The first folder on the way to one of ``paths`` that other users cannot enter, or None."""
    for path in paths:
        p = Path(path).resolve()
        for d in reversed([p, *p.parents]):
            try:
                mode = d.stat().st_mode
            except OSError:
                return d
            if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                return d
    return None


def root_warning_once(needed_paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """[the warning] the first time in this process that a submission runs as root, else []."""
    global _said
    if _said:
        return []
    _said = True
    blocker = first_blocking_folder(needed_paths)
    where = f"'nobody' cannot enter {blocker}, which holds the Python environment or the checkout; " if blocker else ""
    return [
        f"the submission runs as root, the harness's own user, with its capabilities dropped and confined by "
        f"the worker's sandbox (SECURITY.md says what that holds and what it does not); {where}to run it as 'nobody' instead, run the harness as an ordinary user, or keep the "
        f"checkout and its venv in a folder every user can enter (e.g. /opt: python3 -m venv /opt/harness-venv)"
        + (f" or let others enter it (chmod o+x {blocker})" if blocker else "")
        + " (said once per process)"
    ]


def needed_paths() -> list[str]:
    import torch

    import harness

    return [
        sys.prefix,
        sys.base_prefix,
        os.path.dirname(os.__file__),
        os.path.dirname(torch.__file__),
        os.path.dirname(os.path.dirname(harness.__file__)),
    ]
