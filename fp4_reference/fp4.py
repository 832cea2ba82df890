"""FP4 (e2m1) element codec, nibble packing, and byte views of torch's low-precision dtypes.

Formats (both tasks use them; docs/tasks/mxfp4_mm.md, docs/tasks/nvfp4_gemm.md):
- e2m1: sign in bit 3, magnitudes by code 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6; code 8 is -0.
- packing: element 2i in the LOW nibble, element 2i+1 in the HIGH nibble of byte i.
- e8m0: one unsigned byte e, value 2**(e - 127); e = 255 is NaN.

Everything here is pure torch, vectorized, and gives the same bits on every device. The lookup tables
are built once per device and kept (read only): built on every call, each took a copy from the host and
a few small kernels, several per reference GEMM, which the harness computes for every timed output.
"""

from __future__ import annotations

import functools

import torch

__all__ = [
    "E2M1_VALUES",
    "as_uint8",
    "decode_e2m1",
    "decode_fp4_packed",
    "dequantize_blocks",
    "e4m3_to_float",
    "e8m0_to_float",
    "encode_e2m1",
    "from_uint8",
    "magnitude",
    "pack_fp4",
    "unpack_fp4",
]

# Magnitudes of codes 0..7; codes 8..15 carry the same magnitudes with the sign bit set.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

# Midpoints between neighbouring magnitudes, split by where an exact tie goes under
# round-to-nearest-even on the code: a tie at these rounds DOWN to the even code ...
_TIES_DOWN = (0.25, 1.25, 2.5, 5.0)  # 0.25->0, 1.25->1.0, 2.5->2.0, 5.0->4.0
# ... and a tie at these rounds UP to the even code.
_TIES_UP = (0.75, 1.75, 3.5)  # 0.75->1.0, 1.75->2.0, 3.5->4.0

_BYTE_DTYPES = tuple(
    getattr(torch, name)
    for name in ("float4_e2m1fn_x2", "float8_e8m0fnu", "float8_e4m3fn", "int8")
    if hasattr(torch, name)
)


@functools.cache
def _ties(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.tensor(_TIES_DOWN, dtype=torch.float32, device=device),
        torch.tensor(_TIES_UP, dtype=torch.float32, device=device),
    )


@functools.cache
def _e2m1_table(device: torch.device) -> torch.Tensor:
    """float32 value of each code 0..15."""
    mags = list(E2M1_VALUES)
    return torch.tensor(mags + [-m for m in mags], dtype=torch.float32, device=device)


@functools.cache
def _pair_table(device: torch.device) -> torch.Tensor:
    """float32 ``[256, 2]``: the two values (low nibble, high nibble) of each packed byte."""
    byte = torch.arange(256, device=device)
    return torch.stack((decode_e2m1(byte & 0xF), decode_e2m1(byte >> 4)), dim=-1)


@functools.cache
def _e8m0_table(device: torch.device) -> torch.Tensor:
    lut = torch.exp2(torch.arange(256, dtype=torch.float64) - 127.0)
    lut[255] = float("nan")
    return lut.to(torch.float32).to(device)


@functools.cache
def _e4m3_table(device: torch.device) -> torch.Tensor:
    return torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).to(torch.float32).to(device)


def magnitude(v: torch.Tensor) -> torch.Tensor:
    """``abs`` of float32 ``v`` by clearing the sign bit (the same bits, NaNs included), with an integer
    op the quantizer runs anyway: a fresh worker loads each distinct GPU kernel on its first use."""
    return (v.view(torch.int32) & 0x7FFFFFFF).view(torch.float32)


def encode_e2m1(v: torch.Tensor) -> torch.Tensor:
    """Round float values to e2m1 codes (uint8 in 0..15), ties to even, saturating at +-6.

    The sign bit is kept for every input, so -0.1 and -0.0 both give code 8 (-0).
    """
    v = v.float()
    mag = magnitude(v)
    down, up = _ties(v.device)
    # count of tie-down midpoints strictly below |v| + count of tie-up midpoints at or below |v|
    code = torch.bucketize(mag, down, right=False) + torch.bucketize(mag, up, right=True)
    code = code.to(torch.uint8)
    return code | (torch.signbit(v).to(torch.uint8) << 3)


def decode_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """Map e2m1 codes (any integer dtype, values 0..15) to float32 values (code 8 gives -0.0)."""
    return _e2m1_table(codes.device)[codes.to(torch.long) & 0xF]


def decode_fp4_packed(packed: torch.Tensor) -> torch.Tensor:
    """Packed bytes ``[..., K/2]`` (uint8/fp4x2) -> float32 values ``[..., K]`` in one gather.

    Same result as ``decode_e2m1(unpack_fp4(packed))``, through a 256-entry table of value pairs.
    """
    p = as_uint8(packed)
    vals = _pair_table(p.device).index_select(0, p.reshape(-1).to(torch.int32))
    return vals.view(*p.shape[:-1], p.shape[-1] * 2)


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """Pack codes ``[..., K]`` (K even) into uint8 ``[..., K/2]``: element 2i low nibble, 2i+1 high."""
    if codes.shape[-1] % 2:
        raise ValueError(f"pack_fp4 needs an even last dimension, got shape {tuple(codes.shape)}")
    c = codes.to(torch.uint8) & 0xF
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_fp4(packed: torch.Tensor) -> torch.Tensor:
    """Unpack ``[..., K/2]`` bytes (uint8 or float4_e2m1fn_x2) into uint8 codes ``[..., K]``."""
    p = as_uint8(packed)
    lo = p & 0xF
    hi = p >> 4
    return torch.stack((lo, hi), dim=-1).reshape(*p.shape[:-1], p.shape[-1] * 2)


def as_uint8(t: torch.Tensor) -> torch.Tensor:
    """A uint8 view (same storage, shape and strides) of a one-byte tensor.

    Accepts uint8, int8, float4_e2m1fn_x2, float8_e8m0fnu and float8_e4m3fn.
    """
    if t.dtype == torch.uint8:
        return t
    if t.dtype in _BYTE_DTYPES:
        return t.view(torch.uint8)
    raise TypeError(f"as_uint8 expects a one-byte dtype (uint8, int8, fp4x2, fp8), got {t.dtype}")


def from_uint8(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """View a uint8 tensor as another one-byte dtype (e.g. torch.float4_e2m1fn_x2)."""
    if t.dtype != torch.uint8:
        raise TypeError(f"from_uint8 expects a uint8 tensor, got {t.dtype}")
    return t if dtype == torch.uint8 else t.view(dtype)


def e8m0_to_float(scales: torch.Tensor) -> torch.Tensor:
    """e8m0 scale bytes (uint8 or float8_e8m0fnu) -> float32 ``2**(e-127)``; byte 255 is NaN.

    Byte 0 gives 2**-127, a float32 subnormal, represented exactly.
    """
    s = as_uint8(scales)
    return _e8m0_table(s.device)[s.to(torch.long)]


def e4m3_to_float(scales: torch.Tensor) -> torch.Tensor:
    """float8_e4m3fn scale bytes (uint8 or float8_e4m3fn) -> float32 (exact; 0x7F/0xFF are NaN)."""
    s = as_uint8(scales)
    return _e4m3_table(s.device)[s.to(torch.long)]


def dequantize_blocks(packed: torch.Tensor, scale_values: torch.Tensor, block: int, what: str) -> torch.Tensor:
    """``packed [..., K/2]`` e2m1 pairs times one float32 scale per ``block`` values
    (``scale_values [..., K/block]``) -> float32 ``[..., K]``; ``what`` names the caller in errors."""
    lead, K = tuple(packed.shape[:-1]), packed.shape[-1] * 2
    nblk = K // block
    if K % block or tuple(scale_values.shape) != (*lead, nblk):
        raise ValueError(
            f"{what}: packed {tuple(packed.shape)} needs scales of shape {(*lead, nblk)} "
            f"(one per {block} values), got {tuple(scale_values.shape)}"
        )
    vals = decode_fp4_packed(packed).view(*lead, nblk, block)
    return vals.mul_(scale_values.unsqueeze(-1)).view(*lead, K)
