"""GPU time of torch's GEMMs on a prepared operand pair (a GPU machine): is an FP8 GEMM worth writing
the operands as e4m3 for?

For each shape, times bf16 ``torch.mm`` against ``torch._scaled_mm`` on e4m3 operands (tensorwise
scales through cuBLASLt, with and without fast accumulation, and rowwise scales), in both
orientations (C, and C^T with the operands swapped). Each figure is the GPU time of 200 back-to-back
calls between two CUDA events, divided by 200, queued behind a sleeping GPU so that the host's launch
time is hidden (the GPU's kernels and the gaps between them are what is left), the operands staying
in L2 as they would after a first kernel that wrote them.

    PYTHONPATH=$PWD python3 scripts/validation/gemm_probe.py --shape 256,3072,1536 --out results/x.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.engine.device import device_info  # noqa: E402

CALLS = 200


def gpu_us(fn) -> float:
    for _ in range(10):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(20_000_000)  # about 10 ms: longer than the host takes to queue the calls
    start.record()
    for _ in range(CALLS):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / CALLS


def variants(m: int, n: int, k: int, dev) -> dict:
    """name -> a call, for C = A @ B^T with A [m, k] and B [n, k] (both K-major, as a first kernel writes them)."""
    a, b = torch.randn(m, k, device=dev), torch.randn(n, k, device=dev)
    a16, b16 = a.bfloat16(), b.bfloat16()
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.ones((), device=dev)
    rows_a, rows_b = torch.ones(m, 1, device=dev), torch.ones(1, n, device=dev)
    rows_bt, rows_at = torch.ones(n, 1, device=dev), torch.ones(1, m, device=dev)
    out = {"bf16 mm C": lambda: torch.mm(a16, b16.t()), "bf16 mm C^T": lambda: torch.mm(b16, a16.t())}
    for fast in (False, True):
        out[f"fp8 tensorwise C fast_accum={fast}"] = lambda fast=fast: torch._scaled_mm(
            a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast
        )
        out[f"fp8 tensorwise C^T fast_accum={fast}"] = lambda fast=fast: torch._scaled_mm(
            b8, a8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast
        )
    out["fp8 rowwise C"] = lambda: torch._scaled_mm(
        a8, b8.t(), scale_a=rows_a, scale_b=rows_b, out_dtype=torch.bfloat16
    )
    out["fp8 rowwise C^T"] = lambda: torch._scaled_mm(
        b8, a8.t(), scale_a=rows_bt, scale_b=rows_at, out_dtype=torch.bfloat16
    )
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--shape", action="append", required=True, help="M,N,K (repeatable)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("gemm_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    rows = []
    for shape in args.shape:
        m, n, k = (int(x) for x in shape.split(","))
        for name, fn in variants(m, n, k, dev).items():
            row = {"shape": [m, n, k], "variant": name}
            try:
                row["gpu_us"] = round(gpu_us(fn), 3)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
            rows.append(row)
            print(f"{shape} {name}: {row.get('gpu_us', row.get('error'))}", file=sys.stderr)
    doc = {
        "script": "scripts/validation/gemm_probe.py",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": device_info(dev).__dict__,
        "calls": CALLS,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
