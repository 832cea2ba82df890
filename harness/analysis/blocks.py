"""The score's interval from independent blocks: pure functions on plain numbers.

A ranked run measures its samples in B blocks; each block renews what changes between runs (a fresh
worker, fresh secret-derived inputs, a fresh order of the shapes), so the spread of the block scores is
the spread a rerun shows, which one process's samples cannot show. The score itself stays the task's
rule over the per-shape means of all samples (comparable with GPU MODE's); only its interval comes from
the blocks: on the log scale, ``log(score) +- t(B-1) * sd(log block scores) / sqrt(B)``.

Where boards of identical copies showed reruns spreading more than that on the run's device and task
(``harness.analysis.run_spread``: consecutive blocks share whatever drifts over minutes), that measured
between-run sd is added: ``se^2 = sd(log block scores)^2 / B + run_sd^2``, with Welch-Satterthwaite's
degrees of freedom.

Rule history (``BLOCK_RULE_VERSION``):
  1 - t with B-1 degrees of freedom on the log block scores, centred on the pooled score.
  2 - plus the measured between-run sd of the device and task, where there is one (method "blocks-t+run").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.analysis.compare import t_quantile
from harness.analysis.run_spread import RunSpread, widen

BLOCK_RULE_VERSION = 2
CONFIDENCE = 0.95
WIDE_SPREAD = 0.02  # between-block coefficient of variation above which the run warns (2%)


def combine(means_us: Sequence[float], rule: str) -> float:
    """The task's ranking rule over per-shape means: ``geom`` (geometric mean), ``mean`` or ``last``."""
    if not means_us:
        raise ValueError("a score needs at least one shape")
    if rule == "last":
        return float(means_us[-1])
    if rule == "mean":
        return math.fsum(means_us) / len(means_us)
    if any(m <= 0 for m in means_us):
        raise ValueError("a geometric mean needs positive times")
    return math.exp(math.fsum(math.log(m) for m in means_us) / len(means_us))


def log_spread(block_scores_us: Sequence[float]) -> float:
    """The sample standard deviation of the log block scores (about the between-block coefficient of
    variation); nan with fewer than two blocks."""
    xs = [math.log(s) for s in block_scores_us]
    if len(xs) < 2:
        return math.nan
    mean = math.fsum(xs) / len(xs)
    return math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1))


@dataclass(frozen=True)
class BlockInterval:
    """The score's interval: ``low_us``-``high_us`` at ``confidence``; ``se_log`` is the standard error of
    log(score) and ``df`` its degrees of freedom (B - 1, or Satterthwaite's with ``run_sd``); ``spread``
    the between-block sd of log scores; ``run_sd`` the measured between-run sd added (0: none)."""

    score_us: float
    low_us: float
    high_us: float
    blocks: int
    df: float
    se_log: float
    spread: float
    confidence: float = CONFIDENCE
    method: str = "blocks-t"
    rule_version: int = BLOCK_RULE_VERSION
    run_sd: float = 0.0

    @property
    def half_width_rel(self) -> float:
        """The half-width as a fraction of the score (on the log scale, about symmetric)."""
        return (self.high_us - self.low_us) / (2 * self.score_us)


def interval_from_blocks(
    score_us: float,
    block_scores_us: Sequence[float],
    confidence: float = CONFIDENCE,
    between_runs: RunSpread | None = None,
) -> BlockInterval | None:
    """The interval of ``score_us`` from its block scores, widened by ``between_runs`` (the device and
    task's measured between-run sd) when given; None with fewer than two usable blocks."""
    scores = [float(s) for s in block_scores_us if s is not None and math.isfinite(s) and s > 0]
    if len(scores) < 2 or not (score_us > 0 and math.isfinite(score_us)):
        return None
    spread = log_spread(scores)
    b = len(scores)
    var, df = widen(spread**2 / b, float(b - 1), between_runs)
    se_log, run_sd = math.sqrt(var), between_runs.sd_log if between_runs is not None else 0.0
    half = t_quantile(confidence, df) * se_log if se_log > 0 else 0.0
    return BlockInterval(
        score_us=score_us,
        low_us=score_us * math.exp(-half),
        high_us=score_us * math.exp(half),
        blocks=b,
        df=df,
        se_log=se_log,
        spread=spread,
        confidence=confidence,
        method="blocks-t+run" if run_sd > 0 else "blocks-t",
        run_sd=run_sd,
    )


def spread_warning(interval: BlockInterval | None, limit: float = WIDE_SPREAD) -> str | None:
    """A warning naming the between-run spread when it is large (a CPU, a shared or throttling GPU)."""
    if interval is None or not interval.spread > limit:
        return None
    return (
        f"the blocks of this run spread by {100 * interval.spread:.1f}% between each other (a fresh worker "
        f"and fresh inputs each), so a rerun can differ by that much: the score's ± is "
        f"{100 * interval.half_width_rel:.1f}% of it; measure on an idle, otherwise unused GPU "
        "(a CPU or a shared GPU spreads this much), or give more --blocks"
    )
