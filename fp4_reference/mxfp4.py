"""MXFP4 quantization ("even" rounding, as AMD's aiter/quark do it) and dequantization.

The quantization (mxfp4_mm's A; docs/tasks/mxfp4_mm.md): per row, per block of 32 consecutive K values, in float32:
amax -> bits = (bits(amax) + 0x200000) & 0xFF800000 -> s = floor(log2(.)) - 2 clamped to
[-127, 127] -> codes = e2m1(x * 2**-s) -> scale byte s + 127.
"""

from __future__ import annotations

import torch

from .fp4 import as_uint8, dequantize_blocks, e8m0_to_float, encode_e2m1, magnitude, pack_fp4

__all__ = ["MX_BLOCK", "dequantize_mxfp4", "mxfp4_scale_exponents", "quantize_mxfp4"]

MX_BLOCK = 32
_ROUND_ADD = 0x200000
_EXP_MASK = -0x800000  # 0xFF800000 as a signed int32: sign + exponent bits


def mxfp4_scale_exponents(amax: torch.Tensor) -> torch.Tensor:
    """Unbiased scale exponents s (int32) for non-negative float32 block maxima.

    Reads floor(log2(rounded amax)) from the exponent field instead of calling log2, so it is
    exact on every device. A zero (or subnormal rounding to zero) amax gives -127; an amax that
    rounds to 2**128 (inf), an inf or a NaN gives 127 (the clamp of log2(inf) - 2).
    """
    bits = amax.to(torch.float32).contiguous().view(torch.int32)
    bits = (bits + _ROUND_ADD) & _EXP_MASK
    exp_field = (bits >> 23) & 0xFF  # 0 means the rounded amax is 0
    # a zero field gives -129, which the clamp makes -127; field 255 (inf, NaN) gets one more: 127
    s = exp_field - 129 + ((exp_field + 1) >> 8)
    return s.clamp(-127, 127)


def _pow2(e: torch.Tensor) -> torch.Tensor:
    """Exact float32 2**e for integer e in [-126, 127] (built from the exponent field)."""
    return ((e + 127).to(torch.int32) << 23).view(torch.float32)


def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize ``x [..., K]`` (K % 32 == 0) to MXFP4.

    Returns ``(packed uint8 [..., K/2], scales uint8 [..., K/32])``; scale byte = s + 127.
    """
    K = x.shape[-1]
    if K % MX_BLOCK:
        raise ValueError(f"quantize_mxfp4 needs K % 32 == 0, got shape {tuple(x.shape)}")
    lead = x.shape[:-1]
    xb = x.to(torch.float32).reshape(*lead, K // MX_BLOCK, MX_BLOCK)
    amax = magnitude(xb).amax(dim=-1)
    s = mxfp4_scale_exponents(amax)
    # Multiply by 2**-s in two exact steps so no factor is a float32 subnormal (-s can be -127).
    minus_s = s * -1  # not -s: a multiply, whose kernel the quantizer loads anyway, rather than neg's
    e1 = minus_s >> 1  # floor(-s / 2)
    e2 = minus_s - e1
    v = xb * _pow2(e1).unsqueeze(-1) * _pow2(e2).unsqueeze(-1)
    codes = encode_e2m1(v).reshape(*lead, K)
    scales = (s + 127).to(torch.uint8)
    return pack_fp4(codes), scales


def dequantize_mxfp4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``packed [..., K/2]`` (uint8/fp4x2) and e8m0 ``scales [..., K/32]`` -> float32 ``[..., K]``.

    Values past float32's range (code 7 with scale byte 254: 6 * 2**127) become inf.
    Extra scale columns (the padding of a shuffled-then-unshuffled scale tensor) are ignored.
    """
    nblk = packed.shape[-1] * 2 // MX_BLOCK
    sc = as_uint8(scales)[..., :nblk]  # extra (padding) columns are ignored
    return dequantize_blocks(packed, e8m0_to_float(sc), MX_BLOCK, "dequantize_mxfp4")
