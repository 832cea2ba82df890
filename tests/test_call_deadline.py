"""A hang ended in seconds (harness.engine.deadlines): each request that runs the submission's code has a
limit derived from the calls seen so far, inside the task's timeout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.api import RunOptions, run_submission
from harness.engine.deadlines import FACTOR, FIRST_CALL_S, FLOOR_S, CallDeadlines, first_call_budget
from harness.results import PASS, TIMEOUT
from tests.helpers import CORRECT, FIX, MXFP4_SMALL, cheat_with_correct_kernel

TORCH_MXFP4 = CORRECT[MXFP4_SMALL]


def test_the_first_call_on_a_shape_gets_the_compilation_budget_and_later_ones_a_derived_limit():
    d = CallDeadlines(scale=1.0)
    d.note_inputs([{"m": 8, "seed": 1}])
    first = d.limit({"op": "call"})
    assert first is not None and first.seconds == FIRST_CALL_S and "compilation" in first.reason
    d.record({"op": "call"}, 3.0)  # compiled: not a measure of a call
    assert d.per_call_s is None
    d.record({"op": "warmup", "min_calls": 10, "min_ms": 100}, 0.1 + 10 * 0.02, calls=10)
    assert d.per_call_s == pytest.approx(0.02)
    timed = d.limit({"op": "time", "inputs": list(range(50))})
    assert timed.seconds == pytest.approx(FACTOR * 0.02 * 50)
    assert d.limit({"op": "call"}).seconds == FLOOR_S  # the floor
    d.note_inputs([{"m": 8, "seed": 99}])  # the same shape, another seed: no new budget
    assert d.limit({"op": "call"}).seconds == FLOOR_S
    d.note_inputs([{"m": 16, "seed": 1}])  # a new shape may compile again
    assert d.limit({"op": "call"}).seconds == FIRST_CALL_S
    assert d.limit({"op": "generate"}) is None  # not the submission's code: the task's timeout only
    assert CallDeadlines(scale=2.0).limit({"op": "call"}).seconds == 2 * FIRST_CALL_S


def test_the_cpu_gets_a_third_of_the_task_timeout_for_a_first_call_when_that_is_more():
    assert first_call_budget(gpu=True, task_timeout_s=180) == FIRST_CALL_S
    assert first_call_budget(gpu=False, task_timeout_s=180) == 60
    assert first_call_budget(gpu=False, task_timeout_s=60) == FIRST_CALL_S


def _hangs_after(tmp_path: Path, calls: int) -> Path:
    """The torch example, wrapped so that every call after the first ``calls`` spins forever."""
    return cheat_with_correct_kernel(
        tmp_path,
        f"""
_calls = 0


def custom_kernel(data):
    global _calls
    _calls += 1
    if _calls > {calls}:
        while True:
            pass
    return _correct_kernel(data)
""",
        name="hangs_later",
    )


def test_a_hang_after_calls_were_seen_ends_at_the_derived_limit(tmp_path):
    t0 = time.monotonic()
    r = run_submission(_hangs_after(tmp_path, 40), MXFP4_SMALL, "benchmark", RunOptions(device="cpu", max_repeats=50))
    wall = time.monotonic() - t0
    assert r.verdict == TIMEOUT, r.message
    assert "per-call limit" in r.message and "--timeout-scale" in r.message, r.message
    assert "slowest call so far" in r.message, r.message  # the derived limit, not the first-call budget
    assert wall < FLOOR_S + 15, f"took {wall:.1f} s; the task's timeout is 60 s"


def test_a_slow_but_steady_submission_is_not_cut_short(tmp_path):
    path = cheat_with_correct_kernel(
        tmp_path,
        "import time\n\n\ndef custom_kernel(data):\n    time.sleep(0.05)\n    return _correct_kernel(data)\n",
        name="slow",
    )
    r = run_submission(path, MXFP4_SMALL, "test+benchmark", RunOptions(device="cpu", max_repeats=5))
    assert r.verdict == PASS, r.message


@pytest.mark.slow
def test_a_submission_that_never_returns_ends_within_30_seconds():
    t0 = time.monotonic()
    r = run_submission(FIX / "submissions" / "hang.py", MXFP4_SMALL, "test", RunOptions(device="cpu"))
    wall = time.monotonic() - t0
    assert r.verdict == TIMEOUT, r.message
    assert f"per-call limit of {FIRST_CALL_S:.1f} s" in r.message, r.message
    assert wall < 30, f"took {wall:.1f} s (the task's timeout is 60 s)"


SPINS_ON_THE_GPU = """
import torch
import triton
import triton.language as tl


@triton.jit
def _spin(flag_ptr):
    v = tl.load(flag_ptr, volatile=True)
    while v == 0:
        v = tl.load(flag_ptr, volatile=True)


def custom_kernel(data):
    flag = torch.zeros(1, dtype=torch.int32, device=data[0].device)
    _spin[(1,)](flag)
    return flag
"""


@pytest.mark.gpu
def test_a_kernel_that_spins_forever_frees_the_gpu_within_30_seconds(tmp_path):
    sub = tmp_path / "spins.py"
    sub.write_text(SPINS_ON_THE_GPU)
    t0 = time.monotonic()
    r = run_submission(sub, MXFP4_SMALL, "test", RunOptions(device="cuda"))
    wall = time.monotonic() - t0
    assert r.verdict == TIMEOUT, r.message
    assert "per-call limit" in r.message, r.message
    assert wall < 30, f"the hang held the GPU for {wall:.1f} s"
    after = run_submission(TORCH_MXFP4, MXFP4_SMALL, "test", RunOptions(device="cuda"))  # the GPU is usable again
    assert after.verdict == PASS, after.message
