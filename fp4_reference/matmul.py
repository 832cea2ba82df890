"""Reference GEMMs of the two tasks: dequantize to float32, float32-accumulated matmul, cast.

Dequantized FP4 values have at most 4 significant bits (an e2m1 value has 2; an e4m3 scale of
0..3 adds at most 2; an e8m0 scale only shifts the exponent), so TF32 tensor cores (10-bit
mantissa) hold them exactly: their products are exact and accumulate in fp32, like an IEEE fp32
matmul but several times faster on a GPU. Only the summation order differs.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import warnings
from types import ModuleType

import torch

from .fp4 import as_uint8
from .mxfp4 import dequantize_mxfp4, quantize_mxfp4
from .nvfp4 import dequantize_nvfp4

__all__ = ["fp4_exact_matmul", "mxfp4_mm_reference", "nvfp4_gemm_reference"]


@contextlib.contextmanager
def fp4_exact_matmul():
    """Allow TF32 for float32 matmuls of dequantized FP4 values (exact, see the module docstring),
    restoring the setting after."""
    mm = torch.backends.cuda.matmul
    old = mm.allow_tf32
    mm.allow_tf32 = True
    try:
        yield
    finally:
        mm.allow_tf32 = old


def mxfp4_mm_reference(a: torch.Tensor, b_q: torch.Tensor, b_scales: torch.Tensor) -> torch.Tensor:
    """``C = dequant(quant_mxfp4(A)) @ dequant(B_q)^T`` as bf16 ``[M, N]``.

    ``a``: ``[M, K]`` (bf16); ``b_q``: packed ``[N, K/2]`` (uint8/fp4x2); ``b_scales``: UNshuffled e8m0
    scales ``[N, K/32]`` (extra padded rows/columns are ignored).
    """
    _m, k = a.shape
    n = b_q.shape[0]
    a_q, a_s = quantize_mxfp4(a)
    a_f = dequantize_mxfp4(a_q, a_s)
    b_f = dequantize_mxfp4(b_q, as_uint8(b_scales)[:n])
    if b_f.shape != (n, k):
        raise ValueError(f"mxfp4_mm_reference: A is {tuple(a.shape)} but B_q unpacks to {tuple(b_f.shape)}")
    with fp4_exact_matmul():
        return (a_f @ b_f.T).to(torch.bfloat16)


class _GpuKernel:
    """The nvfp4 reference's GPU kernel (``gpu_gemm``), trusted shape by shape: its first result for each
    shape in this process is compared with the torch path's, bit for bit, and only a match lets the
    kernel answer that shape alone from then on. A mismatch, or any error (a GPU or Triton version it was
    never run on), turns it off for the process with a warning, and the torch path answers: a kernel bug
    costs speed, never a wrong verdict."""

    def __init__(self) -> None:
        self.checked: set[tuple] = set()
        self.off: str | None = None

    @functools.cached_property
    def module(self) -> ModuleType | None:
        """``gpu_gemm`` (which imports Triton), or None where Triton is missing."""
        try:
            return importlib.import_module(f"{__package__}.gpu_gemm")
        except ImportError:
            return None

    def applies(self, a: torch.Tensor) -> bool:
        return (
            self.off is None
            and a.device.type == "cuda"
            and self.module is not None
            and (a.shape[1] * 2) % self.module.BLOCK_K == 0
            and a.shape[0] <= self.module.MAX_ROWS
        )

    def gemm(self, a: torch.Tensor, b: torch.Tensor, sfa: torch.Tensor, sfb: torch.Tensor) -> torch.Tensor:
        key, module = (str(a.device), tuple(a.shape), tuple(b.shape)), self.module
        assert module is not None  # applies() said so
        try:
            out = module.fused_nvfp4_gemm(a, b, sfa, sfb)
        except Exception as exc:  # any failure: the torch path answers
            return self._turn_off(f"it failed ({type(exc).__name__}: {exc})", a, b, sfa, sfb)
        if key in self.checked:
            return out
        want = _nvfp4_gemm_torch(a, b, sfa, sfb)
        if not torch.equal(out.view(torch.int16), want.view(torch.int16)):
            return self._turn_off(f"its result for a {a.shape[0]}x{b.shape[0]} GEMM differed", a, b, sfa, sfb)
        self.checked.add(key)
        return out

    def _turn_off(self, why: str, *operands: torch.Tensor) -> torch.Tensor:
        self.off = why
        warnings.warn(
            f"the nvfp4 reference's GPU kernel is off for this process: {why}; the torch path (slower, the "
            "same values) computes the reference instead",
            RuntimeWarning,
            stacklevel=3,
        )
        return _nvfp4_gemm_torch(*operands)


_GPU_KERNEL = _GpuKernel()


def nvfp4_gemm_reference(
    a: torch.Tensor, b: torch.Tensor, sfa: torch.Tensor, sfb: torch.Tensor, fused: bool = True
) -> torch.Tensor:
    """``C[:, :, l] = dequant(a[:, :, l]) @ dequant(b[:, :, l])^T`` as fp16 ``[M, N, L]``.

    ``a [M, K/2, L]``, ``b [N, K/2, L]`` (fp4x2/uint8), ``sfa [M, K/16, L]``, ``sfb [N, K/16, L]``
    (e4m3/uint8); strided views are fine. The result is a new tensor with memory order (L, M, N).
    On a GPU, one Triton kernel computes it (``gpu_gemm``: the same values, no float32 copies; checked
    against the torch path once per shape, :class:`_GpuKernel`); ``fused=False`` forces the torch path.
    """
    if fused and _GPU_KERNEL.applies(a):
        return _GPU_KERNEL.gemm(a, b, sfa, sfb)
    return _nvfp4_gemm_torch(a, b, sfa, sfb)


def _nvfp4_gemm_torch(a: torch.Tensor, b: torch.Tensor, sfa: torch.Tensor, sfb: torch.Tensor) -> torch.Tensor:
    a_f = dequantize_nvfp4(a.permute(2, 0, 1), sfa.permute(2, 0, 1))  # [L, M, K]
    b_f = dequantize_nvfp4(b.permute(2, 0, 1), sfb.permute(2, 0, 1))  # [L, N, K]
    with fp4_exact_matmul():
        c = torch.matmul(a_f, b_f.transpose(1, 2))  # [L, M, N]
    return c.to(torch.float16).permute(1, 2, 0)
