# name: torch mxfp4 (portable)
# task: mxfp4_mm
"""A plain-torch mxfp4_mm that runs anywhere torch does (CPU, CUDA, ROCm).

Quantizes A to MXFP4 ("even" rounding), decodes B from B_q and the shuffled e8m0 scales,
and multiplies in fp32. Simple and slow on purpose: a starting point, not a fast kernel.
"""
import torch

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
# Boundaries between consecutive e2m1 magnitudes, and whether a tie there rounds up (to the even code).
_BOUNDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
_TIE_UP = (False, True, False, True, False, True, False)


_TABLES = {}


def _table(device) -> torch.Tensor:
    """The e2m1 value table on ``device``, made once (a constant, so a CUDA graph can capture calls)."""
    if device not in _TABLES:
        _TABLES[device] = torch.tensor(_E2M1, device=device)
    return _TABLES[device]


def _quant_dequant_a(a: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    x = a.float().reshape(m, k // 32, 32)
    amax = x.abs().amax(dim=-1, keepdim=True)
    bits = (amax.view(torch.int32) + 0x200000) & 0x7F800000
    exp = ((bits >> 23) - 127).clamp(min=-127)            # floor(log2(rounded amax)); 0 -> -127
    s = (exp - 2).clamp(-127, 127)
    s = torch.where(amax == 0, torch.full_like(s, -127), s)
    scaled = (x * torch.exp2(-s.float())).abs()
    code = torch.zeros_like(scaled, dtype=torch.int32)
    for bound, tie_up in zip(_BOUNDS, _TIE_UP):
        code += (scaled >= bound) if tie_up else (scaled > bound)
    mag = _table(a.device)[:8][code]
    return (torch.copysign(mag, x) * torch.exp2(s.float())).reshape(m, k)


def _unshuffle_scales(sh: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    r, c = sh.shape
    t = sh.view(torch.uint8).reshape(r // 32, c // 8, 4, 16, 2, 2)   # permuted order (0, 3, 5, 2, 4, 1)
    return t.permute(0, 5, 3, 1, 4, 2).reshape(r, c)[:rows, :cols]


def _decode_b(b_q: torch.Tensor, scale_sh: torch.Tensor) -> torch.Tensor:
    n, half_k = b_q.shape
    k = 2 * half_k
    raw = b_q.view(torch.uint8)
    codes = torch.stack((raw & 0xF, raw >> 4), dim=-1).reshape(n, k).long()
    values = _table(b_q.device)[codes]
    scales = _unshuffle_scales(scale_sh, n, k // 32).float()
    factor = torch.exp2(scales - 127).repeat_interleave(32, dim=1)
    return values * factor


def custom_kernel(data):
    a, _b, b_q, _b_shuffle, b_scale_sh = data
    out = _quant_dequant_a(a) @ _decode_b(b_q, b_scale_sh).T
    return out.to(torch.bfloat16)
