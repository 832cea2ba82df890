"""NVFP4 dequantization: e2m1 elements with one float8_e4m3fn scale per 16 consecutive K values."""

from __future__ import annotations

import torch

from .fp4 import as_uint8, dequantize_blocks, e4m3_to_float

__all__ = ["NV_BLOCK", "dequantize_nvfp4"]

NV_BLOCK = 16


def dequantize_nvfp4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``packed [..., R, K/2]`` (uint8/fp4x2) and ``scales [..., R, K/16]`` (uint8/e4m3) -> float32.

    Leading batch dimensions are allowed; strided (non-contiguous) views are fine.
    """
    return dequantize_blocks(packed, e4m3_to_float(as_uint8(scales)), NV_BLOCK, "dequantize_nvfp4")
