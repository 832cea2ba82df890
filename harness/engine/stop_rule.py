"""When a benchmark case has enough samples."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from harness.results import Stats


@dataclass(frozen=True)
class StopRule:
    """Stop after at least ``min_samples`` samples once any of these holds: the standard error is below
    ``target_rel_err`` of the mean, the measured time passed ``max_measured_ns``, the case's wall time
    passed ``wall_cap_s``, or there are ``max_samples`` samples."""

    min_samples: int = 3
    target_rel_err: float = 0.001
    max_measured_ns: float = 10e9
    wall_cap_s: float = 120.0
    max_samples: int = 100

    @classmethod
    def from_options(cls, opt: Any, gpu: bool, ranked: bool) -> StopRule:
        """The options' limits; unset ones default to 100 samples, 10 s measured (ranked 30 s) and 120 s
        wall on a GPU, 10 samples, 2 s measured and 30 s wall on the CPU."""
        max_samples = opt.max_repeats or (100 if gpu else 10)
        max_time_s = opt.max_time_s or ((30.0 if ranked else 10.0) if gpu else 2.0)
        wall_cap_s = opt.wall_cap_s or (120.0 if gpu else 30.0)
        return cls(
            min_samples=opt.min_runs,
            target_rel_err=opt.target_rel_err,
            max_measured_ns=max_time_s * 1e9,
            wall_cap_s=wall_cap_s,
            max_samples=max_samples,
        )

    def for_blocks(self, blocks: int) -> StopRule:
        """One block's share of this rule when a case is measured in ``blocks`` blocks, so that all blocks
        together take about the samples one process took: the sample, measured-time and wall budgets are
        divided by ``blocks``, and the standard-error target is multiplied by sqrt(blocks) (a block with
        1/B of the samples reaches sqrt(B) times the standard error: the blocks together reach the
        target). Each block keeps at least ``min_samples``."""
        if blocks <= 1:
            return self
        return replace(
            self,
            target_rel_err=self.target_rel_err * math.sqrt(blocks),
            max_measured_ns=self.max_measured_ns / blocks,
            wall_cap_s=self.wall_cap_s / blocks,
            max_samples=max(self.min_samples, math.ceil(self.max_samples / blocks)),
        )

    def should_stop(self, samples_ns: list, elapsed_s: float) -> bool:
        if len(samples_ns) < self.min_samples:
            return False
        return (
            Stats.from_samples(samples_ns).relative_error < self.target_rel_err
            or sum(samples_ns) > self.max_measured_ns
            or elapsed_s > self.wall_cap_s
            or len(samples_ns) >= self.max_samples
        )
