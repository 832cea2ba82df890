"""Lab probe (not a product benchmark): would one gather from a table of (scale byte, packed byte) value
pairs make the nvfp4 reference's dequantization cheaper on a GPU? Today's path
(``fp4_reference.dequantize_nvfp4``) decodes the packed bytes through a 256-entry table of value pairs,
then multiplies by the scales it decoded apart: four passes over a float32 result of K values a row. The
probe's path builds an index per packed byte (its block's scale byte, then the byte) and gathers both
values, already scaled, from a 65,536-entry table: two passes. Per nvfp4_gemm benchmark shape's B operand
(and the whole reference GEMM, today's against the probe's dequantization), it prints one JSON line: the
median milliseconds of each and whether the two give the same bits (NaN included). On the CPU it was not
faster (0.100 s against 0.087 s at 7168x4096): the question is the GPU's.

A third path, on a CUDA GPU only: dequantize to bfloat16 (each value has at most 6 significant bits, so
bf16's 8 hold it exactly: half the bytes of float32) and multiply with float32 accumulation and a float32
result (``torch.bmm(..., out_dtype=torch.float32)``, which the CPU build lacks). Its products are exact
and it sums in float32, like today's TF32 path; only the order of the sums may differ. The line says how
many fp16 outputs differ from today's, and the largest difference as a share of the task's tolerance
(``atol + rtol*|expected|``).

    python bench/lab/dequant_table.py            # cuda when there is one, else the CPU
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fp4_reference.fp4 import _e4m3_table, _pair_table, as_uint8  # noqa: E402
from fp4_reference.matmul import fp4_exact_matmul  # noqa: E402
from fp4_reference.nvfp4 import dequantize_nvfp4  # noqa: E402
from tasks import load_task  # noqa: E402


@functools.cache
def _scaled_pairs(device: torch.device) -> torch.Tensor:
    """float32 ``[65536, 2]``: row ``scale_byte * 256 + packed_byte`` holds the byte's two values times
    the scale's (each product exact in float32: at most 6 significant bits)."""
    return (_e4m3_table(device)[:, None, None] * _pair_table(device)[None]).reshape(65536, 2)


def dequantize_by_table(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    p, s = as_uint8(packed), as_uint8(scales)
    lead, kb = tuple(p.shape[:-1]), p.shape[-1]
    index = (s.to(torch.int32).unsqueeze(-1) << 8) | p.reshape(*lead, kb // 8, 8).to(torch.int32)
    return _scaled_pairs(p.device).index_select(0, index.reshape(-1)).view(*lead, kb * 2)


def dequantize_bf16(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``dequantize_nvfp4``'s values as bfloat16 (exact: a value has at most 6 significant bits)."""
    p, s = as_uint8(packed), as_uint8(scales)
    lead, kb = tuple(p.shape[:-1]), p.shape[-1]
    dev = p.device
    pairs = _pair_table(dev).to(torch.bfloat16).index_select(0, p.reshape(-1).to(torch.int32))
    vals = pairs.view(*lead, kb // 8, 16)
    return vals.mul_(_e4m3_table(dev).to(torch.bfloat16)[s.to(torch.long)].unsqueeze(-1)).view(*lead, kb * 2)


def _gemm_bf16(a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor) -> torch.Tensor:
    a_b, b_b = dequantize_bf16(a, sfa), dequantize_bf16(b, sfb)
    return torch.bmm(a_b, b_b.transpose(1, 2), out_dtype=torch.float32).to(torch.float16)


def _gemm_today(a: torch.Tensor, sfa: torch.Tensor, b: torch.Tensor, sfb: torch.Tensor) -> torch.Tensor:
    with fp4_exact_matmul():
        return torch.matmul(dequantize_nvfp4(a, sfa), dequantize_nvfp4(b, sfb).transpose(1, 2)).to(torch.float16)


def _bf16_row(task, operands: tuple, sync) -> dict:
    """The bf16 path's timing against today's whole reference, and how far their outputs are apart."""
    today, bf16 = _gemm_today(*operands), _gemm_bf16(*operands)
    same_dequant = torch.equal(dequantize_bf16(*operands[2:]).float(), dequantize_nvfp4(*operands[2:]))
    t, o = today.double(), bf16.double()
    allowed = task.atol + task.rtol * t.abs()
    return {
        "bf16_dequant_same_values": same_dequant,
        "bf16_outputs_differing": int((today != bf16).sum()),
        "bf16_outputs": today.numel(),
        "bf16_max_diff_share_of_tolerance": float(((o - t).abs() / allowed).max()),
        "reference_today_ms": _median_ms(lambda ops: _gemm_today(*ops), operands, sync),
        "reference_bf16_ms": _median_ms(lambda ops: _gemm_bf16(*ops), operands, sync),
    }


def _median_ms(fn, arg, sync, repeats: int = 20) -> float:
    """Median wall milliseconds of ``fn(arg)`` to the device's idle, after one untimed call."""
    fn(arg)
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(arg)
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _case_row(task, case: dict, dev: torch.device, sync) -> dict:
    a, b, sfa, sfb, *_ = task.generate_input(dict(case), dev)
    b3, sfb3 = b.permute(2, 0, 1), sfb.permute(2, 0, 1)
    same = torch.equal(dequantize_nvfp4(b3, sfb3).view(torch.int32), dequantize_by_table(b3, sfb3).view(torch.int32))
    a_f = dequantize_nvfp4(a.permute(2, 0, 1), sfa.permute(2, 0, 1))

    def dequant(how):
        return how(b3, sfb3)

    def gemm(how):
        with fp4_exact_matmul():
            return torch.matmul(a_f, how(b3, sfb3).transpose(1, 2)).to(torch.float16)

    operands = (a.permute(2, 0, 1), sfa.permute(2, 0, 1), b3, sfb3)
    return {
        **(_bf16_row(task, operands, sync) if dev.type == "cuda" else {}),
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "case": {k: case[k] for k in ("m", "n", "k", "l")},
        "same_bits": same,
        **{
            f"{step.__name__}_{name}_ms": _median_ms(step, how, sync)
            for step in (dequant, gemm)
            for name, how in (("today", dequantize_nvfp4), ("table", dequantize_by_table))
        },
    }


def main() -> int:
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    task = load_task("nvfp4_gemm")
    for case in task.benchmarks:
        print(json.dumps(_case_row(task, case, dev, sync)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
