"""The knobs of one run (defaults in the comments); torch-free, so the CLI and the library build them
before the engine is loaded."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.errors import UsageError

SCAN_POLICIES = ("warn", "reject", "off")
COMPILE_AHEAD = ("auto", "on", "off")  # harness.engine.compile_ahead
START_AHEAD = ("auto", "on", "off")  # harness.engine.session.WorkerSession.starts_ahead
LEAD_INS = ("chunk", "short", "case", "block")  # harness.engine.benchmark.lead_in_due, lead_in_ms below
CHUNK_WARMUP_MS = 20  # GPU, the "chunk", "case" and "block" lead-ins: this long of each half
SHORT_LEAD_IN_MS = 5  # the same under the "short" setting, the default


def lead_in_ms(policy: str) -> int:
    """How long each half of a lead-in lasts under ``policy``."""
    return SHORT_LEAD_IN_MS if policy == "short" else CHUNK_WARMUP_MS


MAX_WARMUP_CHUNKS = 10


@dataclass
class RunOptions:
    device: str | None = None
    seed: int | None = None  # replaces every case's public seed
    secret: str | None = None  # leaderboard: secret seed (see harness.engine.seeds)
    max_repeats: int | None = None  # per benchmark case; default 100 on a GPU, 10 on the CPU
    blocks: int | None = None  # timed blocks (fresh worker and inputs each); default: harness.engine.blocks
    same_worker: bool = False  # the blocks share one worker: fresh inputs and shape order, not a fresh process
    start_ahead: str = "auto"  # auto (on a GPU) | on | off: each block's worker starts while the last one works
    warmup_chunks: int = 0  # ranked: untimed chunks of fresh inputs before each case's timed chunks, every block
    # GPU: the lead-in (warm-up calls, heat) before every chunk, 5 ms of each (short) or 20 ms (chunk), each
    # case's first, or each block's first (harness.engine.benchmark.lead_in_due); measured by bench/lead_in.py
    lead_in: str = "short"
    # blocks measured again after the escaped-work check alone rejected them; default half of the
    # blocks, at least 1 (harness.engine.blocks.max_remeasured); a final gives what its entry has left
    remeasure_limit: int | None = None
    max_time_s: float | None = None  # measured time per case; default 10 s (leaderboard 30 s), CPU 2 s
    wall_cap_s: float | None = None  # wall time per case; default 120 s, CPU 30 s
    target_rel_err: float = 0.001  # stop when stderr / mean is below this (0.1%)
    min_runs: int = 3
    timeout_scale: float = 1.0  # multiplies the task's timeouts
    memory_limit_gb: float | None = None  # host memory of the worker tree; default 75% of RAM
    drop_privileges: bool | None = None  # run the worker as 'nobody' when root; None = when possible
    output_limit_mb: int = 64
    cpu_inputs_per_measurement: int = 2  # batched protocol on the CPU: fewer inputs than the task's 50
    kernel_only: bool = True  # GPU: kernel-only figure per passed benchmark case (CUDA graphs)
    verify_timing: bool = False  # also the profiler's kernel sum, and the deviation between the two
    triton_cache_dir: str | None = None  # the compile cache's root (harness.engine.compile_cache; default: user cache)
    scan_policy: str = "warn"  # leaderboard: static scan (harness.engine.scan) warn | reject | off
    compile_ahead: str = "auto"  # auto | on | off: first calls in parallel workers (harness.engine.compile_ahead)
    defenses: bool = True  # False: MEASUREMENT ONLY (bench/defense_overhead.py), see SECURITY.md
    extra_warnings: list[str] = field(default_factory=list)

    def validate(self) -> RunOptions:
        """Raises UsageError naming the option, its allowed range and the value given; returns self.
        Called where a request enters (``harness.engine.preflight.check_run_request`` for one run,
        ``run_folder`` for run-all) before anything runs: a bad value must never reach the worker,
        where e.g. --max-repeats 1 once looked like a forged timing reply."""
        from harness.errors import UsageError

        _positive("min_runs", None, self.min_runs, integer=True, minimum=1)
        repeats = self.max_repeats
        if isinstance(repeats, int) and not isinstance(repeats, bool) and repeats < self.min_runs:
            raise UsageError(
                f"--max-repeats must be at least {self.min_runs} (the stopping rule takes at least "
                f"min_runs={self.min_runs} samples per case); got {self.max_repeats}"
            )
        _positive("max_repeats", "--max-repeats", self.max_repeats, integer=True, minimum=self.min_runs)
        _positive("blocks", "--blocks", self.blocks, integer=True, minimum=1)
        _positive("remeasure_limit", None, self.remeasure_limit, integer=True, minimum=0)
        _positive("warmup_chunks", "--warmup-chunks", self.warmup_chunks, integer=True, minimum=0)
        if self.warmup_chunks > MAX_WARMUP_CHUNKS:
            raise _bad("warmup_chunks", "--warmup-chunks", f"at most {MAX_WARMUP_CHUNKS}", self.warmup_chunks)
        _positive("max_time_s", "--max-time", self.max_time_s)
        _positive("wall_cap_s", None, self.wall_cap_s)
        _positive("target_rel_err", None, self.target_rel_err)
        _positive("timeout_scale", "--timeout-scale", self.timeout_scale)
        _positive("memory_limit_gb", "--memory-limit-gb", self.memory_limit_gb)
        _positive("output_limit_mb", None, self.output_limit_mb, integer=True, minimum=1)
        _positive("cpu_inputs_per_measurement", None, self.cpu_inputs_per_measurement, integer=True, minimum=1)
        if self.lead_in not in LEAD_INS:
            raise _bad("lead_in", None, f"one of {', '.join(LEAD_INS)}", self.lead_in)
        if self.scan_policy not in SCAN_POLICIES:
            raise _bad("scan_policy", "--scan-policy", f"one of {', '.join(SCAN_POLICIES)}", self.scan_policy)
        if self.compile_ahead not in COMPILE_AHEAD:
            raise _bad("compile_ahead", "--compile-ahead", f"one of {', '.join(COMPILE_AHEAD)}", self.compile_ahead)
        if self.start_ahead not in START_AHEAD:
            raise _bad("start_ahead", "--start-ahead", f"one of {', '.join(START_AHEAD)}", self.start_ahead)
        if self.scan_policy == "reject":
            from harness.engine.scan import require_scanner

            require_scanner()  # the 'scan' extra: rejecting needs a scanner that ran
        return self


def _bad(name: str, flag: str | None, allowed: str, value: object) -> UsageError:
    from harness.errors import UsageError

    return UsageError(f"{flag or name} must be {allowed}; got {value!r}")


def _positive(
    name: str, flag: str | None, value: object, *, integer: bool = False, minimum: float | None = None
) -> None:
    """``value`` (None: not set) is a finite number (an integer when ``integer``), at least ``minimum``
    or, without one, greater than 0."""
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (integer and not isinstance(value, int))
        or not math.isfinite(value)
    ):
        raise _bad(name, flag, f"a finite {'integer' if integer else 'number'}", value)
    if minimum is not None and value < minimum:
        raise _bad(name, flag, f"at least {minimum}", value)
    if minimum is None and value <= 0:
        raise _bad(name, flag, "greater than 0", value)
