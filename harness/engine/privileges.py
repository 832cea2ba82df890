"""The running-as-root warning: said once per process (or run of a verdict server), with advice that can be
followed here."""

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
    """[one short line] the first time in this process that a submission runs as root although the harness
    could run it as 'nobody' once the user changes something, else []. Details: docs/security.md."""
    global _said
    if _said:
        return []
    _said = True
    blocker = first_blocking_folder(needed_paths)
    fix = f"'nobody' cannot enter {blocker}: chmod o+x {blocker}, or" if blocker else "to drop root,"
    return [f"the submission runs as root; {fix} run as an ordinary user (docs/security.md)"]


def forget_said() -> None:
    """A verdict server's next run counts as a process of its own: the warning is said again."""
    global _said
    _said = False


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
