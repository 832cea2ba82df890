# name: torch mxfp4 (portable)
# task: mxfp4_mm
"""mxfp4_mm in plain torch: the readable reference, and a starting point (runs on CPU, CUDA and ROCm).

Data path: A (bf16) is quantized to MXFP4 (e2m1 values, an e8m0 scale per 32 elements, aiter's "even"
rounding) and dequantized again; B is decoded from B_q and the SHUFFLED e8m0 scales (B_scale_sh, put back
in row order by a reshape and permute); the two are multiplied in fp32, then rounded to bf16.

What it shows: the task's contract (the input tuple, the layouts, what the output must equal) in about
60 lines, with no kernel of its own. Simple and slow on purpose: see triton_mxfp4.py for a fast one.

Speed: 148.68 us (geometric mean, test+benchmark mode on the H200; results/h200_examples.json), against
10.65 us for triton_mxfp4 ranked.
"""

import torch

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
# Boundaries between consecutive e2m1 magnitudes. A tie rounds to the even code: down at 0.25, 1.25,
# 2.5 and 5.0, up at 0.75, 1.75 and 3.5 ("x >= b" there, which is "x > the float just below b").
_BOUNDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)
_TIE_UP = (False, True, False, True, False, True, False)

_TABLES = {}


def _tables(device) -> dict:
    """Lookup tables on ``device``, made once (constants, so a CUDA graph can capture calls): every
    fp4x2 byte's two values, every e8m0 byte's power of two, the rounding boundaries."""
    if device not in _TABLES:
        e2m1 = torch.tensor(_E2M1)
        byte = torch.arange(256)
        bounds = torch.tensor(_BOUNDS)
        below = torch.nextafter(bounds, torch.zeros(()))
        _TABLES[device] = {
            "e2m1": e2m1.to(device),
            "fp4x2": torch.stack((e2m1[byte & 0xF], e2m1[byte >> 4]), dim=-1).to(device),  # low nibble first
            "e8m0": torch.exp2(byte.float() - 127).to(device),
            "bounds": torch.where(torch.tensor(_TIE_UP), below, bounds).to(device),
        }
    return _TABLES[device]


def _quant_dequant_a(a: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    t = _tables(a.device)
    x = a.float().reshape(m, k // 32, 32)
    ax = x.abs()
    amax = ax.amax(dim=-1, keepdim=True)
    bits = (amax.view(torch.int32) + 0x200000) & 0x7F800000  # amax rounded up to its binade
    s = ((bits >> 23) - 129).clamp(-127, 127).float()  # floor(log2(rounded amax)) - 2; amax 0 -> -127
    code = torch.bucketize(ax * torch.exp2(-s), t["bounds"])  # e2m1 magnitude code, ties to even
    return (torch.copysign(t["e2m1"][code], x) * torch.exp2(s)).reshape(m, k)


def _unshuffle_scales(sh: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    r, c = sh.shape
    t = sh.view(torch.uint8).reshape(r // 32, c // 8, 4, 16, 2, 2)  # permuted order (0, 3, 5, 2, 4, 1)
    return t.permute(0, 5, 3, 1, 4, 2).reshape(r, c)[:rows, :cols]


def _decode_b(b_q: torch.Tensor, scale_sh: torch.Tensor) -> torch.Tensor:
    n, half_k = b_q.shape
    t = _tables(b_q.device)
    values = t["fp4x2"][b_q.view(torch.uint8).long()].reshape(n, half_k // 16, 32)
    scales = t["e8m0"][_unshuffle_scales(scale_sh, n, half_k // 16).long()]
    return (values * scales.unsqueeze(-1)).reshape(n, 2 * half_k)


def custom_kernel(data):
    a, _b, b_q, _b_shuffle, b_scale_sh = data
    out = _quant_dequant_a(a) @ _decode_b(b_q, b_scale_sh).T
    return out.to(torch.bfloat16)
