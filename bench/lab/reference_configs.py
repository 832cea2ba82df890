#!/usr/bin/env python
"""Lab probe: which launch of the nvfp4 reference's GPU kernel (``fp4_reference/gpu_gemm.Config``: tiles,
warps, stages, a split K) is fastest on each benchmark shape, and does each give the torch path's bits?
A ranked triton_nvfp4 verdict computes the reference for every timed output (about 12,000), and the check
of a chunk outlasts the lead-in it hides behind. Also: what reading an input's storage as uint8 costs
against reading it as 8-byte words (the worker's touch of each input before its sample).

  python bench/lab/reference_configs.py --out /tmp/reference_configs.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fp4_reference import matmul  # noqa: E402
from fp4_reference.gpu_gemm import Config, fused_nvfp4_gemm, launch_for  # noqa: E402
from tasks import load_task  # noqa: E402


def _device_ms(reps: int, fn, *args) -> float:
    """The device's milliseconds per call of ``fn(*args)`` over ``reps`` calls queued back to back."""
    fn(*args)
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(reps):
        fn(*args)
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / reps


def _storage(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    whole = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
    return whole if dtype == torch.uint8 else whole[: whole.numel() // 8 * 8].view(dtype)


def _touch_all(inputs: list, dtype: torch.dtype) -> None:
    for d in inputs:
        for t in d:
            _storage(t, dtype).max()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--budget-s", type=float, default=200.0)
    args = p.parse_args()
    start = time.monotonic()
    task, dev = load_task("nvfp4_gemm"), torch.device("cuda")
    grid = [
        Config(bm=bm, bn=bn, bk=bk, warps=w, stages=3, split=sp)
        for bm, bn, bk, w, sp in itertools.product((64, 128), (32, 64, 128), (128, 256), (4, 8), (1, 2, 4, 8))
    ]
    rows, touch = [], []
    for i, case in enumerate(task.benchmarks):
        inputs = [task.generate_input(dict(case, seed=500 + 7 * i + j), dev) for j in range(3)]
        want = [matmul._nvfp4_gemm_torch(*d[:4]) for d in inputs]
        torch_ms = _device_ms(args.reps, matmul._nvfp4_gemm_torch, *inputs[0][:4])
        for cfg in grid:
            if time.monotonic() - start > args.budget_s:
                print("budget spent", file=sys.stderr)
                break
            try:
                same = all(torch.equal(fused_nvfp4_gemm(*d[:4], cfg), w) for d, w in zip(inputs, want))
                ms = _device_ms(args.reps, fused_nvfp4_gemm, *inputs[0][:4], cfg)
            except Exception as e:  # a launch that does not fit (shared memory): noted, not fatal
                rows.append({"case": case, "config": cfg.__dict__, "error": f"{type(e).__name__}: {e}"[:300]})
                continue
            rows.append({"case": case, "config": cfg.__dict__, "same_bits": same, "ms": ms, "torch_ms": torch_ms})
        mine = sorted((r for r in rows if r["case"] == case and "ms" in r), key=lambda r: r["ms"])
        chosen = next((r["ms"] for r in mine if r["config"] == launch_for(case["k"]).__dict__), None)
        print(f"{case}: torch {torch_ms:.3f} ms, the launch used now {chosen} ms", file=sys.stderr)
        for r in mine[:6]:
            print(f"  {r['ms']:.3f} ms same_bits={r['same_bits']} {r['config']}", file=sys.stderr)
        chunk = inputs * 17  # about a chunk's 50 inputs
        for dtype in (torch.uint8, torch.int64):
            ms = _device_ms(3, _touch_all, chunk, dtype)
            touch.append({"case": case, "dtype": str(dtype), "ms_per_input": ms / len(chunk)})
            print(f"  touch as {dtype}: {ms / len(chunk):.3f} ms an input", file=sys.stderr)
    Path(args.out).write_text(json.dumps({"rows": rows, "touch": touch}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
