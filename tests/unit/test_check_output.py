"""tasks._check.check_output's one-reduction pass test (``_passes``) decides exactly as the element-by-
element report it skips: on thousands of random outputs and references, with NaN, inf, -0, values on the
tolerance's edge and integer outputs, a pass is a pass of the report and a fail is a report that finds
something."""

from __future__ import annotations

import random

import torch

from tasks._check import _passes, check_output
from tasks._compat_common.utils import verbose_allclose

SPECIALS = [float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 1e-3, -1e-3, 6.0, 65504.0]


def _report_passes(output: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> bool:
    finite = bool(torch.isfinite(output).all()) if output.is_floating_point() else True
    return finite and not verbose_allclose(output, expected, rtol=rtol, atol=atol)


def _pair(rng: random.Random, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    n = rng.randint(1, 6)
    expected = [rng.choice(SPECIALS) if rng.random() < 0.3 else rng.uniform(-8, 8) for _ in range(n)]
    output = []
    for x in expected:
        r = rng.random()
        if r < 0.25:
            output.append(x)  # exact
        elif r < 0.5:
            output.append(
                x + rng.choice([-1, 1]) * (1e-2 + 1e-2 * abs(x)) * rng.choice([0.5, 1.0, 1.5])
            )  # near the edge
        elif r < 0.7:
            output.append(rng.choice(SPECIALS))
        else:
            output.append(rng.uniform(-8, 8))
    exp = torch.tensor(expected, dtype=torch.float32).to(dtype)
    out = torch.tensor(output, dtype=torch.float32)
    out = out.nan_to_num().round().to(torch.int32) if dtype == torch.int32 else out.to(dtype)
    return out, exp.to(out.dtype) if dtype == torch.int32 else exp


def test_the_quick_pass_decides_as_the_report_does():
    rng = random.Random(1234)
    seen = {True: 0, False: 0}
    for i in range(4000):
        dtype = [torch.float32, torch.bfloat16, torch.float16, torch.int32][i % 4]
        out, exp = _pair(rng, dtype)
        rtol, atol = rng.choice([(1e-2, 1e-2), (1e-3, 1e-3), (0.0, 0.0)])
        quick = _passes(out, exp, rtol, atol)
        assert quick == _report_passes(out, exp, rtol, atol), (out, exp, rtol, atol)
        assert check_output(out, exp, rtol, atol)[0] == quick
        seen[quick] += 1
    assert min(seen.values()) > 200, seen  # both outcomes were exercised


def test_a_failing_output_still_gets_the_full_report():
    exp = torch.zeros(4, 4)
    out = exp.clone()
    out[1, 2] = 1.0
    ok, message = check_output(out, exp, 1e-3, 1e-3)
    assert not ok and "Number of mismatched elements: 1 of 16" in message and "(1, 2)" in message
    out[0, 0] = float("nan")
    ok, message = check_output(out, exp, 1e-3, 1e-3)
    assert not ok and "NaN" in message and "first at (0, 0)" in message
