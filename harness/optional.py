"""Optional dependencies: what each extra of ``pyproject.toml`` installs, and a clear usage error (exit 2)
naming the extra when a command needs one that is missing.

The core install (``pip install .``) runs and ranks submissions; a dependency that only one command
needs is an extra, loaded only when that command runs::

    require_extra("site")            # before importing harness.report.site
    kernelguard = import_optional("kernelguard", "scan")
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import ModuleType

from harness.errors import UsageError


@dataclass(frozen=True)
class Extra:
    """One optional-dependency group of ``pyproject.toml``: the modules it provides and what needs them."""

    name: str
    modules: tuple[str, ...]
    needed_for: str


# Keep in step with [project.optional-dependencies] in pyproject.toml (tests/unit/test_optional.py checks).
EXTRAS = {
    extra.name: extra
    for extra in (
        Extra("site", ("plotly", "jinja2"), "the leaderboard site (leaderboard --format html)"),
        Extra("scan", ("kernelguard",), "the static scan of a submission's source (--scan-policy)"),
        Extra("nvml", ("pynvml",), "GPU clock and driver readings through NVML"),
        Extra("postgres", ("psycopg",), "a postgresql:// results store"),
        Extra("cluster", ("ray", "psycopg"), "run-all on Ray with a PostgreSQL store"),
    )
}


def install_hint(extra: str) -> str:
    """The command that installs ``extra`` (from a checkout, and from the package index)."""
    return f"pip install -e '.[{extra}]' in a checkout (or pip install 'fp4-harness[{extra}]')"


def import_optional(module: str, extra: str) -> ModuleType:
    """Imports ``module`` of ``extra``; when it is missing, a :class:`UsageError` naming the extra."""
    spec = EXTRAS.get(extra)
    if spec is None or module not in spec.modules:
        raise ValueError(f"{module!r} is not a module of the extra {extra!r} (see harness.optional.EXTRAS)")
    try:
        __import__(module)  # the builtin hook (a test may replace it), then the module itself
        return sys.modules[module]
    except ImportError as exc:
        raise UsageError(
            f"{spec.needed_for} needs the '{extra}' extra, which is not installed (no module {module!r}): "
            f"{install_hint(extra)}"
        ) from exc


def require_extra(extra: str) -> None:
    """Imports every module of ``extra``, raising a :class:`UsageError` naming the extra if one is missing."""
    spec = EXTRAS.get(extra)
    if spec is None:
        raise ValueError(f"unknown extra {extra!r}; known: {', '.join(EXTRAS)}")
    for module in spec.modules:
        import_optional(module, extra)
