# name: torch nvfp4 (portable)
# task: nvfp4_gemm
"""nvfp4_gemm in plain torch: the readable reference, and a starting point (runs on CPU, CUDA and ROCm).

Data path: the packed e2m1 values of a and b are decoded by a lookup table and multiplied by their e4m3
block scales (one per 16 elements), in fp32; one batched matmul over l, written as fp16 into the output
buffer ``c`` that the task provides (data[6]).

What it shows: the task's contract (the input tuple, the layouts, writing into ``c``) in about 30 lines,
with no kernel of its own. Simple and slow on purpose: see triton_nvfp4.py for a fast one.

Speed: 873.02 us (geometric mean, test+benchmark mode on the H200; results/h200_examples.json), against
24.64 us for triton_nvfp4 ranked.
"""

import torch

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


_TABLES = {}


def _table(device) -> torch.Tensor:
    """The e2m1 value table on ``device``, made once (a constant, so a CUDA graph can capture calls)."""
    if device not in _TABLES:
        _TABLES[device] = torch.tensor(_E2M1, device=device)
    return _TABLES[device]


def _decode(x: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """x: [R, K/2, L] fp4x2, sf: [R, K/16, L] e4m3 -> fp32 [L, R, K]."""
    raw = x.view(torch.uint8).permute(2, 0, 1)
    codes = torch.stack((raw & 0xF, raw >> 4), dim=-1).flatten(-2).long()
    values = _table(x.device)[codes]
    scales = sf.permute(2, 0, 1).float().repeat_interleave(16, dim=-1)
    return values * scales


def custom_kernel(data):
    a, b, sfa, sfb, _sfa_permuted, _sfb_permuted, c = data
    out = torch.bmm(_decode(a, sfa), _decode(b, sfb).transpose(1, 2))  # [L, M, N]
    c.copy_(out.permute(1, 2, 0))
    return c
