"""The nvfp4_gemm reference GEMM as one Triton kernel, for GPUs: the same values as
``matmul.nvfp4_gemm_reference``'s torch path, without its float32 copies of both operands.

The torch path decodes each operand into a float32 tensor (a 7168x16384 operand becomes 470 MB, read and
written several times) before a TF32 matmul; a ranked triton_nvfp4 verdict computes it for about 12,000 timed
outputs. This kernel decodes a tile of packed bytes and scale bytes in registers, multiplies them in
float32 and rounds the product to float16, both exact (a product of an e2m1 value and an e4m3 scale has at
most 6 significant bits, its lowest at or above 2^-10 and its magnitude at most 2688, all inside
float16's range), and accumulates ``tl.dot`` in float32: the same exact products and float32 sums as the
TF32 path, in another order (``matmul``'s docstring says why the order does not change the tasks'
results). float16, not bfloat16: equally exact here, and with bfloat16 Triton's interpreter (the CPU tests run it
there) did not reproduce the torch path.
``bench/validate_reference_gpu.py`` compares the two bit for bit on a GPU; tests/test_gpu_gemm.py does on
the CPU under Triton's interpreter.

``matmul.nvfp4_gemm_reference`` imports this module (and Triton) only for inputs on a GPU, uses it where
K is a multiple of ``BLOCK_K`` and M at most ``MAX_ROWS``, and takes its torch path where Triton is missing. It trusts the kernel shape by
shape: the first result for each shape in a process is compared with the torch path's, and a difference
or an error turns the kernel off for the process (``matmul._GpuKernel``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from .fp4 import _e4m3_table, as_uint8

__all__ = ["BLOCK_K", "MAX_ROWS", "Config", "fused_nvfp4_gemm", "launch_for"]

# Up to this many rows of A (every benchmark shape has 128): at 2304 rows the torch path's TF32 matmul was
# faster on an H100 (results/h100_verdicts/reference_gpu_kernel.json), the kernel decoding each tile once
# per column tile.
MAX_ROWS = 512


@triton.jit
def decode_e2m1(byte):
    """The two e2m1 values of each packed byte (low nibble first) as float32 bit patterns built from
    the code: sign, exponent ``e + 126`` and one mantissa bit; code 1 is 0.5, codes 0 and 8 are +-0."""
    lo, hi = byte & 15, byte >> 4
    both = tl.join(lo, hi)
    mag = both & 7
    bits = tl.where(mag < 2, mag * (126 << 23), (((mag >> 1) + 126) << 23) | ((mag & 1) << 22))
    bits = bits | ((both >> 3) << 31)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def load_operand(p_ptr, s_ptr, e4m3_ptr, rows, n_rows, k0, sp_r, sp_k, ss_r, ss_k, R: tl.constexpr, BK: tl.constexpr):
    """Rows ``rows`` (< ``n_rows``), values ``k0 .. k0 + BK`` of one operand, dequantized, as float16."""
    inside = (rows < n_rows)[:, None]
    kb = k0 // 2 + tl.arange(0, BK // 2)
    packed = tl.load(p_ptr + rows[:, None] * sp_r + kb[None, :] * sp_k, mask=inside, other=0).to(tl.int32)
    values = decode_e2m1(packed).reshape(R, BK)
    ks = k0 // 16 + tl.arange(0, BK // 16)
    scale_bytes = tl.load(s_ptr + rows[:, None] * ss_r + ks[None, :] * ss_k, mask=inside, other=0)
    scales = tl.load(e4m3_ptr + scale_bytes.to(tl.int32))
    scales = tl.broadcast_to(scales[:, :, None], (R, BK // 16, 16)).reshape(R, BK)
    return (values * scales).to(tl.float16)


@triton.jit
def nvfp4_gemm(
    a_ptr, b_ptr, sfa_ptr, sfb_ptr, c_ptr, e4m3_ptr, M, N, K, k_split, n_split,
    sa_l, sa_r, sa_k, sb_l, sb_r, sb_k, ssa_l, ssa_r, ssa_k, ssb_l, ssb_r, ssb_k, sc_s, sc_l, sc_m, sc_n,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PARTIAL: tl.constexpr,
):  # fmt: skip
    """C's tile (pm, pn) of batch l over K values ``s * k_split ..`` (program 2 is ``l * n_split + s``):
    float16, or with ``PARTIAL`` the float32 partial sum of split s, summed by the caller."""
    pm, pn, ls = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    l, s = ls // n_split, ls % n_split
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    a_ptr, sfa_ptr = a_ptr + l * sa_l, sfa_ptr + l * ssa_l
    b_ptr, sfb_ptr = b_ptr + l * sb_l, sfb_ptr + l * ssb_l
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(s * k_split, s * k_split + k_split, BK):
        a = load_operand(a_ptr, sfa_ptr, e4m3_ptr, rm, M, k0, sa_r, sa_k, ssa_r, ssa_k, BM, BK)
        b = load_operand(b_ptr, sfb_ptr, e4m3_ptr, rn, N, k0, sb_r, sb_k, ssb_r, ssb_k, BN, BK)
        acc = tl.dot(a, tl.trans(b), acc)
    out = c_ptr + s * sc_s + l * sc_l + rm[:, None] * sc_m + rn[None, :] * sc_n
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    if PARTIAL:
        tl.store(out, acc, mask=mask)
    else:
        tl.store(out, acc.to(tl.float16), mask=mask)


@dataclass(frozen=True)
class Config:
    """A launch of :func:`nvfp4_gemm`: tile sizes, warps, pipeline stages and how many parts K is split
    into (each part's float32 sums are added by ``torch.sum``: the same exact sums in another order)."""

    bm: int
    bn: int
    bk: int
    warps: int
    stages: int
    split: int


def fused_nvfp4_gemm(
    a: torch.Tensor, b: torch.Tensor, sfa: torch.Tensor, sfb: torch.Tensor, config: Config | None = None
) -> torch.Tensor:
    """``matmul.nvfp4_gemm_reference`` (same arguments, same result) in one kernel launch (two with a
    split K). ``config``: the launch, else :func:`launch_for` K."""
    a8, b8, sa8, sb8 = (as_uint8(t) for t in (a, b, sfa, sfb))
    m, kb, nl = a8.shape
    n, k = b8.shape[0], kb * 2
    cfg = config or launch_for(k)
    split = cfg.split if k % (cfg.split * cfg.bk) == 0 else 1
    if split > 1:
        c = torch.empty((split, nl, m, n), dtype=torch.float32, device=a.device)
    else:
        c = torch.empty((nl, m, n), dtype=torch.float16, device=a.device)
    grid = ((m + cfg.bm - 1) // cfg.bm, (n + cfg.bn - 1) // cfg.bn, nl * split)
    strides = (
        *(a8.stride(2), a8.stride(0), a8.stride(1)),
        *(b8.stride(2), b8.stride(0), b8.stride(1)),
        *(sa8.stride(2), sa8.stride(0), sa8.stride(1)),
        *(sb8.stride(2), sb8.stride(0), sb8.stride(1)),
        *(c.stride() if split > 1 else (0, *c.stride())),
    )
    e4m3 = _e4m3_table(a.device)
    nvfp4_gemm[grid](
        *(a8, b8, sa8, sb8, c, e4m3, m, n, k, k // split, split, *strides),
        BM=cfg.bm, BN=cfg.bn, BK=cfg.bk, PARTIAL=split > 1, num_warps=cfg.warps, num_stages=cfg.stages,
    )  # fmt: skip
    if split > 1:
        c = c.sum(0).to(torch.float16)
    return c.permute(1, 2, 0)


# On an H100, a sweep of 96 launches over the three benchmark shapes (bench/lab/reference_configs.py; all
# gave the torch path's bits): from K = 4096 on, 128x128 tiles and K in 4 parts; below it, 128x64 tiles
# and K whole. bench/validate_reference_gpu.py records each path's time on every shape.
LONG_K = Config(bm=128, bn=128, bk=128, warps=8, stages=3, split=4)
SHORT_K = Config(bm=128, bn=64, bk=128, warps=8, stages=3, split=1)
BLOCK_K = 128  # K must be a multiple of it (128 values: 64 packed bytes and 8 scales a row)


def launch_for(k: int) -> Config:
    return LONG_K if k >= 4096 else SHORT_K
