"""NVFP4 dequantization: e2m1 elements with one float8_e4m3fn scale per 16 consecutive K values."""
from __future__ import annotations

import torch

from .fp4 import as_uint8, decode_e2m1, e4m3_to_float, unpack_fp4

__all__ = ["NV_BLOCK", "dequantize_nvfp4"]

NV_BLOCK = 16


def dequantize_nvfp4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``packed [..., R, K/2]`` (uint8/fp4x2) and ``scales [..., R, K/16]`` (uint8/e4m3) -> float32.

    Leading batch dimensions are allowed; strided (non-contiguous) views are fine.
    """
    codes = unpack_fp4(packed)
    K = codes.shape[-1]
    nblk = K // NV_BLOCK
    sc = as_uint8(scales)
    if K % NV_BLOCK or sc.shape[-1] != nblk or sc.shape[:-1] != codes.shape[:-1]:
        raise ValueError(
            f"dequantize_nvfp4: packed {tuple(packed.shape)} needs scales of shape "
            f"{tuple(codes.shape[:-1]) + (nblk,)} (one per 16 values), got {tuple(scales.shape)}")
    vals = decode_e2m1(codes).reshape(*codes.shape[:-1], nblk, NV_BLOCK)
    return (vals * e4m3_to_float(sc).unsqueeze(-1)).reshape(*codes.shape[:-1], K)
