"""Statistics for comparing two submissions: pure functions on :class:`harness.results.Stats`.

Per shape, the speed-up of A over B is ``r = mean_B / mean_A`` (> 1: A is faster). Its uncertainty
comes from the samples' standard errors by the delta method on the log scale:
``s^2 = (se_A / mean_A)^2 + (se_B / mean_B)^2``, ``se(r) = r * s``, with Welch-Satterthwaite degrees
of freedom ``df = (v_A + v_B)^2 / (v_A^2 / (n_A - 1) + v_B^2 / (n_B - 1))`` where ``v = (se / mean)^2``.
The confidence interval is ``r * exp(+- t(df) * s)`` with Student's t quantile. Overall, the speed-up
is the geometric mean of the per-shape ones (``var(log R) = sum(s_i^2) / k^2``, df again by
Welch-Satterthwaite). A difference is significant when the interval excludes 1; when a side has a
single sample the uncertainty is unknown and the result says so instead of guessing.
The per-shape Welch t-test p-value on the difference of the means is reported alongside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.results import Stats

CONFIDENCE = 0.95


@dataclass
class Ratio:
    value: float  # mean_B / mean_A: how many times faster A is than B
    stderr: float  # nan when unknown
    low: float  # confidence interval (nan when unknown)
    high: float
    df: float
    p_value: float  # Welch t-test, two-sided (nan for an overall ratio or when unknown)
    significant: bool | None  # None: cannot tell
    confidence: float = CONFIDENCE
    note: str = ""


def _unknown(value: float, confidence: float, note: str) -> Ratio:
    """A ratio whose uncertainty cannot be told: every spread field nan, significance None."""
    return Ratio(value, math.nan, math.nan, math.nan, math.nan, math.nan, None, confidence, note=note)


# --- Student's t distribution, from the regularized incomplete beta function -------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(df):
        return math.erfc(abs(t) / math.sqrt(2.0))
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(confidence: float, df: float) -> float:
    """The t such that P(|T| <= t) = confidence."""
    alpha = 1.0 - confidence
    lo, hi = 0.0, 1.0
    while t_two_sided_p(hi, df) > alpha:
        hi *= 2.0
    for _ in range(64):  # bisection: 64 halvings reach double precision
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_two_sided_p(mid, df) > alpha else (lo, mid)
    return 0.5 * (lo + hi)


def welch_df(va: float, dfa: float, vb: float, dfb: float) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference of two estimates with variances va, vb."""
    denom = (va * va / dfa if math.isfinite(dfa) and dfa > 0 else 0.0) + (
        vb * vb / dfb if math.isfinite(dfb) and dfb > 0 else 0.0
    )
    return (va + vb) ** 2 / denom if denom > 0 else math.inf


# --- comparisons ---------------------------------------------------------------------------------


def _usable(s: Stats) -> bool:
    return s.runs >= 2 and s.mean > 0 and s.stderr is not None and math.isfinite(s.stderr)


def welch_t_test(a: Stats, b: Stats) -> tuple[float, float, float]:
    """(t, df, two-sided p) of Welch's test for equal means; needs two samples on each side."""
    va, vb = a.stderr**2, b.stderr**2
    if va + vb == 0:
        return (
            (0.0 if a.mean == b.mean else math.copysign(math.inf, b.mean - a.mean)),
            math.inf,
            (1.0 if a.mean == b.mean else 0.0),
        )
    t = (b.mean - a.mean) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.runs - 1) + vb**2 / (b.runs - 1))
    return t, df, t_two_sided_p(t, df)


def _from_log(log_r: float, s: float, df: float, confidence: float, p: float) -> Ratio:
    r = math.exp(log_r)
    if s == 0:
        return Ratio(r, 0.0, r, r, df, p, r != 1.0, confidence)
    half = t_quantile(confidence, df) * s
    low, high = math.exp(log_r - half), math.exp(log_r + half)
    return Ratio(r, r * s, low, high, df, p, not (low <= 1.0 <= high), confidence)


def speedup(a: Stats, b: Stats, confidence: float = CONFIDENCE) -> Ratio:
    """How many times faster A is than B (mean_B / mean_A), with its uncertainty."""
    if a.mean <= 0 or b.mean <= 0:
        raise ValueError("speed-ups need positive mean times")
    r = b.mean / a.mean
    if not (_usable(a) and _usable(b)):
        side = "A" if not _usable(a) else "B"
        return _unknown(r, confidence, f"uncertainty unknown: {side} has a single sample")
    va, vb = (a.stderr / a.mean) ** 2, (b.stderr / b.mean) ** 2
    denom = va**2 / (a.runs - 1) + vb**2 / (b.runs - 1)
    df = (va + vb) ** 2 / denom if denom > 0 else math.inf
    return _from_log(math.log(r), math.sqrt(va + vb), df, confidence, welch_t_test(a, b)[2])


def geomean_speedup(ratios: list[Ratio], confidence: float = CONFIDENCE) -> Ratio:
    """The overall speed-up: the geometric mean of per-shape speed-ups, uncertainty propagated."""
    if not ratios:
        raise ValueError("an overall speed-up needs at least one shape")
    k = len(ratios)
    log_r = math.fsum(math.log(x.value) for x in ratios) / k
    if any(x.significant is None for x in ratios):
        return _unknown(math.exp(log_r), confidence, "uncertainty unknown: some shapes have a single sample")
    rel = [x.stderr / x.value for x in ratios]
    var_sum = math.fsum(s * s for s in rel)
    denom = math.fsum(s**4 / x.df for s, x in zip(rel, ratios) if math.isfinite(x.df))
    df = var_sum**2 / denom if denom > 0 else math.inf
    return _from_log(log_r, math.sqrt(var_sum) / k, df, confidence, math.nan)


def describe(ratio: Ratio, name_a: str, name_b: str) -> str:
    """One sentence for people, e.g. 'A is 1.35 +- 0.05 times faster than B (95% CI 1.25 to 1.45)'."""
    ci = f"{ratio.confidence:.0%} CI {ratio.low:.4g} to {ratio.high:.4g}"
    if ratio.significant is None:
        word = "faster" if ratio.value >= 1 else "slower"
        factor = ratio.value if ratio.value >= 1 else 1 / ratio.value
        return f"{name_a} is {factor:.3g} times {word} than {name_b} ({ratio.note})"
    if not ratio.significant:
        return f"no significant difference between {name_a} and {name_b} (ratio {ratio.value:.3g}, {ci})"
    if ratio.value >= 1:
        return f"{name_a} is {ratio.value:.3g} \u00b1 {ratio.stderr:.2g} times faster than {name_b} ({ci})"
    inv, inv_se = 1 / ratio.value, ratio.stderr / ratio.value**2
    ci = f"{ratio.confidence:.0%} CI {1 / ratio.high:.4g} to {1 / ratio.low:.4g}"
    return f"{name_a} is {inv:.3g} \u00b1 {inv_se:.2g} times slower than {name_b} ({ci})"
