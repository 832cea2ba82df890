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

import psutil
import torch

from harness.engine.privileges import first_blocking_folder, needed_paths
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

    def __init__(self, submission: Path, task, device: torch.device, l2_bytes: int | None, opt, warnings: list):
        self.folder = tempfile.mkdtemp(prefix=f"harness-run-{os.getpid()}-")  # pid: see executors/cleanup.py
        sub_copy = os.path.join(self.folder, "submission.py")
        shutil.copyfile(submission, sub_copy)
        compat = str(task.compat_dir)  # used in place: its modules find tasks/_compat_common beside it
        triton_cache = opt.triton_cache_dir or os.path.join(self.folder, "triton-cache")
        uid = self._run_as(opt, [self.folder] + ([triton_cache] if opt.triton_cache_dir else []), warnings)
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
            env=self._environment(triton_cache, device.type == "cuda"),
            task_file=str(task.module.__file__),
            run_dir=self.folder,
            sandbox_readable=_task_dirs(task),
            sandbox_writable=[triton_cache] if opt.triton_cache_dir else [],
            submission_name=str(submission),
        )

    def _environment(self, triton_cache: str, gpu: bool) -> dict:
        # Caches and temporary files stay inside the run's own directory: writable after the drop to
        # 'nobody' (torch.compile's default cache is /tmp/torchinductor_<$USER>, the harness's user) and
        # never shared with another submission.
        env = {
            "HOME": self.folder,
            "TMPDIR": self.folder,
            "TRITON_CACHE_DIR": triton_cache,
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(self.folder, "inductor-cache"),
            "PYTHONDONTWRITEBYTECODE": "1",
            # Inductor's precompiled C++ header (over 64 MiB) ran into the output limit (RLIMIT_FSIZE):
            # every CPU-side Inductor kernel failed to build with "File size limit exceeded"
            "TORCHINDUCTOR_CPP_CACHE_PRECOMPILE_HEADERS": "0",
        }
        if not gpu:
            env["TRITON_INTERPRET"] = "1"  # Triton kernels run under Triton's interpreter on the CPU
        return env

    @staticmethod
    def _run_as(opt, folders: list[str], warnings: list) -> int | None:
        """The uid the worker runs as ('nobody', who then owns ``folders``), or None for our own."""
        drop = opt.drop_privileges
        if drop is None:
            drop = privilege_drop_possible()
        if drop:
            for root, dirs, files in (entry for top in folders for entry in os.walk(top)):
                for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                    os.chown(name, NOBODY, NOBODY)
            return NOBODY
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            from harness.engine.privileges import needed_paths, root_warning_once

            warnings += root_warning_once(needed_paths())
        return None

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _task_dirs(task) -> list[str]:
    """What the worker reads of the task: its task.py's folder and its compat modules."""
    return [str(Path(task.module.__file__).resolve().parent), str(Path(task.compat_dir).resolve())]


def report_warning(report: dict) -> str | None:
    """The run's warning when a part of the worker's sandbox did not hold (None: all held)."""
    lacking = missing(report)
    if not lacking:
        return None
    return "sandbox: the worker ran without " + "; ".join(lacking) + " (see SECURITY.md, 'The worker's sandbox')"
