"""mxfp4_mm (AMD Developer Challenge, Feb 2026): C = dequant(mxfp4(A)) @ dequant(B_q)^T in bf16.

Contract: the description in task.yml beside this file (docs/tasks/mxfp4_mm.md). Input tuple ``(A, B, B_q, B_shuffle, B_scale_sh)``.
"""

from __future__ import annotations

import torch

from fp4_reference import mxfp4_mm_reference, quantize_mxfp4, shuffle_scales_e8m0, shuffle_weight, unshuffle_scales_e8m0
from tasks._check import check_output, pass_flag

RTOL = 1e-2
ATOL = 1e-2
CASE_KEYS = ("m", "n", "k", "seed")


def _device(device) -> torch.device:
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


def generate_input(m: int, n: int, k: int, seed: int, device=None, generator=None):
    """``(A bf16 [m,k], B bf16 [n,k], B_q fp4x2 [n,k/2], B_shuffle fp4x2 [n,k/2], B_scale_sh e8m0 [n',k/32'])``.

    Draws A then B from a private ``torch.Generator`` on ``device`` seeded with ``seed``, or from
    ``generator``, already seeded by the caller (``seed`` then unused: the caller can replay the draws).
    """
    dev = _device(device)
    gen = generator if generator is not None else torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn((m, k), dtype=torch.bfloat16, device=dev, generator=gen)
    b = torch.randn((n, k), dtype=torch.bfloat16, device=dev, generator=gen)
    b_q, b_scales = quantize_mxfp4(b)
    b_shuffle = shuffle_weight(b_q)
    b_scale_sh = shuffle_scales_e8m0(b_scales)
    fp4 = torch.float4_e2m1fn_x2
    return (a, b, b_q.view(fp4), b_shuffle.view(fp4), b_scale_sh.view(torch.float8_e8m0fnu))


def ref_kernel(data) -> torch.Tensor:
    """bf16 ``[M, N]`` from ``A``, ``B_q`` and the unshuffled ``B_scale_sh`` (``data`` is not modified)."""
    a, _b, b_q, _b_shuffle, b_scale_sh = data
    n, k = b_q.shape[0], a.shape[1]
    b_scales = unshuffle_scales_e8m0(b_scale_sh, n, k // 32)
    return mxfp4_mm_reference(a, b_q, b_scales)


def check_implementation(data, output, rtol: float = RTOL, atol: float = ATOL) -> tuple[bool, str]:
    return check_output(output, ref_kernel(data), rtol=rtol, atol=atol)


def check_flag(data, output, rtol: float = RTOL, atol: float = ATOL) -> torch.Tensor | None:
    """check_implementation's verdict as a device flag, not read back (``tasks._check.pass_flag``)."""
    return pass_flag(output, ref_kernel(data), rtol=rtol, atol=atol)


def case_problems(case: dict) -> list[str]:
    """What is wrong with a case's shape, each with its fix ([] if fine)."""
    out = []
    if case["k"] % 64:
        out.append(
            f"k={case['k']} is not a multiple of 64 (the weight shuffle needs K/2 % 32 == 0); use a multiple of 64"
        )
    if case["n"] % 16:
        out.append(f"n={case['n']} is not a multiple of 16 (16-row shuffle tiles); use a multiple of 16")
    for key in ("m", "n", "k"):
        if case[key] <= 0:
            out.append(f"{key}={case[key]} must be positive")
    return out


def case_bytes(case: dict) -> int:
    """A read (bf16) + B_q (fp4) + B scales (e8m0) + C written (bf16)."""
    m, n, k = case["m"], case["n"], case["k"]
    return m * k * 2 + n * k // 2 + n * k // 32 + m * n * 2


def case_flops(case: dict) -> int:
    return 2 * case["m"] * case["n"] * case["k"]
