"""Measures the current GPU's memory bandwidth, dense matrix throughput (bf16, fp8) and the floor
of one kernel launch, and writes them where ``harness.analysis.sol`` reads them (results/device_peaks.json).

    python scripts/measure_peaks.py [--out results/device_peaks.json]

Existing rows for other GPUs in the file are kept.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.engine.device import device_info, select_device  # noqa: E402
from harness.analysis.sol import PEAKS_FILE, gpu_key  # noqa: E402


def _time_ms(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


def measure(device) -> dict:
    n = 1 << 30   # 1 GiB copy: far beyond the L2
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy_ms = _time_ms(lambda: dst.copy_(src), 20)
    mem = 2 * n / (copy_ms / 1e3)   # bytes read + written
    del src, dst

    size = 8192
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    bf16 = 2 * size**3 / (_time_ms(lambda: a @ b, 10) / 1e3)
    flops = {"bf16": bf16}
    try:
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.ones((), device=device)
        fp8 = 2 * size**3 / (_time_ms(lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16), 10) / 1e3)
        flops["fp8"] = fp8
    except Exception as exc:  # noqa: BLE001 - no fp8 matmul on this GPU/torch
        print(f"fp8 matmul not measured: {exc}", file=sys.stderr)

    x = torch.zeros(1, device=device)
    # The launch floor: the GPU time of one tiny kernel with no host in the way (a CUDA graph of 100).
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            x.add_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(100):
            x.add_(1)
    launch = _time_ms(graph.replay, 50) * 1e6 / 100
    # The per-call overhead (informational): start event, one tiny call, end event, synchronize;
    # host-side launch cost shows up here because the GPU waits for it.
    for _ in range(50):
        x.add_(1)
    samples = []
    for _ in range(200):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        x.add_(1)
        e.record()
        torch.cuda.synchronize()
        samples.append(s.elapsed_time(e) * 1e6)
    samples.sort()
    per_call = samples[len(samples) // 2]
    return {"mem_bytes_per_s": mem, "matrix_flops_per_s": flops, "launch_floor_ns": launch,
            "per_call_overhead_ns": per_call}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(PEAKS_FILE))
    args = ap.parse_args()
    device = select_device(None)
    if device.type != "cuda":
        print("no GPU here: nothing to measure", file=sys.stderr)
        return 2
    info = device_info(device)
    key = gpu_key(info.name) or info.name
    row = measure(device)
    row.update(device=info.name, driver=info.driver, torch=info.torch, triton=info.triton,
               date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               script="scripts/measure_peaks.py")
    out = Path(args.out)
    doc = json.loads(out.read_text()) if out.exists() else {"version": 1, "devices": {}}
    doc["devices"][key] = row
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(json.dumps({key: row}, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
