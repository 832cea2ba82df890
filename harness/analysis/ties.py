"""Faster, slower or tied: one rule for the leaderboard, the site, ``compare``, the final scoring and the JSON.

A and B are told apart only when both hold: the difference is significant (the interval of
``log(score_A / score_B)`` excludes 0) and it is practical (the point estimate is beyond the
equivalence margin, ``|log ratio| > log(1 + margin)``). Everything else is ``tied``: cannot tell apart.
A decision is *settled* when more data would not change the kind of answer: a difference as above, or
an equivalence (the whole interval inside +-margin). The final scoring adds rounds while a pair is not
settled.

Where the interval comes from: for two independent entries, Welch's t on their log scores, each with
its standard error and degrees of freedom (from the blocks: sd of the log block scores / sqrt(B), B - 1;
from one process's samples when a run has a single block, then much too narrow for a rerun); for the
final scoring, the per-round differences of log block scores (a paired t with rounds - 1 degrees of
freedom).

Rule history (``TIE_RULE_VERSION``):
  1 - significant at 95% and beyond a 1% margin by default; Welch for entries, paired t for rounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from harness.analysis.blocks import log_spread
from harness.analysis.compare import t_quantile, welch_df
from harness.analysis.run_spread import RunSpread, widen

TIE_RULE_VERSION = 1
DEFAULT_MARGIN = 0.01  # 1%: a difference smaller than this is never reported
CONFIDENCE = 0.95


class Call(str, Enum):
    FASTER = "faster"  # A is faster than B
    SLOWER = "slower"  # A is slower than B
    TIED = "tied"  # cannot tell apart


@dataclass(frozen=True)
class Spread:
    """One entry's score and the standard error of its log (nan when unknown), with degrees of freedom."""

    score_us: float
    se_log: float
    df: float
    source: str = "blocks"  # "blocks", "samples" (one process: too narrow for a rerun) or "none"
    blocks: int = 1  # the block scores it comes from (1: none)


@dataclass(frozen=True)
class Decision:
    call: Call
    ratio: float  # score_A / score_B (< 1: A is faster)
    low: float  # the ratio's interval at ``confidence`` (nan when unknown)
    high: float
    df: float
    settled: bool  # a difference, or an equivalence within the margin; False: more data could change it
    margin: float
    confidence: float
    reason: str
    rule_version: int = TIE_RULE_VERSION

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["call"] = self.call.value
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def decide_log(
    diff_log: float, se: float, df: float, margin: float = DEFAULT_MARGIN, confidence: float = CONFIDENCE
) -> Decision:
    """The rule on ``d = log(score_A / score_B)`` with standard error ``se`` and ``df`` degrees of freedom."""
    if margin < 0 or not math.isfinite(margin):
        raise ValueError(f"the equivalence margin must be a finite number >= 0; got {margin!r}")
    m, ratio = math.log1p(margin), math.exp(diff_log)
    if not math.isfinite(se):
        settled = diff_log == 0
        reason = "identical scores" if settled else "no uncertainty known (a single sample or block): cannot tell"
        return Decision(Call.TIED, ratio, math.nan, math.nan, math.nan, settled, margin, confidence, reason)
    half = t_quantile(confidence, df) * se if se > 0 and df > 0 else (0.0 if se == 0 else math.inf)
    lo, hi = diff_log - half, diff_log + half
    significant, practical = (lo > 0 or hi < 0), abs(diff_log) > m
    low, high = math.exp(lo), math.exp(hi)
    if significant and practical:
        call = Call.FASTER if diff_log < 0 else Call.SLOWER
        reason = f"the {confidence:.0%} interval excludes 1 and the difference is beyond the {margin:.1%} margin"
        return Decision(call, ratio, low, high, df, True, margin, confidence, reason)
    equivalent = -m <= lo and hi <= m
    if equivalent:
        reason = f"the {confidence:.0%} interval lies within the {margin:.1%} margin"
    elif significant:
        reason = f"a significant difference, but smaller than the {margin:.1%} margin"
    else:
        reason = f"the {confidence:.0%} interval includes 1"
    return Decision(Call.TIED, ratio, low, high, df, equivalent, margin, confidence, reason)


def welch(a: Spread, b: Spread, margin: float = DEFAULT_MARGIN, confidence: float = CONFIDENCE) -> Decision:
    """A against B, two independent entries."""
    if a.score_us <= 0 or b.score_us <= 0:
        raise ValueError("ties need positive scores")
    diff = math.log(a.score_us / b.score_us)
    va, vb = a.se_log**2, b.se_log**2
    if not (math.isfinite(va) and math.isfinite(vb)):
        return decide_log(diff, math.nan, math.nan, margin, confidence)
    return decide_log(diff, math.sqrt(va + vb), welch_df(va, a.df, vb, b.df), margin, confidence)


def paired(
    block_scores_a: Sequence[float],
    block_scores_b: Sequence[float],
    margin: float = DEFAULT_MARGIN,
    confidence: float = CONFIDENCE,
) -> Decision:
    """A against B from rounds in which both ran one block each: the per-round differences of log scores."""
    if len(block_scores_a) != len(block_scores_b):
        raise ValueError("paired rounds need one block score of each side per round")
    diffs = [math.log(a / b) for a, b in zip(block_scores_a, block_scores_b)]
    if not diffs:
        raise ValueError("a paired comparison needs at least one round")
    n = len(diffs)
    mean = math.fsum(diffs) / n
    if n < 2:
        return decide_log(mean, math.nan, math.nan, margin, confidence)
    sd = math.sqrt(math.fsum((d - mean) ** 2 for d in diffs) / (n - 1))
    return decide_log(mean, sd / math.sqrt(n), float(n - 1), margin, confidence)


def spread_from_blocks(
    score_us: float, block_scores_us: Sequence[float], between_runs: RunSpread | None = None, runs: int = 1
) -> Spread | None:
    """An entry's spread from its block scores (None with fewer than two), with the device and task's
    measured between-run sd over its ``runs`` runs added where there is one (``harness.analysis.blocks``)."""
    scores = [s for s in block_scores_us if s is not None and s > 0 and math.isfinite(s)]
    if len(scores) < 2:
        return None
    var, df = widen(log_spread(scores) ** 2 / len(scores), float(len(scores) - 1), between_runs, runs)
    return Spread(score_us, math.sqrt(var), df, "blocks", len(scores))


def rank_groups(spreads: Sequence[Spread], margin: float = DEFAULT_MARGIN) -> list[tuple[int, bool]]:
    """(rank, tied) for entries sorted best first: the best entry not yet placed leads a group and every
    later entry the rule ties with the leader shares its rank ("=1, =1, 3"). Not chained: each tied entry
    is tied with its group's leader."""
    out: list[tuple[int, bool]] = []
    leader = 0
    for i, s in enumerate(spreads):
        if i > 0 and welch(spreads[leader], s, margin).call is Call.TIED:
            out.append((leader + 1, True))
            out[leader] = (leader + 1, True)
        else:
            leader = i
            out.append((i + 1, False))
    return out
