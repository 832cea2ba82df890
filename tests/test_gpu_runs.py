"""The harness end to end on a GPU (skipped without one; run on the device)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.results import PASS
from harness.api import RunOptions, run_submission

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


def test_torch_compile_submission_runs_as_nobody(tmp_path):
    """torch.compile (Inductor) in a worker dropped to 'nobody', while the harness's own user already
    owns torch.compile's default cache directory (/tmp/torchinductor_<user>, as after any earlier run
    as that user): the run's own cache directory must be used, or Inductor fails with EACCES."""
    import getpass
    import tempfile
    import textwrap

    from harness.engine.runner import _privilege_drop_possible
    if not _privilege_drop_possible():
        pytest.skip("the harness drops to 'nobody' only when run as root with a world-readable environment")
    Path(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}").mkdir(mode=0o755, exist_ok=True)
    src = (ROOT / "submissions" / "torch_mxfp4.py").read_text().replace("def custom_kernel(", "def _eager(")
    sub = tmp_path / "compiled.py"
    sub.write_text(src + textwrap.dedent("""

        _compiled = None


        def _mm(a, b_q, scale_sh):
            return (_quant_dequant_a(a) @ _decode_b(b_q, scale_sh).T).to(torch.bfloat16)


        def custom_kernel(data):
            global _compiled
            if _compiled is None:
                _compiled = torch.compile(_mm, dynamic=False)
            a, _b, b_q, _b_shuffle, scale_sh = data   # Inductor takes no fp4 / e8m0 tensors: uint8 views
            _tables(a.device)   # the lookup tables are built on the CPU: eagerly, not in Inductor's C++
            return _compiled(a, b_q.view(torch.uint8), scale_sh.view(torch.uint8))
    """))
    # Inductor compiles each test shape cold in the fresh cache (over the fixture's 60 s at 1x on the H200).
    # On the H200, Inductor's CPU code (the tables, when traced) failed to build its C++ headers there
    # (CppCompileError in ATen's vec512 headers, with dynamic=False too): the tables are made eagerly.
    r = run_submission(sub, MXFP4_SMALL, "test", RunOptions(device="cuda", drop_privileges=True, timeout_scale=5))
    assert r.verdict == PASS, r.message
