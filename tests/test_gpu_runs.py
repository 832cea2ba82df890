"""The harness end to end on a GPU (skipped without one; run on the device)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
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


def _wide_row_mxfp4(data):
    """mxfp4 inputs whose row 3 of A spans 20 binades (a huge first block where B is zero, the rest
    ordinary), and the control: the reference output with that row's ordinary blocks dropped, as an
    e4m3 path alone would lose them."""
    import torch

    from fp4_reference.layouts import shuffle_scales_e8m0, shuffle_weight
    from fp4_reference.mxfp4 import quantize_mxfp4

    A, B = data[0].clone(), data[1].clone()
    B[:, :32] = 0
    A[3, :32] *= 2.0**20
    b_q, b_scales = quantize_mxfp4(B)
    fp4 = torch.float4_e2m1fn_x2
    wide = (
        A,
        B,
        b_q.view(fp4),
        shuffle_weight(b_q).view(fp4),
        shuffle_scales_e8m0(b_scales).view(torch.float8_e8m0fnu),
    )
    dropped = A.clone()
    dropped[3, 32:] = 0
    return wide, (dropped, *wide[1:])


def test_triton_mxfp4_is_right_on_every_benchmark_shape_call_after_call():
    """After a first call triton_mxfp4 launches its kernels through their compiled launchers: three
    calls on each of two inputs (other data pointers) of every benchmark shape are each right."""
    import torch

    task, sub = _triton_example("mxfp4_mm", "triton_mxfp4")
    for case in task.benchmarks:
        for seed in (case["seed"], case["seed"] + 1):
            data = task.generate_input({**case, "seed": seed}, torch.device("cuda"))
            outs = [sub.custom_kernel(data).clone() for _ in range(3)]
            assert all(task.check(data, out)[0] for out in outs), (case, seed)


def test_triton_mxfp4_fp8_shapes_fall_back_to_bf16_on_the_gpu():
    """The FP8 benchmark shapes (CONFIGS) with a row of A whose blocks span 20 binades, outside e4m3's
    window: the control (those blocks lost) fails the check, and the output, whose tile took the bf16
    loop, passes."""
    import torch

    task, sub = _triton_example("mxfp4_mm", "triton_mxfp4")
    shapes = [c for c in task.benchmarks if sub.CONFIGS.get((c["m"], c["n"], c["k"]), (0,) * 8)[4] == sub.FP8]
    assert shapes
    for case in shapes:
        wide, dropped = _wide_row_mxfp4(task.generate_input(case, torch.device("cuda")))
        assert not task.check(wide, task.reference(dropped))[0], case  # the wide row matters
        assert task.check(wide, sub.custom_kernel(wide))[0], case


def test_triton_nvfp4_is_right_on_every_benchmark_shape_call_after_call():
    """After a first call triton_nvfp4 launches its kernels by cuLaunchKernelEx with parameter blocks it
    built from the kernels' PTX: three calls on each of two inputs (other data pointers, tensor maps
    made by address) of every benchmark shape, the output poisoned with NaN, are each right."""
    import torch

    task, sub = _triton_example("nvfp4_gemm", "triton_nvfp4")
    for case in task.benchmarks:
        for seed in (case["seed"], case["seed"] + 1):
            data = task.generate_input({**case, "seed": seed}, torch.device("cuda"))
            outs = []
            for _ in range(3):
                data[6].fill_(float("nan"))
                outs.append(sub.custom_kernel(data).clone())
            assert all(task.check(data, out)[0] for out in outs), (case, seed)


def test_triton_nvfp4_back_to_back_calls_on_different_inputs_are_each_right():
    """A call's first kernel is a dependent launch of the call before's GEMM and shares its scratch (the
    chain): calls on different inputs queued back to back, behind a kernel that keeps the GPU busy until
    the host has queued them all, must each be right on every benchmark shape."""
    import torch

    task, sub = _triton_example("nvfp4_gemm", "triton_nvfp4")
    dev = torch.device("cuda")
    for case in task.benchmarks:
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
        assert not task.check(inputs[1], inputs[0][6])[0], case  # the inputs differ


def test_triton_nvfp4_folded_paths_fall_back_on_the_gpu():
    """triton_nvfp4's FP8, INT8, I8G and I8F paths (selected by CONFIGS) on the GPU, where their
    inline-PTX decodes and the Gluon kernel run: the task's scales pass; a scale of 1.125 in B or 0.5625
    in A, in the first 64 x 256 tile or a later one, makes the path alone wrong (the control: rounded to
    e4m3, or 2 * value cut to an integer) and the kernel, which redoes such tiles, still passes, on the
    first call and through the launch plan."""
    import torch

    nv, sub = _triton_example("nvfp4_gemm", "triton_nvfp4")
    dev = torch.device("cuda")

    spec_ = {"m": 128, "n": 256, "k": 512, "l": 1, "seed": 3}
    for cfg in [
        (128, 64, 128, 2, 4, 3, sub.FP8),
        (128, 64, 256, 1, 8, 3, sub.INT8),
        (128, 128, 128, 3, 8, 3, sub.INT8),
        (128, 64, 256, 1, 4, 4, sub.I8G),
        (128, 64, 256, 2, 4, 4, sub.I8G),
        (128, 128, 256, 1, 4, 3, sub.I8G),  # BLOCK_N 128: both fold warpgroups take every chunk
        (128, 128, 128, 2, 8, 4, sub.I8G),  # not served by the Gluon kernel (8 warps, BLOCK_K 128): INT8
        (128, 64, 256, 1, 4, 4, sub.I8F),
        (128, 64, 256, 2, 4, 4, sub.I8F),
    ]:
        sub.CONFIGS[(128, 256, 512)] = cfg
        data = nv.generate_input(spec_, dev)
        data[6].fill_(float("nan"))
        assert nv.check(data, sub.custom_kernel(data))[0], cfg
        assert nv.check(data, nvfp4_path_alone(data, cfg[6]))[0], cfg
        for operand, value, r, block in NVFP4_BAD_SCALES:
            d = nv.generate_input(spec_, dev)
            d[operand].view(torch.uint8)[r, block, 0] = value
            d[6].fill_(float("nan"))
            assert not nv.check(d, nvfp4_path_alone(d, cfg[6]))[0], (cfg, operand, r)  # the bad scale matters
            assert nv.check(d, sub.custom_kernel(d))[0], (cfg, operand, r)
            d[6].fill_(float("nan"))
            assert nv.check(d, sub.custom_kernel(d))[0], (cfg, operand, r)  # through the launch plan


def test_triton_nvfp4_operands_not_aligned_for_tma_are_right():
    """Every operand starting past a 16-byte boundary (a, b, sfa, sfb one byte, c one element: TMA and
    INT8's 32-bit loads cannot read them; the task's generator never makes such tensors): the example
    works on aligned copies and writes c, right on every benchmark shape, first call and through the
    launch plan; aligned inputs of the same shape after them still right."""
    import torch

    task, sub = _triton_example("nvfp4_gemm", "triton_nvfp4")

    def moved(t):  # t's layout one element further on
        raw = torch.empty(t.untyped_storage().nbytes() + 16, dtype=torch.uint8, device=t.device).view(t.dtype)
        out = torch.as_strided(raw, t.shape, t.stride(), storage_offset=1)
        if t.element_size() == 1:  # (no copy kernel for fp4)
            out.view(torch.uint8).copy_(t.view(torch.uint8))
        else:
            out.copy_(t)
        return out

    for case in task.benchmarks:
        aligned = task.generate_input(case, torch.device("cuda"))
        data = tuple(moved(t) if i in (0, 1, 2, 3, 6) else t for i, t in enumerate(aligned))
        assert all(data[i].data_ptr() % 16 for i in (0, 1, 2, 3, 6))
        for _ in range(2):
            data[6].fill_(float("nan"))
            assert sub.custom_kernel(data) is data[6]
            assert task.check(data, data[6])[0], case
        aligned[6].fill_(float("nan"))
        assert task.check(aligned, sub.custom_kernel(aligned))[0], case


def test_the_harness_kernels_loaded_ahead_are_the_ones_the_sampler_launches(tmp_path):
    """A worker loads the launch gate's and the timestamps' kernels before it waits for its block
    (gate.load_ahead), so that its sampler's first launches after the wait find them loaded.
    Triton compiles one kernel per specialization of the arguments (dtypes, pointer alignment, int
    widths, warps): were the arguments loaded ahead not the sampler's, the sampler would compile and
    load another on its first launch, after the wait. In a fresh process, after load_ahead, building the
    sampler and calibrating it (every kind of launch it makes) adds no kernel and loads none."""
    script = tmp_path / "loaded_ahead.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch
            from harness.worker import gate, gate_kernel
            from harness.worker.sampler import Sampler

            device = torch.device("cuda", torch.cuda.current_device())
            kernels = (gate_kernel.gate_kernel, gate_kernel.stamp_kernel, gate_kernel.occupancy_stamp_kernel)

            def compiled():
                return {k.fn.__name__: dict(k.device_caches[device.index][0]) for k in kernels}

            torch.empty(1, device=device)
            gate.load_ahead(device)
            ahead = compiled()
            assert all(len(cache) == 1 for cache in ahead.values()), ahead
            assert all(c.module is not None for cache in ahead.values() for c in cache.values()), "not loaded"
            sampler = Sampler(device, None, hide_bytes=1 << 30)
            assert sampler.gate is not None and sampler._occupancy is not None, sampler.method
            sampler.calibrate()
            after = compiled()
            assert after == ahead, {name: sorted(map(str, cache)) for name, cache in after.items()}
            print("same kernels")
            """
        )
    )
    res = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TRITON_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert res.returncode == 0 and "same kernels" in res.stdout, res.stderr[-3000:]
