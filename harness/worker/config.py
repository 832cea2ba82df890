"""What the parent tells the worker process at start (torch-free: the worker confines itself before
torch is imported, see :mod:`harness.worker.entry`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WorkerConfig:
    submission_path: str
    compat_dir: str
    device: str
    l2_bytes: int | None
    hide_bytes: int  # the original's L2 clear, whose duration hides launch time
    stdout_path: str
    stderr_path: str
    output_limit_bytes: int = 64 << 20  # beyond this the worker is killed by SIGXFSZ: "flooded output"
    run_as_uid: int | None = None  # drop root privileges to this uid (e.g. nobody)
    run_as_gid: int | None = None
    env: dict = field(default_factory=dict)  # set before the submission is imported
    task_file: str | None = None  # the task's task.py, whose generate_input makes the inputs
    submission_name: str | None = None  # the user's file name, shown in tracebacks for the copy's path
    run_dir: str | None = None  # the run's own folder: the worker's cwd and its only writable place
    sandbox_readable: list = field(default_factory=list)  # besides the Python install, the system, the harness
    sandbox_writable: list = field(default_factory=list)  # besides the run folder (a shared Triton cache)
    # the harness's own kernels' Triton cache (the launch gate's, the device clock's): written only while the
    # worker starts, before the submission is imported, then sealed read-only (harness.worker.sandbox.seal)
    harness_kernels_dir: str | None = None
    hide_harness: bool = False  # ranked runs: the harness's own packages fenced off (harness.worker.imports)
    # held: it creates its CUDA context, then waits for the parent's Proceed (sent once the worker it replaces
    # is reaped) before anything that launches work on the GPU (its sampler, the calibration)
    hold: bool = False
    confine: bool = True  # False only in bench/sandbox_overhead.py (no CLI/option)
