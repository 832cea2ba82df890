#!/usr/bin/env python
"""Lab probe: does a chunk of input generation slow down when a second process generates on the same GPU
at the same time, as the parent and the worker of a ranked verdict do (each generates its own copy of
every input from the same seeds)? One process alone, then two at once, each timing chunks of inputs
(generated, then fingerprinted together), on one benchmark shape of each task.

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
    protocol.input_fingerprints([task.generate_input(dict(case, seed=s), dev) for s in range(chunk)])
    torch.cuda.synchronize()
    start.wait()
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        protocol.input_fingerprints([task.generate_input(dict(case, seed=i * chunk + s), dev) for s in range(chunk)])
        times.append(time.perf_counter() - t0)
    out.put(statistics.median(times))


def measure(task_name: str, case_index: int, chunk: int, n: int, procs: int) -> list[float]:
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
    for task_name, case_index, chunk in (("mxfp4_mm", 5, 10), ("nvfp4_gemm", 0, 50)):
        for procs in (1, 2):
            medians = measure(task_name, case_index, chunk, args.n, procs)
            rows.append(
                {"task": task_name, "case": case_index, "chunk": chunk, "processes": procs, "median_chunk_s": medians}
            )
            print(
                f"{task_name} case {case_index}, chunk {chunk}, {procs} process(es): {[round(m * 1e3, 1) for m in medians]} ms",
                file=sys.stderr,
            )
    Path(args.out).write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
