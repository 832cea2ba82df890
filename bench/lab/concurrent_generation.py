#!/usr/bin/env python
"""Lab probe: does a chunk of input generation slow down when a second process generates on the same GPU
at the same time, as the parent and the worker of a ranked verdict do (each generates its own copy of
every input from the same seeds)? One process alone, then two at once, each timing chunks of inputs
(generated, then fingerprinted together), on benchmark shapes of both tasks; and what a fresh process's
first chunk costs (a ranked run's every block is a fresh worker).

  python bench/lab/concurrent_generation.py --out /tmp/concurrent_generation.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _chunks(task_name: str, case_index: int, chunk: int, n: int, start, out) -> None:
    import torch

    from harness import protocol
    from tasks import load_task

    task = load_task(task_name)
    case = task.benchmarks[case_index]
    dev = torch.device("cuda")
    torch.empty(1, device=dev)  # the CUDA context, as a worker has it before its first input
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    protocol.input_fingerprints([task.generate_input(dict(case, seed=s), dev) for s in range(chunk)])
    first = time.perf_counter() - t0  # a fresh process's first chunk: what a fresh worker pays
    start.wait()
    times, queued = [], []
    for i in range(n):
        t0 = time.perf_counter()
        inputs = [task.generate_input(dict(case, seed=i * chunk + s), dev) for s in range(chunk)]
        queued.append(time.perf_counter() - t0)  # the host's launches of the generation, nothing waited for
        protocol.input_fingerprints(inputs)  # reads the sums back: waits for the device
        times.append(time.perf_counter() - t0)
    gpu_ms = []  # the device's own time for a chunk: launched first, then timed by events
    for i in range(min(n, 5)):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(200_000_000)  # keeps the device busy while the host queues the whole chunk
        begin.record()
        protocol.input_fingerprints(
            [task.generate_input(dict(case, seed=(n + i) * chunk + s), dev) for s in range(chunk)]
        )
        end.record()
        end.synchronize()
        gpu_ms.append(begin.elapsed_time(end))
    out.put(
        {
            "first_chunk_s": first,
            "chunk_s": statistics.median(times),
            "queued_s": statistics.median(queued),
            "device_only_ms": statistics.median(gpu_ms),
        }
    )


def measure(task_name: str, case_index: int, chunk: int, n: int, procs: int) -> list[dict[str, float]]:
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(procs), ctx.Queue()
    ps = [ctx.Process(target=_chunks, args=(task_name, case_index, chunk, n, start, out)) for _ in range(procs)]
    for p in ps:
        p.start()
    medians = [out.get(timeout=300) for _ in ps]
    for p in ps:
        p.join()
    return medians


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--out", required=True)
    p.add_argument("--n", type=int, default=30, help="chunks per process")
    args = p.parse_args()
    rows = []
    for task_name, case_index, chunk in (
        ("mxfp4_mm", 5, 10),
        ("nvfp4_gemm", 0, 50),
        ("nvfp4_gemm", 1, 50),
        ("nvfp4_gemm", 2, 50),
    ):
        for procs in (1, 2):
            medians = measure(task_name, case_index, chunk, args.n, procs)
            rows.append(
                {"task": task_name, "case": case_index, "chunk": chunk, "processes": procs, "per_process": medians}
            )
            print(
                f"{task_name} case {case_index}, chunk {chunk}, {procs} process(es): "
                + "; ".join(
                    f"first {m['first_chunk_s'] * 1e3:.1f} ms, chunk {m['chunk_s'] * 1e3:.1f} ms, queued {m['queued_s'] * 1e3:.1f} ms, device {m['device_only_ms']:.1f} ms"
                    for m in medians
                ),
                file=sys.stderr,
            )
    Path(args.out).write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
