"""tasks._check.check_output's one-reduction pass test (``pass_flag``) decides exactly as the element-by-
element report it skips: on thousands of random outputs and references, with NaN, inf, -0, values on the
tolerance's edge and integer outputs, a pass is a pass of the report and a fail is a report that finds
something. A task's checks read back together (``Task.check_all``) give each output the verdict and the
report its own check gives."""

from __future__ import annotations

import random

import torch

from tasks import load_task
from tasks._check import check_output, pass_flag
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
        flag = pass_flag(out, exp, rtol, atol)
        assert flag is not None and flag.dim() == 0
        quick = bool(flag)
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


def test_pass_flag_is_none_for_what_fails_before_any_comparison():
    exp = torch.zeros(2, 3, dtype=torch.bfloat16)
    assert pass_flag([[0.0] * 3] * 2, exp, 1e-2, 1e-2) is None
    assert pass_flag(torch.zeros(3, 2, dtype=torch.bfloat16), exp, 1e-2, 1e-2) is None
    assert pass_flag(torch.zeros(2, 3, dtype=torch.float32), exp, 1e-2, 1e-2) is None
    assert bool(pass_flag(exp.clone(), exp, 1e-2, 1e-2))


def test_checks_read_back_together_give_each_output_its_own_verdict_and_report():
    """Good, wrong, NaN, wrong-shape and non-tensor outputs of the fixture task, in one call."""
    from tests.helpers import MXFP4_SMALL

    task = load_task(MXFP4_SMALL)
    datas = [task.generate_input(dict(task.tests[0], seed=s), "cpu") for s in range(6)]
    good = [task.reference(d) for d in datas]
    wrong = good[1].clone()
    wrong[0, 0] += 100
    nan = good[2].clone()
    nan[1, 1] = float("nan")
    outputs = [good[0], wrong, nan, good[3].t().contiguous(), "not a tensor", good[5]]
    pairs = list(zip(datas, outputs))
    together = task.check_all(pairs)
    assert together == [task.check(d, o) for d, o in pairs]
    assert [ok for ok, _ in together] == [True, False, False, False, False, True]
    assert "mismatched" in together[1][1] and "NaN" in together[2][1] and "wrong shape" in together[3][1]
