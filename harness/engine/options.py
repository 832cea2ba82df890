"""The knobs of one run (defaults in the comments); torch-free, so the CLI and the library build them
before the engine is loaded."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunOptions:
    device: str | None = None
    seed: int | None = None                 # replaces every case's public seed
    secret: str | None = None               # leaderboard: secret seed (see harness.engine.seeds)
    max_repeats: int | None = None          # per benchmark case; default 100 on a GPU, 10 on the CPU
    max_time_s: float | None = None         # measured time per case; default 10 s (leaderboard 30 s), CPU 2 s
    wall_cap_s: float | None = None         # wall time per case; default 120 s, CPU 30 s
    target_rel_err: float = 0.001           # stop when stderr / mean is below this (0.1%)
    min_runs: int = 3
    timeout_scale: float = 1.0              # multiplies the task's timeouts
    memory_limit_gb: float | None = None    # host memory of the worker tree; default 75% of RAM
    drop_privileges: bool | None = None     # run the worker as 'nobody' when root; None = when possible
    output_limit_mb: int = 64
    cpu_inputs_per_measurement: int = 2     # batched protocol on the CPU: fewer inputs than the task's 50
    kernel_only: bool = True                # GPU: kernel-only figure per passed benchmark case (CUDA graphs)
    verify_timing: bool = False             # also the profiler's kernel sum, and the deviation between the two
    triton_cache_dir: str | None = None     # share a Triton cache across runs (default: a fresh one per run)
    scan_policy: str = "warn"               # leaderboard: static scan (harness.engine.scan) warn | reject | off
    defenses: bool = True                   # False: MEASUREMENT ONLY (scripts/validation/defense_overhead.py), see SECURITY.md
    extra_warnings: list[str] = field(default_factory=list)
