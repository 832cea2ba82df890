"""The harness end to end on a GPU (skipped without one; run on the device)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.api import RunOptions, run_submission
from harness.results import PASS
from tests.helpers import MXFP4_SMALL, NVFP4_BAD_SCALES, NVFP4_SMALL, ROOT, load_example, nvfp4_path_alone

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("sub, task", [("torch_mxfp4.py", "mxfp4_mm"), ("torch_nvfp4.py", "nvfp4_gemm")])
def test_torch_examples_pass_real_tests_on_gpu(sub, task):
    r = run_submission(ROOT / "submissions" / sub, task, "test", RunOptions(device="cuda"))
    assert r.verdict == PASS, r.message
    assert r.device.kind in ("cuda", "rocm")


@pytest.mark.parametrize("sub, task", [("torch_mxfp4.py", MXFP4_SMALL), ("torch_nvfp4.py", NVFP4_SMALL)])
def test_leaderboard_on_gpu_checks_every_timed_output(sub, task):
    r = run_submission(
        ROOT / "submissions" / sub, task, "leaderboard", RunOptions(device="cuda", secret="gpu-secret", max_repeats=20)
    )
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
    sub.write_text(
        src
        + textwrap.dedent("""

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
    """)
    )
    # Inductor compiles each test shape cold in the fresh cache (over the fixture's 60 s at 1x on the H200).
    # On the H200, Inductor's CPU code (the tables, when traced) failed to build its C++ headers there
    # (CppCompileError in ATen's vec512 headers, with dynamic=False too): the tables are made eagerly.
    r = run_submission(sub, MXFP4_SMALL, "test", RunOptions(device="cuda", drop_privileges=True, timeout_scale=5))
    assert r.verdict == PASS, r.message


def _triton_example(task_name: str, name: str):
    """(the task, a fresh module of submissions/<name>.py) for tests that set the example's configs."""
    from tasks import load_task

    pytest.importorskip("triton")
    task = load_task(task_name)
    return task, load_example(name, task)


def test_triton_mxfp4_keeps_its_direct_launch_on_every_benchmark_shape():
    """After a first call triton_mxfp4 launches its kernels through their compiled launchers; one that
    refuses the arguments turns that off for good, silently (it did for the first kernels' 1- and 2-D
    grids). Every benchmark shape's kernels must pass through it and still give the right output."""
    import torch

    task, sub = _triton_example("mxfp4_mm", "triton_mxfp4")
    for case in task.benchmarks:
        data = task.generate_input(case, torch.device("cuda"))
        outs = [sub.custom_kernel(data) for _ in range(3)]
        assert all(task.check(data, out)[0] for out in outs), case
        assert sub._FAST[0], f"the direct launch was turned off at {case}"


def test_triton_mxfp4_fp8_shapes_fall_back_to_bf16_on_the_gpu():
    """The FP8 benchmark shapes with a row of A whose blocks span more than 12 binades: its base is the
    flag (the fallback fired) and the output, whose tile took the bf16 loop, is right."""
    import torch

    task, sub = _triton_example("mxfp4_mm", "triton_mxfp4")
    shapes = [c for c in task.benchmarks if sub._pick_config(c["m"], c["n"], c["k"])[4] == sub.FP8]
    assert shapes
    for case in shapes:
        data = task.generate_input(case, torch.device("cuda"))
        A = data[0].clone()
        A[3, :32] *= 2.0**-14
        data = (A, *tuple(data[1:]))
        assert task.check(data, sub.custom_kernel(data))[0], case
        base = sub._BUFFERS[(A.device, "fp8_base")][: case["m"]]
        assert (base == 1 << 20).nonzero().flatten().tolist() == [3], case


def test_triton_nvfp4_launches_through_libcuda_on_every_benchmark_shape():
    """After a first call triton_nvfp4 launches its kernels by cuLaunchKernelEx with parameter blocks it
    built from the kernels' PTX; a kernel whose parameters it cannot lay out sends the plan back to
    Triton's launchers, silently. Every benchmark shape must take the direct path and stay right, on
    fresh inputs (other data pointers) as well."""
    import torch

    task, sub = _triton_example("nvfp4_gemm", "triton_nvfp4")
    for case in task.benchmarks:
        sub._PLANS.clear()
        for seed in (case["seed"], case["seed"] + 1):
            data = task.generate_input({**case, "seed": seed}, torch.device("cuda"))
            data[6].fill_(float("nan"))
            outs = [sub.custom_kernel(data).clone() for _ in range(3)]
            assert all(task.check(data, out)[0] for out in outs), case
        (plan,) = sub._PLANS.values()
        assert sub._FAST[0] and plan.direct, f"the libcuda launch is off at {case}"


def test_triton_nvfp4_back_to_back_calls_on_different_inputs_are_each_right():
    """A call's first kernel (I8G's first kernel, I8F's GEMM) is a dependent launch of the call before's
    GEMM and shares its scratch (_CHAIN): calls on different inputs queued back to back, behind a kernel
    that keeps the GPU busy until the host has queued them all, must each be right, and every benchmark
    shape must launch that way."""
    import torch

    task, sub = _triton_example("nvfp4_gemm", "triton_nvfp4")
    dev = torch.device("cuda")
    for case in task.benchmarks:
        sub._PLANS.clear()
        inputs = [task.generate_input({**case, "seed": case["seed"] + i}, dev) for i in range(4)]
        sub.custom_kernel(inputs[0])
        for d in inputs:
            d[6].fill_(float("nan"))
        torch.cuda.synchronize()
        torch.cuda._sleep(50_000_000)
        for d in inputs:
            sub.custom_kernel(d)
        torch.cuda.synchronize()
        assert all(task.check(d, d[6])[0] for d in inputs), case
        (plan,) = sub._PLANS.values()
        if sub._CHAIN:  # the call's first launch depends on the call before's GEMM, which lets it start early
            assert plan.direct[0][0].num_attrs == 1, case
            assert "griddepcontrol.launch_dependents" in plan.steps[-1][0].asm["ptx"], case


def test_triton_nvfp4_folded_paths_fall_back_on_the_gpu():
    """triton_nvfp4's FP8 and INT8 paths on the GPU (their inline-PTX decodes run only there): the
    task's scales pass; a scale of 1.125 in B or 0.5625 in A, in the first 64 x 256 tile or a later one,
    makes the path alone wrong (the control: rounded to e4m3, or 2 * value cut to an integer) and the
    kernel, which redoes such tiles on fp16, still passes."""
    import torch

    nv, sub = _triton_example("nvfp4_gemm", "triton_nvfp4")
    dev = torch.device("cuda")

    spec_ = {"m": 128, "n": 256, "k": 512, "l": 1, "seed": 3}
    for cfg in [
        (128, 64, 128, 2, 4, 3, sub.FP8),
        (128, 64, 256, 1, 8, 3, sub.INT8),
        (128, 128, 128, 3, 8, 3, sub.INT8),
        (128, 128, 128, 2, 4, 4, sub.I8G),
        (128, 64, 128, 1, 4, 4, sub.I8G),
        (128, 128, 128, 2, 8, 5, sub.I8G),
        (128, 128, 256, 2, 8, 3, sub.I8G),
        (128, 64, 256, 1, 4, 4, sub.I8G),
        (128, 128, 256, 2, 4, 3, sub.I8G),
        (128, 64, 256, 1, 4, 4, sub.I8F),
        (128, 64, 256, 2, 4, 4, sub.I8F),
        (128, 128, 256, 1, 4, 3, sub.I8F),
    ]:
        sub.CONFIGS[(128, 256, 512)] = cfg
        sub._PLANS.clear()
        data = nv.generate_input(spec_, dev)
        data[6].fill_(float("nan"))
        assert nv.check(data, sub.custom_kernel(data))[0], cfg
        if cfg[6] in (sub.I8G, sub.I8F):  # the Gluon kernel ran, its loads by TMA at BLOCK_K 256, else by
            steps = next(iter(sub._PLANS.values())).steps  # cp.async; I8F: alone (A made in it)
            gemm = steps[-1][0]
            assert gemm.name == "_i8g_kernel" and ("cp.async.bulk.tensor" in gemm.asm["ptx"]) == (cfg[2] == 256)
            assert (len(steps) == 1) == (cfg[6] == sub.I8F), cfg
        assert nv.check(data, nvfp4_path_alone(data, cfg[6]))[0], cfg
        for operand, value, r, block in NVFP4_BAD_SCALES:
            d = nv.generate_input(spec_, dev)
            d[operand].view(torch.uint8)[r, block, 0] = value
            d[6].fill_(float("nan"))
            assert not nv.check(d, nvfp4_path_alone(d, cfg[6]))[0], (cfg, operand, r)  # the bad scale matters
            assert nv.check(d, sub.custom_kernel(d))[0], (cfg, operand, r)
            assert nv.check(d, sub.custom_kernel(d))[0], (cfg, operand, r)  # through the launch plan
