"""Portable FP4 reference numerics (pure torch; no harness or task imports).

Modules: ``fp4`` (e2m1 codec, packing, byte views), ``mxfp4`` (quantize/dequantize, e8m0 scales),
``nvfp4`` (dequantize, e4m3 scales), ``layouts`` (weight/scale shuffles), ``matmul`` (task GEMMs),
and ``gpu_gemm``, the one exception to pure torch: the nvfp4 reference GEMM as a Triton kernel, which
``matmul`` imports only for inputs on a GPU (the same bits as its torch path).
"""

from .fp4 import (
    E2M1_VALUES,
    as_uint8,
    decode_e2m1,
    decode_fp4_packed,
    e4m3_to_float,
    e8m0_to_float,
    encode_e2m1,
    from_uint8,
    pack_fp4,
    unpack_fp4,
)
from .layouts import (
    from_blocked_scales,
    shuffle_scales_e8m0,
    shuffle_weight,
    to_blocked_scales,
    unshuffle_scales_e8m0,
    unshuffle_weight,
)
from .matmul import fp4_exact_matmul, mxfp4_mm_reference, nvfp4_gemm_reference
from .mxfp4 import MX_BLOCK, dequantize_mxfp4, mxfp4_scale_exponents, quantize_mxfp4
from .nvfp4 import NV_BLOCK, dequantize_nvfp4

__all__ = [
    "E2M1_VALUES",
    "MX_BLOCK",
    "NV_BLOCK",
    "as_uint8",
    "decode_e2m1",
    "decode_fp4_packed",
    "dequantize_mxfp4",
    "dequantize_nvfp4",
    "e4m3_to_float",
    "e8m0_to_float",
    "encode_e2m1",
    "fp4_exact_matmul",
    "from_blocked_scales",
    "from_uint8",
    "mxfp4_mm_reference",
    "mxfp4_scale_exponents",
    "nvfp4_gemm_reference",
    "pack_fp4",
    "quantize_mxfp4",
    "shuffle_scales_e8m0",
    "shuffle_weight",
    "to_blocked_scales",
    "unpack_fp4",
    "unshuffle_scales_e8m0",
    "unshuffle_weight",
]
