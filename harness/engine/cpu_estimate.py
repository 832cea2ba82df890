"""How long a run of a task's full shapes takes on the CPU, roughly, so that a user about to wait
minutes is told so (and shown the small copy) before the run starts.

The model: each case costs the task's input generation (done twice: in the harness and in the worker)
and calls as expensive as the task's reference (a plain-torch submission; Triton kernels under the
interpreter are slower still). The constants are fitted to the generator and reference timings of
both tasks on a 2-core x86 machine (torch 2.13 CPU); they are good to a factor of about two, which is
enough to tell seconds from minutes. Torch-free.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.engine.modes import Mode
from tasks.registry import Task

LONG_RUN_S = 60.0  # above this, say so before the run


@dataclass(frozen=True)
class CpuCost:
    gen_s_per_byte: float  # generate_input, per byte of the case's data (task.case_bytes)
    ref_s_per_byte: float  # the reference (and a torch submission's call), per byte ...
    ref_flops_per_s: float  # ... plus its matmul


# by the task that implements the spec (a small copy shares its task's costs)
COSTS = {
    "mxfp4_mm": CpuCost(0.45e-6, 0.10e-6, 5e9),  # B is quantized in bf16 element by element
    "nvfp4_gemm": CpuCost(0.015e-6, 0.04e-6, 30e9),
}
GENERIC = CpuCost(0.2e-6, 0.1e-6, 10e9)


def estimate_cpu_seconds(
    task: Task, mode: Mode | str, max_repeats: int | None = None, max_time_s: float | None = None
) -> float:
    """Rough wall seconds of ``mode`` on ``task``'s shapes on the CPU, for a plain-torch submission."""
    return sum(_phases(task, Mode.parse(mode), max_repeats, max_time_s))


def _phases(task: Task, mode: Mode, max_repeats: int | None, max_time_s: float | None) -> tuple[float, float]:
    """(tests, benchmarks): rough wall seconds of each phase on the CPU, for a plain-torch submission."""
    cost = COSTS.get(task.compat_dir.parent.name, GENERIC)
    samples_cap, time_cap = max_repeats or 10, max_time_s or 2.0  # the CPU defaults of the runner

    def gen(case: dict[str, Any]) -> float:
        return cost.gen_s_per_byte * task.case_bytes(case)

    def call(case: dict[str, Any]) -> float:
        return cost.ref_s_per_byte * task.case_bytes(case) + task.case_flops(case) / cost.ref_flops_per_s

    tests = bench = 0.0
    if mode.runs_tests:
        tests = sum(2 * gen(c) + 2 * call(c) for c in task.tests)
    if mode.runs_benchmarks or mode is Mode.PROFILE:  # profile: the benchmark shapes, under the profiler
        for c in task.benchmarks:
            timed = max(3 * call(c), min(samples_cap * call(c), time_cap))
            fresh = timed / max(call(c), 1e-9) if mode.ranked else 1  # ranked: new inputs per call
            bench += 2 * gen(c) * fresh + 2 * call(c) + timed
    return tests, bench


# Triton kernels run under Triton's interpreter on the CPU: on mxfp4_mm's shapes (test+benchmark, one
# shared 2-core machine) triton_mxfp4.py timed out after 10.4 min, in its last benchmark, where the
# plain-torch example took 1.0 min.
TRITON_FACTOR = 10.0
_TRITON = re.compile(r"^\s*(?:import triton|from triton\b)", re.M)


def uses_triton(path: str | os.PathLike[str]) -> bool:
    try:
        return bool(_TRITON.search(Path(path).read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return False


def long_cpu_run_note(
    task: Task,
    mode: Mode | str,
    max_repeats: int | None = None,
    max_time_s: float | None = None,
    files: Sequence[str | os.PathLike[str]] = (),
) -> str | None:
    """One line for stderr when running ``files`` (submission paths; none: one plain-torch file) on the
    CPU will take long, naming the small copy; else None."""
    from tasks.registry import small_copy_name

    mode = Mode.parse(mode)
    one = estimate_cpu_seconds(task, mode, max_repeats, max_time_s)
    triton = sum(uses_triton(f) for f in files)
    seconds = one * (max(len(files), 1) - triton + TRITON_FACTOR * triton)
    if seconds < LONG_RUN_S:
        return None
    small = small_copy_name(task.name)
    quick = f"; for a quick check use --task {small} (small shapes, seconds)" if small else ""
    how = (f"{len(files)} files" if len(files) > 1 else "this file") if files else "a plain-torch submission"
    factor = TRITON_FACTOR if triton else 1.0
    limit = _past_time_limit(task, mode, [factor * s for s in _phases(task, mode, max_repeats, max_time_s)])
    over = (
        f", past the task's {limit:g} s time limit (it would end TIMEOUT; --timeout-scale gives more)" if limit else ""
    )
    return (
        f"note: on the CPU the {task.name} shapes take roughly {max(seconds / 60, 1):.0f} min in mode {mode.value} "
        f"for {how}" + (" (Triton kernels run under the interpreter)" if triton else "") + over + quick
    )


def _past_time_limit(task: Task, mode: Mode, phases: list[float]) -> float | None:
    """The runner's deadline (unscaled) that the estimated phases pass, or None: a ranked run has one
    for everything, otherwise the tests and the benchmarks have one each."""
    tests, bench = phases
    if mode.ranked:
        return task.ranked_timeout if tests + bench > task.ranked_timeout else None
    if tests > task.test_timeout:
        return task.test_timeout
    return task.benchmark_timeout if bench > task.benchmark_timeout else None
