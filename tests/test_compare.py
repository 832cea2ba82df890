"""Comparison statistics on synthetic samples with known means."""

from __future__ import annotations

import math
import random

import pytest

from harness.analysis.compare import describe, geomean_speedup, speedup, t_quantile, t_two_sided_p
from harness.results import Stats


def normal(mean, sd, n, seed):
    rng = random.Random(seed)
    return Stats.from_samples([rng.gauss(mean, sd) for _ in range(n)])


def test_t_distribution_matches_tables():
    assert t_quantile(0.95, 10) == pytest.approx(2.228139, abs=1e-5)
    assert t_quantile(0.95, 1) == pytest.approx(12.7062, abs=1e-3)
    assert t_quantile(0.95, math.inf) == pytest.approx(1.959964, abs=1e-6)
    assert t_two_sided_p(2.0, 5) == pytest.approx(0.10194, abs=1e-4)


def test_ratio_and_uncertainty_of_known_means():
    a, b = normal(100.0, 5.0, 400, 1), normal(135.0, 5.0, 400, 2)
    r = speedup(a, b)
    true_se = 1.35 * math.sqrt((5 / 20 / 100) ** 2 + (5 / 20 / 135) ** 2)  # sd / sqrt(n) / mean
    assert r.stderr == pytest.approx(true_se, rel=0.15)
    assert abs(r.value - 1.35) < 4 * true_se
    assert r.low < r.value < r.high and r.significant is True and r.p_value < 1e-10
    text = describe(r, "A", "B")
    assert text.startswith(f"A is {r.value:.3g} \u00b1 {r.stderr:.2g} times faster than B (95% CI ")
    assert "times slower than A" in describe(speedup(b, a), "B", "A")


def test_same_distribution_is_no_significant_difference():
    # identical means and spreads: the 95% interval must include 1 about 95% of the time
    rng = random.Random(3)
    verdicts, disagreements = [], 0
    for _ in range(200):
        a = Stats.from_samples([rng.gauss(100.0, 5.0) for _ in range(50)])
        b = Stats.from_samples([rng.gauss(100.0, 5.0) for _ in range(50)])
        r = speedup(a, b)
        verdicts.append(r.significant)
        assert (r.low <= 1 <= r.high) == (r.significant is False)
        disagreements += (r.p_value < 0.05) != r.significant  # interval (log scale) vs Welch's test
    assert disagreements <= 4
    assert 0.85 <= verdicts.count(False) / len(verdicts) <= 0.99
    first = speedup(*(Stats.from_samples([x + d for x in (99.0, 100.0, 101.0)]) for d in (0.0, 0.1)))
    assert describe(first, "A", "B").startswith("no significant difference between A and B")


def test_overall_is_the_geomean_with_propagated_error():
    pairs = [
        (normal(100.0, 2.0, 100, 5), normal(200.0, 4.0, 100, 6)),
        (normal(10.0, 0.2, 100, 7), normal(15.0, 0.3, 100, 8)),
    ]  # 2x and 1.5x
    ratios = [speedup(a, b) for a, b in pairs]
    overall = geomean_speedup(ratios)
    assert overall.value == pytest.approx(math.sqrt(ratios[0].value * ratios[1].value))
    rel = [x.stderr / x.value for x in ratios]
    assert overall.stderr == pytest.approx(overall.value * math.sqrt(sum(s * s for s in rel)) / 2)
    assert overall.significant is True


def test_single_sample_says_it_cannot_tell():
    r = speedup(Stats.from_samples([10.0]), normal(20.0, 1.0, 10, 9))
    assert r.significant is None and math.isnan(r.stderr)
    assert "uncertainty unknown" in describe(r, "A", "B")
    assert geomean_speedup([r]).significant is None
