"""NVFP4 dequantization: e2m1 elements with one float8_e4m3fn scale per 16 consecutive K values."""
from __future__ import annotations

import torch

from .fp4 import as_uint8, decode_fp4_packed, e4m3_to_float

__all__ = ["NV_BLOCK", "dequantize_nvfp4"]

NV_BLOCK = 16


def dequantize_nvfp4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``packed [..., R, K/2]`` (uint8/fp4x2) and ``scales [..., R, K/16]`` (uint8/e4m3) -> float32.

    Leading batch dimensions are allowed; strided (non-contiguous) views are fine.
    """
    lead, K = tuple(packed.shape[:-1]), packed.shape[-1] * 2
    nblk = K // NV_BLOCK
    sc = as_uint8(scales)
    if K % NV_BLOCK or tuple(sc.shape) != lead + (nblk,):
        raise ValueError(
            f"dequantize_nvfp4: packed {tuple(packed.shape)} needs scales of shape "
            f"{lead + (nblk,)} (one per 16 values), got {tuple(scales.shape)}")
    vals = decode_fp4_packed(packed).view(*lead, nblk, NV_BLOCK)
    return vals.mul_(e4m3_to_float(sc).unsqueeze(-1)).view(*lead, K)
