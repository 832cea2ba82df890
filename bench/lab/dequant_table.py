"""Lab probe (not a product benchmark): would one gather from a table of (scale byte, packed byte) value
pairs make the nvfp4 reference's dequantization cheaper on a GPU? Today's path
(``fp4_reference.dequantize_nvfp4``) decodes the packed bytes through a 256-entry table of value pairs,
then multiplies by the scales it decoded apart: four passes over a float32 result of K values a row. The
probe's path builds an index per packed byte (its block's scale byte, then the byte) and gathers both
values, already scaled, from a 65,536-entry table: two passes. Per nvfp4_gemm benchmark shape's B operand
(and the whole reference GEMM, today's against the probe's dequantization), it prints one JSON line: the
median milliseconds of each and whether the two give the same bits (NaN included). On the CPU it was not
faster (0.100 s against 0.087 s at 7168x4096): the question is the GPU's.

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

    return {
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
