"""What a ranked submission can import: the competition's modules, not the harness's own packages.

The competitions' machines put ``task``, ``utils`` and ``reference`` beside a submission, over a Python
install (torch, triton, numpy, ...); nothing of this harness. In a ranked run the worker fences off its
own packages (``harness``, ``tasks``, ``fp4_reference``) before it imports the submission, so a file that
leans on them fails here, with a message naming what is available, rather than on the competition's
machine. The code of the harness's own tree (the worker, the compat modules ``task``/``utils``/
``reference``, the task's ``task.py``) imports as before.

Two parts: a meta-path finder (always on, once installed) refuses a first import of those packages'
modules from code outside the harness's tree; and, while the submission's module body runs, a guard on
``builtins.__import__`` refuses them too when they are already loaded (Python returns a loaded module
from ``sys.modules`` without asking any finder). The guard is lifted before the first call, so timed
calls pay nothing for it.

A fence against mistakes, not a wall: a submission can still reach a loaded module through
``sys.modules`` or ``gc``. What holds against a cheat is the parent's checking (SECURITY.md).
"""

from __future__ import annotations

import builtins
import contextlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from importlib.machinery import ModuleSpec
from types import FrameType, ModuleType
from typing import Any

from harness.worker.config import WorkerConfig

# the harness's own top-level packages: not on the competition's machines
HIDDEN = frozenset({"harness", "tasks", "fp4_reference"})
# module names the harness gives its own loaded files (a task's task.py, the compat types)
OWN_PREFIX = "_fp4_harness"
AVAILABLE = (
    "task, utils, reference (the competition's modules beside the submission) and the Python install's "
    "packages (torch, triton, numpy, ...)"
)
_IMPORTLIB_FILES = ("<frozen importlib", os.path.join("importlib", "__init__.py"))


class HiddenModuleError(ModuleNotFoundError):
    """A refused import; its text is the whole message (the worker reports it as it is)."""


def refusal(name: str) -> HiddenModuleError:
    """The error of a refused import of ``name``."""
    top = name.split(".")[0]
    return HiddenModuleError(
        f"the submission imports {name!r}, but {top!r} is the harness's own package, which ranked runs hide as "
        f"the competition's machines do not have it; a submission can import {AVAILABLE}",
        name=name,
    )


class Fence:
    """Says whether an import comes from the harness's tree; ``roots``: the folders whose files are ours."""

    def __init__(self, roots: Sequence[str]):
        self.roots = tuple(os.path.join(os.path.abspath(r), "") for r in roots if r)

    def own(self, module_name: object, file: object) -> bool:
        """True for code of the harness: a module of its packages, or a file under one of its roots."""
        name = module_name if isinstance(module_name, str) else ""
        if name.split(".")[0] in HIDDEN or name.startswith(OWN_PREFIX):
            return True
        return isinstance(file, str) and os.path.abspath(file).startswith(self.roots)

    def refuses(self, name: str, importer: Mapping[str, Any] | None) -> bool:
        """True when ``name`` is a hidden package's module and ``importer`` (module globals) is not ours."""
        if name.split(".")[0] not in HIDDEN:
            return False
        importer = importer or {}
        return not self.own(importer.get("__name__"), importer.get("__file__"))


class HiddenPackageFinder:
    """A meta-path finder that refuses a first import of a hidden package's module from outside the tree."""

    def __init__(self, fence: Fence):
        self.fence = fence

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname.split(".")[0] in HIDDEN and self.fence.refuses(fullname, _importer_globals()):
            raise refusal(fullname)
        return None  # not ours to decide: the next finder looks


def _importer_globals() -> Mapping[str, Any] | None:
    """The globals of the frame that asked for the import (the first one outside importlib and this file)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if (
            filename != __file__
            and not filename.startswith(_IMPORTLIB_FILES[0])
            and not filename.endswith(_IMPORTLIB_FILES[1])
        ):
            return frame.f_globals
        frame = frame.f_back
    return None


def install(roots: Sequence[str]) -> Fence:
    """Puts the finder first on ``sys.meta_path`` (once per process); the fence it uses."""
    for finder in sys.meta_path:
        if isinstance(finder, HiddenPackageFinder):
            return finder.fence
    fence = Fence(roots)
    sys.meta_path.insert(0, HiddenPackageFinder(fence))
    return fence


def own_roots(cfg: WorkerConfig, harness_root: str) -> list[str]:
    """The folders whose code is the harness's: its packages, the task's compat modules and its task.py."""
    roots = [os.path.join(harness_root, package) for package in sorted(HIDDEN)] + [cfg.compat_dir]
    return roots + ([os.path.dirname(cfg.task_file)] if cfg.task_file else [])


@contextlib.contextmanager
def fenced(cfg: WorkerConfig, harness_root: str) -> Iterator[None]:
    """While the submission's module body runs: the finder installed, and already loaded modules of the
    hidden packages refused to code outside the harness's tree. Nothing unless ``cfg.hide_harness`` (a
    ranked run)."""
    if not cfg.hide_harness:
        yield
        return
    fence = install(own_roots(cfg, harness_root))
    original = builtins.__import__

    def guarded_import(
        name: str,
        globals: Mapping[str, Any] | None = None,
        locals: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] = (),
        level: int = 0,
    ) -> ModuleType:
        if level == 0 and fence.refuses(name, globals):
            raise refusal(name)
        return original(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded_import  # type: ignore[assignment]  # the same call, its arguments typed
    try:
        yield
    finally:
        if builtins.__import__ is guarded_import:  # a submission that replaced it keeps its own
            builtins.__import__ = original
