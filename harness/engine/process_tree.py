"""A process's children and descendants, read from ``/proc/<pid>/task/<tid>/children``: the cost grows
with the tree, not with the machine. psutil's ``children()`` reads the stat file of every process on the
machine; the supervisor looks for the submission's strays after every reply of a ranked run (about 240 a
verdict), and on the CPU that scan was most of a verdict's time outside its phases
(``bench/stray_scan.py`` measures both ways).

Where the kernel has no children files (not Linux, or built without CONFIG_PROC_CHILDREN) every function
falls back to psutil. A children file is one read of a short list; a child that exits during the read can
hide a later sibling from that one read (proc(5)), and the next reply's check reads again.
"""

from __future__ import annotations

import os
import threading

import psutil

# The harness's own helper processes (the static scan's children, harness.engine.scan), named under the
# lock before any supervisor lists its strays under it: none of them is a submission's stray.
HELPERS_LOCK = threading.Lock()
HELPER_PIDS: set[int] = set()


def child_pids(pid: int) -> list[int] | None:
    """The pids of ``pid``'s children ([] when it has ended), or None where the kernel has no children
    files."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return [] if os.path.isdir("/proc/self/task") else None
    except OSError:
        return None
    pids: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                pids += [int(x) for x in f.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended
            return None  # the thread is there, its children file is not: no CONFIG_PROC_CHILDREN
        except (OSError, ValueError):
            return None
    return pids


def children(pid: int) -> list[psutil.Process]:
    """``pid``'s children."""
    pids = child_pids(pid)
    if pids is None:
        try:
            return psutil.Process(pid).children()
        except psutil.Error:
            return []
    return _processes(pids)


def descendants(pid: int) -> list[psutil.Process]:
    """``pid``'s descendants, parents before their children."""
    todo = child_pids(pid)
    if todo is None:
        try:
            return psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            return []
    out: list[int] = []
    while todo:
        child = todo.pop()
        out.append(child)
        todo += child_pids(child) or []
    return _processes(list(dict.fromkeys(out)))


def _processes(pids: list[int]) -> list[psutil.Process]:
    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid))
        except psutil.Error:
            pass  # ended since
    return out
