"""nvfp4_gemm (NVIDIA Blackwell NVFP4 hackathon, 2025): C[:,:,l] = dequant(a) @ dequant(b)^T in fp16.

Contract: the description in task.yml beside this file (docs/tasks/nvfp4_gemm.md). Input tuple ``(a, b, sfa, sfb, sfa_permuted, sfb_permuted, c)``.
"""

from __future__ import annotations

import torch

from fp4_reference import nvfp4_gemm_reference, to_blocked_scales
from tasks._check import check_output, pass_flag

RTOL = 1e-3
ATOL = 1e-3
CASE_KEYS = ("m", "n", "k", "l", "seed")


def _device(device) -> torch.device:
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


def _fp4_operand(rows: int, k: int, l: int, dev, gen) -> torch.Tensor:
    raw = torch.randint(-128, 128, (l, rows, k // 2), dtype=torch.int8, device=dev, generator=gen)
    return raw.view(torch.float4_e2m1fn_x2).permute(1, 2, 0)  # [rows, K/2, L], order (L, rows, K/2)


def _scales(rows: int, k: int, l: int, dev, gen) -> torch.Tensor:
    ints = torch.randint(0, 4, (l, rows, k // 16), dtype=torch.int32, device=dev, generator=gen)
    return ints.to(torch.float8_e4m3fn).permute(1, 2, 0)  # 0..3 exactly, as through float32


def generate_input(m: int, n: int, k: int, l: int, seed: int, device=None, generator=None):
    """``(a, b, sfa, sfb, sfa_permuted, sfb_permuted, c)`` as strided [.., L] views (memory order
    (L, rows, K/2), as task.yml describes).

    Draws a, b, c, sfa, sfb in that order from a private ``torch.Generator`` seeded with ``seed``, or from
    ``generator``, already seeded by the caller (``seed`` then unused: the caller can replay the draws).
    """
    dev = _device(device)
    gen = generator if generator is not None else torch.Generator(device=dev).manual_seed(seed)
    a = _fp4_operand(m, k, l, dev, gen)
    b = _fp4_operand(n, k, l, dev, gen)
    c = torch.randn((l, m, n), dtype=torch.float16, device=dev, generator=gen).permute(1, 2, 0)
    sfa = _scales(m, k, l, dev, gen)
    sfb = _scales(n, k, l, dev, gen)
    return (a, b, sfa, sfb, to_blocked_scales(sfa), to_blocked_scales(sfb), c)


def ref_kernel(data) -> torch.Tensor:
    """A new fp16 ``[M, N, L]`` tensor (memory order (L, M, N)); ``data`` (including ``c``) is untouched."""
    a, b, sfa, sfb, _sfa_p, _sfb_p, _c = data
    return nvfp4_gemm_reference(a, b, sfa, sfb)


def check_implementation(data, output, rtol: float = RTOL, atol: float = ATOL) -> tuple[bool, str]:
    return check_output(output, ref_kernel(data), rtol=rtol, atol=atol)


def check_flag(data, output, rtol: float = RTOL, atol: float = ATOL) -> torch.Tensor | None:
    """check_implementation's verdict as a device flag, not read back (``tasks._check.pass_flag``)."""
    return pass_flag(output, ref_kernel(data), rtol=rtol, atol=atol)


def case_problems(case: dict) -> list[str]:
    """What is wrong with a case's shape, each with its fix ([] if fine)."""
    out = []
    for key in ("m", "n"):
        if case[key] % 128:
            out.append(f"{key}={case[key]} is not a multiple of 128 (128-row scale atoms); use a multiple of 128")
    if case["k"] % 256:
        out.append(
            f"k={case['k']} is not a multiple of 256 (K/16 scales in groups of 4, 64-wide tiles); use a multiple of 256"
        )
    for key in ("m", "n", "k", "l"):
        if case[key] <= 0:
            out.append(f"{key}={case[key]} must be positive")
    return out


def case_bytes(case: dict) -> int:
    """a, b (fp4) + sfa, sfb (e4m3) read, c (fp16) written, for each of the L batches."""
    m, n, k, l = case["m"], case["n"], case["k"], case["l"]
    return l * (m * k // 2 + n * k // 2 + m * k // 16 + n * k // 16 + m * n * 2)


def case_flops(case: dict) -> int:
    return 2 * case["m"] * case["n"] * case["k"] * case["l"]
