"""Bootstrap confidence interval of a run's score (the task's ranking rule over case means)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

RESAMPLES = 1000
SEED = 20261129


def _combine(means_us: np.ndarray, ranking_by: str) -> np.ndarray:
    """``means_us``: (resamples, cases) -> (resamples,): ``ranking.score``'s rules, vectorized."""
    if ranking_by == "geom":
        return np.exp(np.log(means_us).mean(axis=1))
    if ranking_by == "mean":
        return means_us.mean(axis=1)
    return means_us[:, -1]


def score_ci_us(
    samples_per_case: Sequence[Sequence[float]],
    ranking_by: str,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = 95.0,
) -> list[float] | None:
    """Percentile bootstrap: each case's samples (ns) are resampled with replacement, the score is
    recomputed, and the (100-level)/2 and 100-(100-level)/2 percentiles returned in microseconds.
    None when a case has fewer than 2 samples or a non-positive one (no honest interval)."""
    cases = [np.asarray(s, dtype=np.float64) for s in samples_per_case]
    if not cases or any(c.size < 2 or not np.all(c > 0) for c in cases):
        return None
    rng = np.random.default_rng(seed)
    means = np.empty((resamples, len(cases)))
    for j, c in enumerate(cases):
        idx = rng.integers(0, c.size, size=(resamples, c.size))
        means[:, j] = c[idx].mean(axis=1) / 1e3
    scores = _combine(means, ranking_by)
    tail = (100.0 - level) / 2
    lo, hi = np.percentile(scores, [tail, 100.0 - tail])
    return [float(lo), float(hi)]
