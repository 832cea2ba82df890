"""Memory layouts the kernels consume (the task inputs: docs/tasks/mxfp4_mm.md and
docs/tasks/nvfp4_gemm.md).

- ``shuffle_weight``: AMD "(16,16) tile coalesced" pre-shuffle of packed FP4 weights.
- ``shuffle_scales_e8m0``: AMD e8m0_shuffle of MXFP4 scales (padded to 256 x 8 multiples).
- ``to_blocked_scales``: NVIDIA's blocked scale-factor layout for NVFP4 (128 x 4 atoms).
Each has an exact inverse. All work on the uint8 view and return the input's byte dtype.
"""

from __future__ import annotations

import torch

from .fp4 import as_uint8

__all__ = [
    "from_blocked_scales",
    "shuffle_scales_e8m0",
    "shuffle_weight",
    "to_blocked_scales",
    "unshuffle_scales_e8m0",
    "unshuffle_weight",
]


def _ceil_to(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def _like(u8: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    return u8 if ref.dtype == torch.uint8 else u8.view(ref.dtype)


def shuffle_weight(b_q: torch.Tensor) -> torch.Tensor:
    """``[N, K/2]`` packed FP4 -> same shape, each 16-row x 32-byte tile stored as two 16x16 halves.

    View ``[N/16, 16, (K/2)/32, 2, 16]`` -> permute to ``[N/16, (K/2)/32, 2, 16, 16]``.
    Needs N % 16 == 0 and (K/2) % 32 == 0.
    """
    u = as_uint8(b_q)
    n, kb = u.shape
    if n % 16 or kb % 32:
        raise ValueError(f"shuffle_weight needs N % 16 == 0 and (K/2) % 32 == 0, got {tuple(u.shape)}")
    t = u.reshape(n // 16, 16, kb // 32, 2, 16).permute(0, 2, 3, 1, 4).contiguous()
    return _like(t.view(n, kb), b_q)


def unshuffle_weight(b_shuffled: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`shuffle_weight`."""
    u = as_uint8(b_shuffled)
    n, kb = u.shape
    if n % 16 or kb % 32:
        raise ValueError(f"unshuffle_weight needs N % 16 == 0 and (K/2) % 32 == 0, got {tuple(u.shape)}")
    t = u.reshape(n // 16, kb // 32, 2, 16, 16).permute(0, 3, 1, 2, 4).contiguous()
    return _like(t.view(n, kb), b_shuffled)


def shuffle_scales_e8m0(scales: torch.Tensor, pad_value: int = 0) -> torch.Tensor:
    """``[R, C]`` e8m0 scales -> ``[R', C']`` (R' = R up to a multiple of 256, C' = C up to 8).

    View the padded tensor as ``[R'/32, 2, 16, C'/8, 2, 4]`` and permute dims (0, 3, 5, 2, 4, 1).
    Padding bytes are ``pad_value``; a correct kernel never reads them.
    """
    u = as_uint8(scales)
    r, c = u.shape
    rp, cp = _ceil_to(r, 256), _ceil_to(c, 8)
    padded = torch.full((rp, cp), pad_value, dtype=torch.uint8, device=u.device)
    padded[:r, :c] = u
    t = padded.view(rp // 32, 2, 16, cp // 8, 2, 4).permute(0, 3, 5, 2, 4, 1).contiguous()
    return _like(t.view(rp, cp), scales)


def unshuffle_scales_e8m0(shuffled: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Inverse of :func:`shuffle_scales_e8m0`, cropped back to ``[rows, cols]`` (contiguous)."""
    u = as_uint8(shuffled)
    rp, cp = u.shape
    if rp % 32 or cp % 8 or rows > rp or cols > cp:
        raise ValueError(
            f"unshuffle_scales_e8m0: shuffled shape {tuple(u.shape)} cannot hold "
            f"[{rows}, {cols}] (needs rows multiple of 32, cols multiple of 8)"
        )
    # shuffled dims are (r32, c8, c4, r16, c2, r2); put them back to (r32, r2, r16, c8, c2, c4)
    t = u.reshape(rp // 32, cp // 8, 4, 16, 2, 2).permute(0, 5, 3, 1, 4, 2).reshape(rp, cp)
    return _like(t[:rows, :cols].contiguous(), shuffled)


def to_blocked_scales(sf: torch.Tensor) -> torch.Tensor:
    """``sf [MN, SK, L]`` -> blocked ``[32, 4, rest_m, 4, rest_k, L]``, memory order
    ``(L, rest_m, rest_k, 32, 4, 4)``; ``out[i32, i4, rm, j4, rk, l] = sf[rm*128 + i4*32 + i32, rk*4 + j4, l]``.

    rest_m = ceil(MN/128), rest_k = ceil(SK/4); rows/columns past the end are zero-filled.
    """
    u = as_uint8(sf)
    mn, sk, nl = u.shape
    rm, rk = _ceil_to(mn, 128) // 128, _ceil_to(sk, 4) // 4
    buf = u.permute(2, 0, 1)
    if (rm * 128, rk * 4) != (mn, sk) or not buf.is_contiguous():  # padded, or another memory order: a copy
        buf = torch.zeros((nl, rm * 128, rk * 4), dtype=torch.uint8, device=u.device)
        buf[:, :mn, :sk] = u.permute(2, 0, 1)
    # (L, rm, i4, i32, rk, j4) -> (L, rm, rk, i32, i4, j4): the storage order
    store = buf.view(nl, rm, 4, 32, rk, 4).permute(0, 1, 4, 3, 2, 5).contiguous()
    return _like(store.permute(3, 4, 1, 5, 2, 0), sf)


def from_blocked_scales(blocked: torch.Tensor, mn: int | None = None, sk: int | None = None) -> torch.Tensor:
    """Inverse of :func:`to_blocked_scales`: ``[32, 4, rest_m, 4, rest_k, L]`` -> ``[MN, SK, L]``
    with memory order (L, MN, SK). ``mn``/``sk`` crop the padding (default: no crop)."""
    u = as_uint8(blocked)
    _, _, rm, _, rk, nl = u.shape
    mn = rm * 128 if mn is None else mn
    sk = rk * 4 if sk is None else sk
    # (i32, i4, rm, j4, rk, L) -> (L, rm, i4, i32, rk, j4)
    t = u.permute(5, 2, 1, 0, 4, 3).reshape(nl, rm * 128, rk * 4)[:, :mn, :sk].contiguous()
    return _like(t.permute(1, 2, 0), blocked)
