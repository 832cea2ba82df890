"""The Triton example submissions on a CPU-only machine, through what a competitor's file offers:
``custom_kernel`` and the harness.

Under Triton's interpreter (TRITON_INTERPRET=1) each data path of an example is selected the way a
reader of the file would select it, by its public ``CONFIGS`` table (shape -> config) or by the input
itself (scales that a folded path cannot represent, rows whose blocks span too many binades), and the
output is checked by the task. Where a test relies on a fallback, a control shows that the input
breaks the path without it. No test reads an example's private names; the GPU-only parts (inline PTX,
the Gluon kernel, the launch plan) are checked on the device by tests/test_gpu_runs.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")
if tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 8):
    pytest.skip("needs Triton >= 3.8 (tl.dot_scaled in the interpreter)", allow_module_level=True)

from tests.helpers import NVFP4_BAD_SCALES, ROOT  # noqa: E402

# what each interpreted snippet starts with: load(name, task) imports submissions/<name>.py as the
# harness would (the task's compat folder first on sys.path)
_LOADER = """
import importlib.util, sys, torch
from tasks import load_task
def load(name, task):
    spec = importlib.util.spec_from_file_location(name, f"submissions/{name}.py")
    m = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(task.compat_dir))
    spec.loader.exec_module(m)
    return m
"""


def _interpreted(code: str) -> str:
    """Runs the snippet (after _LOADER) under Triton's interpreter in a fresh process (the variable
    must be set before Triton is imported) and returns its stdout."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "snippet.py"
        script.write_text(_LOADER + textwrap.dedent(code))
        res = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=900, check=False
        )
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def test_launch_gate_kernel_compiles_for_hopper():
    """The harness's launch gate (not an example, but Triton code that only a GPU runs) compiles for
    sm_90 on the CPU, with what the gate relies on."""
    from triton.backends.compiler import GPUTarget

    from harness.worker.gate_kernel import gate_kernel

    names = ("count_ptr", "open_ptr", "started_ptr", "release_ptr", "seq", "nblocks", "cap_ns")
    sig = {n: "*i32" if n.endswith("_ptr") else "i32" for n in names}
    src = triton.compiler.ASTSource(fn=gate_kernel, signature=sig, constexprs={}, attrs={})
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 32, "num_stages": 3}).asm["ptx"]
    assert ".reqntid 1024" in ptx  # one block of 1024 threads: two fill an SM
    assert "st.global.release.sys" in ptx  # the host sees "started" without PCIe atomics
    assert "%globaltimer" in ptx  # the cap


@pytest.mark.parametrize("name, task", [("triton_mxfp4", "mxfp4_small"), ("triton_nvfp4", "nvfp4_small")])
def test_triton_examples_pass_through_the_harness_on_the_cpu(name, task):
    """The worker sets TRITON_INTERPRET before the submission imports Triton; the harness itself must
    not import Triton first (it once did, through the launch gate, and every Triton example failed)."""
    from harness.api import RunOptions, run_submission
    from harness.results import PASS

    r = run_submission(
        str(ROOT / "submissions" / f"{name}.py"),
        str(ROOT / "tests" / "fixtures" / "tasks" / task / "task.yml"),
        "test",
        RunOptions(device="cpu"),
    )
    assert r.verdict == PASS, (r.message, [c.message for c in r.cases])


def test_mxfp4_every_data_path_is_right_and_calls_do_not_leak_into_each_other():
    """Each config kind of triton_mxfp4's CONFIGS (A fused into the GEMM or made by a first kernel,
    PREPARE then cuBLAS, C or C^T tiles, split-K, one or more stages) on one shape: two calls on
    different inputs (same scratch memory, split-K counters reset by the kernel) are each right, the
    first output still right after the second call."""
    out = _interpreted("""
        mx = load_task("mxfp4_mm")
        sub = load("triton_mxfp4", mx)
        # (BLOCK_N, BLOCK_M, BLOCK_K, SPLIT_K, A's path: 0 fused / 1 first kernel / PREPARE, warps, stages, C^T)
        for cfg in [(64, 16, 64, 2, 0, 4, 1, 1), (64, 16, 128, 2, 1, 4, 1, 1), (64, 32, 64, 1, 1, 4, 1, 1),
                    (32, 0, 64, 0, sub.PREPARE, 4, 1, 1), (64, 16, 64, 2, 0, 4, 3, 1), (64, 32, 128, 2, 1, 4, 2, 1),
                    (64, 64, 64, 2, 1, 4, 3, 0), (128, 64, 128, 1, 0, 4, 2, 0),
                    (32, 8, 256, 0, sub.PREPARE, 4, 1, 1), (64, 16, 128, 0, sub.PREPARE, 4, 1, 0)]:
            sub.CONFIGS[(20, 256, 512)] = cfg
            first, second = (mx.generate_input({"m": 20, "n": 256, "k": 512, "seed": s}, torch.device("cpu"))
                             for s in (3, 4))
            out1 = sub.custom_kernel(first).clone()
            out2 = sub.custom_kernel(second)
            print("mxfp4", cfg, mx.check(first, out1)[0], mx.check(second, out2)[0], mx.check(second, out1)[0])
    """)
    lines = out.strip().splitlines()
    assert len(lines) == 10 and all(line.endswith("True True False") for line in lines), out


def test_mxfp4_fp8_path_is_right_and_falls_back_to_bf16_outside_its_window():
    """triton_mxfp4's FP8 configs (on shapes whose K/32 is not a multiple of 8 too: the shuffled scales'
    padding) give the right output; a row of A whose blocks span 20 binades (a huge first block where B
    is zero, the rest ordinary) is outside e4m3's window, so that the FP8 path alone would lose the
    ordinary blocks (the control: the output with them dropped fails the check), and the kernel, which
    takes such a tile on the bf16 path, is still right."""
    out = _interpreted("""
        from fp4_reference.layouts import shuffle_scales_e8m0, shuffle_weight
        from fp4_reference.mxfp4 import quantize_mxfp4
        mx = load_task("mxfp4_mm")
        sub = load("triton_mxfp4", mx)
        fp8 = [(64, 64, 64, 1, sub.FP8, 4, 3, 0), (64, 16, 128, 2, sub.FP8, 4, 1, 1),
               (64, 64, 256, 1, sub.FP8, 4, 3, 0)]   # the last loads B's scales as 256-byte segments
        for m, n, k in [(20, 208, 768), (8, 96, 1344)]:
            sub.CONFIGS[(m, n, k)] = fp8[0]
            data = mx.generate_input({"m": m, "n": n, "k": k, "seed": 5}, torch.device("cpu"))
            print("shape", m, n, k, mx.check(data, sub.custom_kernel(data))[0])
        for cfg in fp8:
            sub.CONFIGS[(20, 256, 1024)] = cfg
            data = mx.generate_input({"m": 20, "n": 256, "k": 1024, "seed": 3}, torch.device("cpu"))
            ok = mx.check(data, sub.custom_kernel(data))[0]
            A, B = data[0].clone(), data[1].clone()
            B[:, :32] = 0
            A[3, :32] *= 2.0 ** 20
            b_q, b_scales = quantize_mxfp4(B)
            fp4 = torch.float4_e2m1fn_x2
            wide = (A, B, b_q.view(fp4), shuffle_weight(b_q).view(fp4),
                    shuffle_scales_e8m0(b_scales).view(torch.float8_e8m0fnu))
            dropped = A.clone()
            dropped[3, 32:] = 0
            control = mx.reference((dropped,) + wide[1:])
            print("fp8", cfg, ok, mx.check(wide, sub.custom_kernel(wide))[0], mx.check(wide, control)[0])
    """)
    lines = out.strip().splitlines()
    assert len(lines) == 5, out
    assert all(line.endswith("True") for line in lines[:2]), out
    assert all(line.endswith("True True False") for line in lines[2:]), out


def test_nvfp4_every_data_path_is_right_and_calls_do_not_leak_into_each_other():
    """triton_nvfp4 on one shape through each path that the CPU runs: FP8 (the default for a shape
    outside CONFIGS, with split-K), and I8G / I8F, which without Hopper's Gluon take the INT8 path
    (both operands folded to int8 by a first kernel). Two calls on different inputs, with the output
    poisoned with NaN first, are each right, the first output still right after the second call."""
    out = _interpreted("""
        nv = load_task("nvfp4_gemm")
        sub = load("triton_nvfp4", nv)
        # (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, warps, stages, path); None: the file's own choice
        for cfg in [None, (128, 64, 128, 2, 4, 3, sub.FP8), (128, 128, 128, 2, 8, 4, sub.I8G),
                    (128, 64, 256, 1, 4, 4, sub.I8F), (128, 64, 256, 2, 4, 4, sub.I8F)]:
            if cfg is not None:
                sub.CONFIGS[(128, 256, 512)] = cfg
            first, second = (nv.generate_input({"m": 128, "n": 256, "k": 512, "l": 1, "seed": s}, torch.device("cpu"))
                             for s in (3, 4))
            first[6].fill_(float("nan"))
            second[6].fill_(float("nan"))
            out1 = sub.custom_kernel(first).clone()
            out2 = sub.custom_kernel(second)
            print("nvfp4", cfg, nv.check(first, out1)[0], nv.check(second, out2)[0], nv.check(second, out1)[0])
        data = nv.generate_input({"m": 128, "n": 128, "k": 256, "l": 2, "seed": 6}, torch.device("cpu"))
        data[6].fill_(float("nan"))
        print("batched", nv.check(data, sub.custom_kernel(data))[0])
    """)
    lines = out.strip().splitlines()
    assert len(lines) == 6, out
    assert all(line.endswith("True True False") for line in lines[:5]), out
    assert lines[5] == "batched True", out


def test_nvfp4_fp8_and_int8_paths_fold_the_task_scales_and_fall_back_on_others():
    """The task's scales (0..3) fold exactly into e4m3 (the FP8 path) and into int8 (the INT8 path): the
    output passes. A scale of 1.125 in B or of 0.5625 in A does not (each tried in several tiles): computing
    those elements as the path alone would (the control, in torch: rounded to e4m3, or 2 * value cut to
    an integer as the int8 conversion does) fails the check, while the kernel, which redoes such tiles
    on fp16, passes."""
    out = _interpreted("""
        nv = load_task("nvfp4_gemm")
        sub = load("triton_nvfp4", nv)
        from tests.helpers import NVFP4_BAD_SCALES, nvfp4_path_alone as path_alone
        for cfg in [(128, 128, 128, 3, 4, 3, sub.FP8), (128, 64, 64, 1, 4, 2, sub.FP8),
                    (128, 128, 128, 3, 4, 3, sub.INT8), (128, 64, 256, 1, 4, 2, sub.INT8)]:
            sub.CONFIGS[(128, 256, 512)] = cfg
            data = nv.generate_input({"m": 128, "n": 256, "k": 512, "l": 1, "seed": 3}, torch.device("cpu"))
            data[6].fill_(float("nan"))
            row = [nv.check(data, sub.custom_kernel(data))[0], nv.check(data, path_alone(data, cfg[6]))[0]]
            for operand, value, r, block in NVFP4_BAD_SCALES:
                d = nv.generate_input({"m": 128, "n": 256, "k": 512, "l": 1, "seed": 3}, torch.device("cpu"))
                d[operand].view(torch.uint8)[r, block, 0] = value
                d[6].fill_(float("nan"))
                row += [nv.check(d, sub.custom_kernel(d))[0], nv.check(d, path_alone(d, cfg[6]))[0]]
            print(cfg, *row)
    """)
    lines = out.strip().splitlines()
    assert len(lines) == 4 and all(
        line.endswith("True True" + " True False" * len(NVFP4_BAD_SCALES)) for line in lines
    ), out
