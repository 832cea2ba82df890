"""The nvfp4_gemm reference's GPU kernel (fp4_reference/gpu_gemm.py) against its torch path: the same
bits on the task's inputs, on the CPU under Triton's interpreter and on a GPU; it compiles for sm_90; and
the gate that trusts it shape by shape (fp4_reference.matmul._GpuKernel) turns it off when it differs or
fails, with the torch path answering."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from fp4_reference import matmul
from tests.helpers import ROOT

TORCH_PATH = matmul._nvfp4_gemm_torch

# Under the interpreter (set before Triton is imported: a fresh process). Prints one line per case.
_INTERPRETED = """
import torch
from fp4_reference.gpu_gemm import Config, fused_nvfp4_gemm
from fp4_reference.matmul import nvfp4_gemm_reference
from tasks import load_task

task = load_task("nvfp4_gemm")
cpu = torch.device("cpu")
# the task's generator; 80 and 200 rows are not multiples of the 64-row tiles (masked edges), l=2 batches
for case in ({"m": 128, "n": 128, "k": 256, "l": 1}, {"m": 80, "n": 200, "k": 512, "l": 2}):
    a, b, sfa, sfb, *_ = task.generate_input(dict(case, seed=7), cpu)
    print("generated", torch.equal(fused_nvfp4_gemm(a, b, sfa, sfb), nvfp4_gemm_reference(a, b, sfa, sfb)))
# K split in two parts (float32 partial sums added by torch), 128-row tiles over 80 rows, l=2
case = {"m": 80, "n": 200, "k": 512, "l": 2}
a, b, sfa, sfb, *_ = task.generate_input(dict(case, seed=8), cpu)
split = fused_nvfp4_gemm(a, b, sfa, sfb, Config(bm=128, bn=32, bk=128, warps=4, stages=3, split=2))
print("split", torch.equal(split, nvfp4_gemm_reference(a, b, sfa, sfb)), split.dtype, split.shape == (80, 200, 2))

# every packed byte and every finite e4m3 scale up to 1.875, signs included; one NaN scale byte
g = torch.Generator().manual_seed(3)
m, n, k = 64, 64, 256
a = torch.randint(0, 256, (1, m, k // 2), dtype=torch.uint8, generator=g).permute(1, 2, 0)
b = torch.randint(0, 256, (1, n, k // 2), dtype=torch.uint8, generator=g).permute(1, 2, 0)
sfa = torch.randint(0, 0x40, (1, m, k // 16), dtype=torch.uint8, generator=g).permute(1, 2, 0).contiguous()
sfb = torch.randint(0, 0x40, (1, n, k // 16), dtype=torch.uint8, generator=g).permute(1, 2, 0)
sfa[5, 3, 0] = 0x7F
got, want = fused_nvfp4_gemm(a, b, sfa, sfb).float(), nvfp4_gemm_reference(a, b, sfa, sfb).float()
finite = ~torch.isnan(want)
print("nan rows", torch.equal(torch.isnan(got), ~finite), int((~finite).sum()))
print("any bytes ulps", int(((got - want).abs() / torch.finfo(torch.float16).eps / want.abs().clamp_min(1))[finite].max().ceil()))
"""


def test_gpu_kernel_matches_the_torch_path_interpreted():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    res = subprocess.run(
        [sys.executable, "-c", _INTERPRETED], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600
    )
    assert res.returncode == 0, res.stderr[-3000:]
    lines = res.stdout.splitlines()
    assert lines[:3] == ["generated True", "generated True", "split True torch.float16 True"], res.stdout
    assert lines[3] == "nan rows True 64", res.stdout  # one NaN scale spoils its row's 64 outputs
    assert int(lines[4].split()[-1]) <= 1, res.stdout  # other scales: float32 sums in another order


@pytest.mark.parametrize("partial", [False, True])
def test_gpu_kernel_compiles_for_hopper(partial):
    """Both launches compile for sm_90 on the CPU, one writing float16, the other a split K's float32 parts
    (the GPU run is tests below and bench/validate_reference_gpu.py)."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    from fp4_reference import gpu_gemm

    pointers = {
        "a_ptr": "*u8",
        "b_ptr": "*u8",
        "sfa_ptr": "*u8",
        "sfb_ptr": "*u8",
        "c_ptr": "*fp32" if partial else "*fp16",
        "e4m3_ptr": "*fp32",
    }
    cfg = gpu_gemm.launch_for(16384 if partial else 2048)
    assert (cfg.split > 1) == partial
    consts = {"BM": cfg.bm, "BN": cfg.bn, "BK": cfg.bk, "PARTIAL": partial}
    ints = [p for p in gpu_gemm.nvfp4_gemm.arg_names if p not in pointers and p not in consts]
    sig = {**pointers, **dict.fromkeys(ints, "i32"), **dict.fromkeys(consts, "constexpr")}
    src = triton.compiler.ASTSource(fn=gpu_gemm.nvfp4_gemm, signature=sig, constexprs=consts, attrs={})
    options = {"num_warps": cfg.warps, "num_stages": cfg.stages}
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]
    assert "mma" in ptx  # the dot runs on tensor cores


@pytest.mark.gpu
def test_gpu_kernel_matches_the_torch_path_on_every_shape(monkeypatch):
    """Every test and benchmark shape of nvfp4_gemm, fresh seeds: the kernel itself gives the torch path's
    bits, and the reference takes it (its gate stays on)."""
    from fp4_reference.gpu_gemm import MAX_ROWS, fused_nvfp4_gemm
    from tasks import load_task

    monkeypatch.setattr(matmul, "_GPU_KERNEL", matmul._GpuKernel())  # the shapes earlier tests checked not counted

    task = load_task("nvfp4_gemm")
    for i, case in enumerate(task.tests + task.benchmarks):
        a, b, sfa, sfb, *_ = task.generate_input(dict(case, seed=1000 + i), torch.device("cuda"))
        assert torch.equal(fused_nvfp4_gemm(a, b, sfa, sfb), TORCH_PATH(a, b, sfa, sfb)), case
        matmul.nvfp4_gemm_reference(a, b, sfa, sfb)
    shapes = {(c["m"], c["n"], c["k"], c["l"]) for c in task.tests + task.benchmarks if c["m"] <= MAX_ROWS}
    assert matmul._GPU_KERNEL.off is None and len(matmul._GPU_KERNEL.checked) == len(shapes)


class _OnTheCpu(matmul._GpuKernel):
    """The trust gate with a stand-in kernel that runs on the CPU."""

    def __init__(self, kernel):
        super().__init__()
        self.module = SimpleNamespace(BLOCK_K=128, MAX_ROWS=512, fused_nvfp4_gemm=kernel)
        self.calls = 0

    def applies(self, a):
        return self.off is None


def _operands(seed: int, m: int = 128):
    from tasks import load_task

    return load_task("nvfp4_gemm").generate_input({"m": m, "n": 128, "k": 256, "l": 1, "seed": seed}, "cpu")[:4]


def _gate(monkeypatch, kernel) -> _OnTheCpu:
    gate = _OnTheCpu(kernel)
    monkeypatch.setattr(matmul, "_GPU_KERNEL", gate)
    torch_path = matmul._nvfp4_gemm_torch

    def counted(*operands):
        gate.calls += 1
        return torch_path(*operands)

    monkeypatch.setattr(matmul, "_nvfp4_gemm_torch", counted)
    return gate


def test_a_kernel_that_matches_is_checked_once_per_shape(monkeypatch):
    gate = _gate(monkeypatch, TORCH_PATH)
    for seed in (1, 2, 3):
        matmul.nvfp4_gemm_reference(*_operands(seed))
    matmul.nvfp4_gemm_reference(*_operands(4, m=256))
    assert gate.off is None and gate.calls == 2  # one check for each of the two shapes


@pytest.mark.parametrize(
    "kernel, why",
    [
        (lambda *ops: torch.zeros(128, 128, 1, dtype=torch.float16), "differed"),
        (lambda *ops: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_a_kernel_that_differs_or_fails_is_turned_off_and_the_torch_path_answers(monkeypatch, kernel, why):
    gate = _gate(monkeypatch, kernel)
    ops = _operands(1)
    with pytest.warns(RuntimeWarning, match=f"GPU kernel is off for this process: .*{why}"):
        got = matmul.nvfp4_gemm_reference(*ops)
    assert torch.equal(got, TORCH_PATH(*ops)) and why in gate.off
    calls = gate.calls
    matmul.nvfp4_gemm_reference(*_operands(2))
    assert gate.calls == calls + 1  # the torch path alone from then on
