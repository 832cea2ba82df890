"""Compiled code reused, safely: each submission's own Triton cache and torch inline-extension builds,
kept between runs in a folder named by the submission's content and the toolchain.

The folder (``<root>/<key>``) is the only part of the cache a worker may reach: the sandbox grants it
read and write access to that folder and nothing else under the root (Landlock), so a submission can
neither read another's compiled kernels nor plant its own in another's entry. The key hashes the
submission's bytes with everything a compiled artifact depends on (Python, torch, its CUDA or HIP,
triton, the device and its capability, the task): a changed file, or a new toolchain, is a new entry.

The harness's own kernels (the launch gate, the device clock's stamps) get an entry of their own, keyed by
their source and the toolchain: a worker compiles them there while it starts, before the submission is
imported, and then seals that entry read-only (``harness.worker.sandbox.seal``). Were they compiled into
the submission's entry, a submission could replace their binaries there, and the next worker (its next
block, its next run) would time with a gate or a clock the submission wrote.

Where the isolation cannot hold (no Landlock on this kernel), a per-run folder replaces the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import platformdirs

from harness.engine.privileges import first_blocking_folder
from harness.results import DeviceInfo
from harness.worker import landlock
from harness.worker.sandbox import worker_paths

APP = "fp4-harness"
SHARED_ROOT_FOR_NOBODY = "/var/tmp/fp4-harness-compiled"  # when 'nobody' cannot enter the user's cache dir


@dataclass(frozen=True)
class Toolchain:
    """What a compiled artifact depends on besides the submission's source."""

    python: str
    torch: str
    accelerator: str  # torch's CUDA or HIP version, or "cpu"
    triton: str
    device: str
    capability: str
    task: str

    @classmethod
    def here(cls, info: DeviceInfo, task_name: str) -> Toolchain:
        import torch

        accel = torch.version.cuda or getattr(torch.version, "hip", None) or "cpu"
        return cls(
            python=f"{platform.python_implementation()} {sys.version.split()[0]}",
            torch=str(torch.__version__),
            accelerator=str(accel),
            triton=str(info.triton or _triton_version()),
            device=info.name,
            capability=str(info.capability or info.kind),
            task=task_name,
        )


def _triton_version() -> str:
    try:
        import triton

        return str(triton.__version__)
    except ImportError:
        return "none"


def cache_key(source: bytes, toolchain: Toolchain) -> str:
    """The entry's name: a hash of the submission's bytes and the toolchain."""
    h = hashlib.sha256()
    h.update(hashlib.sha256(source).digest())
    h.update(json.dumps(asdict(toolchain), sort_keys=True).encode())
    return h.hexdigest()[:40]


def default_root() -> str:
    """The user's cache folder (platformdirs), e.g. ~/.cache/fp4-harness/compiled."""
    return os.path.join(platformdirs.user_cache_dir(APP), "compiled")


def isolation_possible() -> bool:
    """Landlock is what keeps one entry from another: without it, no shared cache."""
    return landlock.abi_version() >= 1


def readable_by_every_worker(folder: str) -> bool:
    """True when ``folder`` lies beneath what every worker may read (the Python install, the system's
    folders, the path): a cache root there would show every entry to every submission."""
    real = os.path.realpath(folder)
    readable = worker_paths("/nonexistent-harness-run-folder").readable  # a run folder is never readable
    return any(real == r or real.startswith(r.rstrip("/") + "/") for r in map(os.path.realpath, readable))


@dataclass
class CacheEntry:
    """One submission's folder: ``triton`` and ``torch_extensions`` beneath it."""

    folder: str
    key: str

    @property
    def triton(self) -> str:
        return os.path.join(self.folder, "triton")

    @property
    def torch_extensions(self) -> str:
        return os.path.join(self.folder, "torch_extensions")


def harness_kernels_source() -> bytes:
    """What the harness's own kernels are compiled from (their entry's key): the launch gate's and the
    device clock's, in ``harness.worker.gate_kernel``."""
    return (Path(__file__).resolve().parent.parent / "worker" / "gate_kernel.py").read_bytes()


def entry_for(root: str | None, source: bytes, toolchain: Toolchain, for_nobody: bool) -> CacheEntry | None:
    """The submission's entry (created), or None when no isolated cache is possible here (the caller
    then keeps the caches in the run's folder). ``for_nobody``: the worker runs as 'nobody', who must
    be able to enter the root (else the shared root under /var/tmp is used)."""
    if not isolation_possible() or readable_by_every_worker(root or default_root()):
        return None
    top = root or default_root()
    if for_nobody and first_blocking_folder([top]) is not None and root is None:
        top = SHARED_ROOT_FOR_NOBODY
    key = cache_key(source, toolchain)
    folder = os.path.join(top, key)
    try:
        os.makedirs(top, mode=0o711, exist_ok=True)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        for sub in ("triton", "torch_extensions"):
            os.makedirs(os.path.join(folder, sub), mode=0o700, exist_ok=True)
    except OSError:
        return None
    if for_nobody and first_blocking_folder([str(Path(top))]) is not None:
        return None
    return CacheEntry(folder, key)
