"""The harness end to end on a GPU (skipped without one; run on the device)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.results import PASS
from harness.runner import RunOptions, run_submission

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent
MXFP4_SMALL = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
NVFP4_SMALL = str(ROOT / "tests" / "fixtures" / "tasks" / "nvfp4_small" / "task.yml")


@pytest.mark.parametrize("sub, task", [("torch_mxfp4.py", "mxfp4_mm"), ("torch_nvfp4.py", "nvfp4_gemm")])
def test_torch_examples_pass_real_tests_on_gpu(sub, task):
    r = run_submission(ROOT / "submissions" / sub, task, "test", RunOptions(device="cuda"))
    assert r.verdict == PASS, r.message
    assert r.device.kind in ("cuda", "rocm")


@pytest.mark.parametrize("sub, task", [("torch_mxfp4.py", MXFP4_SMALL), ("torch_nvfp4.py", NVFP4_SMALL)])
def test_leaderboard_on_gpu_checks_every_timed_output(sub, task):
    r = run_submission(ROOT / "submissions" / sub, task, "leaderboard",
                       RunOptions(device="cuda", secret="gpu-secret", max_repeats=20))
    assert r.verdict == PASS, r.message
    assert r.score_us is not None
    for c in r.benchmark_cases():
        assert c.sol is not None and c.sol.time_ns and c.sol.bound in ("memory", "compute", "launch")
