"""Measures a GPU's peaks: memory bandwidth (a 1 GiB copy), dense matrix throughput (bf16, fp8 where
torch has it) and the floor of one kernel launch (a CUDA graph of tiny kernels), plus, for information,
the per-call overhead of a tiny op timed with events. ``python -m harness measure-peaks`` runs it and
stores the row where ``harness.analysis.peaks`` finds it."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch


def _time_ms(fn: Callable[[], object], reps: int) -> float:
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


def _memory_bytes_per_s(device: torch.device) -> float:
    n = 1 << 30  # 1 GiB copy: far beyond the L2
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    copy_ms = _time_ms(lambda: dst.copy_(src), 20)
    return 2 * n / (copy_ms / 1e3)  # bytes read + written


def _matrix_flops_per_s(device: torch.device) -> dict[str, float]:
    size = 8192
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    flops = {"bf16": 2 * size**3 / (_time_ms(lambda: a @ b, 10) / 1e3)}
    try:
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.to(torch.float8_e4m3fn).t().contiguous().t()
        one = torch.ones((), device=device)
        fp8_ms = _time_ms(lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16), 10)
        flops["fp8"] = 2 * size**3 / (fp8_ms / 1e3)
    except Exception as exc:
        print(f"fp8 matmul not measured: {exc}", file=sys.stderr)
    return flops


def _launch_floor_ns(x: torch.Tensor) -> float:
    """The GPU time of one tiny kernel with no host in the way (a CUDA graph of 100)."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            x.add_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(100):
            x.add_(1)
    return _time_ms(graph.replay, 50) * 1e6 / 100


def _per_call_overhead_ns(x: torch.Tensor) -> float:
    """Start event, one tiny call, end event, synchronize (informational): the host's launch cost
    shows up here because the GPU waits for it. The median of 200."""
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
    return statistics.median(samples)


def measure(device: torch.device) -> dict[str, Any]:
    """One device's row of the peaks file (without the provenance fields the command adds)."""
    mem = _memory_bytes_per_s(device)
    flops = _matrix_flops_per_s(device)
    x = torch.zeros(1, device=device)
    return {
        "mem_bytes_per_s": mem,
        "matrix_flops_per_s": flops,
        "launch_floor_ns": _launch_floor_ns(x),
        "per_call_overhead_ns": _per_call_overhead_ns(x),
    }
