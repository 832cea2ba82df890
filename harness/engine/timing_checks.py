"""What a benchmark case's samples say once timing is done: statistics, speed of light, and the
plausibility checks (too fast to be true, a tampered clock, noise), which reject in ranked runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.analysis import peaks, plausibility, sol
from harness.engine.context import RunContext
from harness.engine.session import WorkerSession
from harness.extras import DeviceClockCheck, TailCheck
from harness.results import PASS, REJECTED, CaseResult, Stats


class TimingJudge:
    def __init__(self, ctx: RunContext, session: WorkerSession):
        self.ctx, self.session = ctx, session
        # a case timed in blocks is judged for noise once, on all its samples (TimedBlocks), not per block
        self.noise_per_case = True
        self.measured_peaks = sol.load_measured()
        fallback = peaks.missing_measured_warning(ctx.info.kind, ctx.info.name, self.measured_peaks)
        if fallback:
            ctx.warnings.append(fallback)

    def finish(
        self, result: CaseResult, samples: Sequence[float], series: dict[str, list[Any]], batch: int
    ) -> CaseResult:
        """``samples``: per input; ``series``: the timing replies' lists (``protocol.TIMING_SERIES``),
        whose tails and windows the plausibility checks read; ``batch``: inputs per sample."""
        if not samples:
            return result
        ctx, task, info = self.ctx, self.ctx.task, self.ctx.info
        stats = result.stats = Stats.from_samples(samples)
        nbytes, flops = task.case_bytes(result.spec), task.case_flops(result.spec)
        result.sol = sol.speed_of_light(info.kind, info.name, nbytes, flops, stats.mean, self.measured_peaks)
        if result.verdict != PASS:
            return result
        window_gap_ns = self.session.window_gap_ns
        if ctx.gpu:
            result.record(
                DeviceClockCheck(
                    plausibility.device_clock_excess_ns(
                        stats, series["window_ns"], series["gate_held"], window_gap_ns, batch
                    )
                )
            )
            result.record(
                TailCheck(
                    plausibility.tail_excess_ns(series["tail_ns"], self.session.gap_ns, batch),
                    plausibility.median_measured(series["idle_sync_ns"]),
                    plausibility.median_measured(series["device_tail_ns"]),
                )
            )
        reason = plausibility.implausible(
            stats,
            series["tail_ns"],
            self.session.gap_ns,
            sol.physical_floor_ns(info.name, nbytes, flops),
            ctx.gpu,
            series["window_ns"],
            series["gate_held"],
            window_gap_ns,
            batch,
            series["idle_sync_ns"],
            series["device_tail_ns"],
        )
        if reason and ctx.ranked:
            result.verdict, result.message = REJECTED, reason
            return result
        if reason:
            result.warnings.append(reason)
        if self.noise_per_case:
            result.warnings += self.noise(stats)
        return result

    def noise(self, stats: Stats) -> list[str]:
        """Why the figure of ``stats`` may not be reliable (plausibility.noise_warnings)."""
        strict = self.ctx.task.timing_protocol == "per_call" and not self.ctx.gated
        return plausibility.noise_warnings(stats, self.ctx.gpu, strict)
