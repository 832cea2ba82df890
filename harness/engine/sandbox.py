"""Where the worker runs: the run's private folder, its environment, the user it runs as, and the
parent's own protection (undumpable). Whatever limits the worker's process gets goes through
:class:`Sandbox`'s :class:`WorkerConfig`; the worker applies them to itself (Landlock, a network
namespace, no capabilities: ``harness.worker.sandbox``) before torch or the submission is imported,
and :func:`report_warning` turns its report into the run's one warning when a part did not hold."""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import psutil
import torch

from harness.engine.compile_cache import CacheEntry, Toolchain, entry_for, harness_kernels_source
from harness.engine.privileges import first_blocking_folder, needed_paths
from harness.engine.stop_signals import held
from harness.results import DeviceInfo
from harness.worker.config import WorkerConfig
from harness.worker.sandbox import missing

NOBODY = 65534


def privilege_drop_possible() -> bool:
    """Root, and 'nobody' can reach Python, torch and the harness: the worker can run as 'nobody'."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    return first_blocking_folder(needed_paths()) is None


def make_undumpable() -> None:
    """Linux: the parent's /proc/<pid>/{mem,environ} and ptrace become root-only, so a worker of the
    same user cannot read the secret from the parent's memory."""
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def memory_limit_bytes(limit_gb: float | None) -> int:
    """Host memory the worker's tree may use: ``limit_gb``, default 75% of RAM."""
    return int((limit_gb or psutil.virtual_memory().total * 0.75 / 2**30) * 2**30)


class Sandbox:
    """The run's private folder (a copy of the submission, caches, temporary files, captured output) and
    the worker configuration that confines the worker to it. :meth:`remove` deletes the folder."""

    def __init__(
        self,
        submission: Path,
        task: Any,
        device: torch.device,
        l2_bytes: int | None,
        opt: Any,
        warnings: list[str],
        info: DeviceInfo | None = None,
    ):
        self.folder = ""
        try:
            with held():  # a Stopped raised once it exists lands in this try, which removes it
                self.folder = tempfile.mkdtemp(prefix=f"harness-run-{os.getpid()}-")  # pid: see executors/cleanup.py
            sub_copy = os.path.join(self.folder, "submission.py")
            shutil.copyfile(submission, sub_copy)
            compat = str(task.compat_dir)  # used in place: its modules find tasks/_compat_common beside it
            drop = self._will_drop(opt)
            self.cache = self._cache_entry(sub_copy, task, opt, info, drop)
            if self.cache is None and opt.triton_cache_dir:
                warnings.append(
                    f"--triton-cache-dir {opt.triton_cache_dir}: not used (no Landlock to keep one submission's "
                    "entry from another's, a folder every worker may read, or one the worker's user cannot "
                    "enter); this run compiles into its own folder"
                )
            harness_kernels = self._harness_kernels_entry(opt, info, drop) if self.cache is not None else None
            cached = [e.folder for e in (self.cache, harness_kernels) if e is not None]
            triton_cache = self.cache.triton if self.cache else os.path.join(self.folder, "triton-cache")
            extensions = self.cache.torch_extensions if self.cache else os.path.join(self.folder, "torch-extensions")
            uid = self._run_as(drop, [self.folder, *cached], warnings, root_asked=opt.drop_privileges is False)
            self.config = WorkerConfig(
                submission_path=sub_copy,
                compat_dir=compat,
                device=str(device),
                l2_bytes=l2_bytes,
                hide_bytes=task.original_clear_bytes,
                stdout_path=os.path.join(self.folder, "stdout.txt"),
                stderr_path=os.path.join(self.folder, "stderr.txt"),
                output_limit_bytes=opt.output_limit_mb << 20,
                run_as_uid=uid,
                run_as_gid=uid,
                env=self._environment(triton_cache, extensions, device.type == "cuda"),
                task_file=str(task.module.__file__),
                run_dir=self.folder,
                sandbox_readable=_task_dirs(task),
                sandbox_writable=cached,
                submission_name=str(submission),
                harness_kernels_dir=harness_kernels.triton if harness_kernels is not None else None,
            )
        except BaseException:  # an error, or a signal's exception (run-all's Stopped): no folder left behind
            self.remove()
            raise

    @staticmethod
    def _cache_entry(copy: str, task: Any, opt: Any, info: DeviceInfo | None, drop: bool) -> CacheEntry | None:
        """The submission's own compile-cache entry (harness.engine.compile_cache), or None: no info
        about the device, or no isolation possible here."""
        if info is None:
            return None
        with open(copy, "rb") as f:
            source = f.read()
        return entry_for(opt.triton_cache_dir, source, Toolchain.here(info, str(task.name)), for_nobody=drop)

    @staticmethod
    def _harness_kernels_entry(opt: Any, info: DeviceInfo | None, drop: bool) -> CacheEntry | None:
        """The entry of the harness's own kernels (harness.engine.compile_cache), beside the submissions'."""
        if info is None:
            return None
        chain = Toolchain.here(info, "")
        return entry_for(opt.triton_cache_dir, harness_kernels_source(), chain, for_nobody=drop)

    def _environment(self, triton_cache: str, extensions: str, gpu: bool) -> dict[str, str]:
        # Temporary files stay inside the run's own directory: writable after the drop to 'nobody'
        # (torch.compile's default cache is /tmp/torchinductor_<$USER>, the harness's user) and never
        # shared with another submission. Triton's cache and torch's extension builds live in the
        # submission's own compile-cache entry (reused by the next run of the same file).
        env = {
            "HOME": self.folder,
            "TMPDIR": self.folder,
            "TRITON_CACHE_DIR": triton_cache,
            "TORCH_EXTENSIONS_DIR": extensions,
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(self.folder, "inductor-cache"),
            "PYTHONDONTWRITEBYTECODE": "1",
            # Inductor's precompiled C++ header (over 64 MiB) ran into the output limit (RLIMIT_FSIZE):
            # every CPU-side Inductor kernel failed to build with "File size limit exceeded"
            "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0",
            # the torch profiler's Kineto logged 'USDT: profiler_start/stop' lines into the submission's
            # stderr on every profiled case; 6 is past its highest level (the user's own setting wins)
            "KINETO_LOG_LEVEL": os.environ.get("KINETO_LOG_LEVEL", "6"),
        }
        if not gpu:
            env["TRITON_INTERPRET"] = "1"  # Triton kernels run under Triton's interpreter on the CPU
        return env

    @staticmethod
    def _will_drop(opt: Any) -> bool:
        return bool(privilege_drop_possible() if opt.drop_privileges is None else opt.drop_privileges)

    @staticmethod
    def _run_as(drop: bool, folders: list[str], warnings: list[str], root_asked: bool) -> int | None:
        """The uid the worker runs as ('nobody', who then owns ``folders``), or None for our own."""
        if drop:
            for root, dirs, files in (entry for top in folders for entry in os.walk(top)):
                for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                    os.chown(name, NOBODY, NOBODY)
            return NOBODY
        if not root_asked and hasattr(os, "geteuid") and os.geteuid() == 0:
            from harness.engine.privileges import needed_paths, root_warning_once

            warnings += root_warning_once(needed_paths())
        return None

    def remove(self) -> None:
        if self.folder:
            with held():  # a Stopped in the middle would leave part of it behind
                shutil.rmtree(self.folder, ignore_errors=True)


def _task_dirs(task: Any) -> list[str]:
    """What the worker reads of the task: its task.py's folder and its compat modules."""
    return [str(Path(task.module.__file__).resolve().parent), str(Path(task.compat_dir).resolve())]


def report_warning(report: dict) -> str | None:
    """The run's warning when a part of the worker's sandbox did not hold (None: all held)."""
    lacking = missing(report)
    if not lacking:
        return None
    return "sandbox: the worker ran without " + "; ".join(lacking) + " (see SECURITY.md, 'The worker's sandbox')"
