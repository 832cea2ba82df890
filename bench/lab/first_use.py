#!/usr/bin/env python
"""Lab probe: why is a fresh process's first chunk of input generation several times slower than its
later ones (bench/lab/concurrent_generation.py), a cost every block's fresh worker pays? In a fresh
process with a CUDA context, each torch op of a task's ``generate_input`` and of the fingerprints is
timed on its own (synchronized before and after), the first time and again, and the ops whose first
call costs most are listed.

  python bench/lab/first_use.py --out /tmp/first_use.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from _child import run_in_child  # noqa: E402  (beside this script)


def _probe(task_name: str, case_index: int, out) -> None:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from harness import protocol
    from tasks import load_task

    class Timed(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[tuple[str, float]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            result = func(*args, **(kwargs or {}))
            torch.cuda.synchronize()
            self.rows.append((str(func), time.perf_counter() - t0))
            return result

    task = load_task(task_name)
    case = task.benchmarks[case_index]
    dev = torch.device("cuda")
    torch.empty(1, device=dev)
    torch.cuda.synchronize()
    with Timed():  # the mode's own first use (on the CPU: no GPU kernel loaded), so totals leave it out
        torch.zeros(1).add_(1)
    rounds = []
    for seed in (1, 2):
        t0 = time.perf_counter()
        gen = torch.Generator(device=dev).manual_seed(seed)
        gen_s = time.perf_counter() - t0
        mode = Timed()
        with mode:
            data = task.module.generate_input(**dict(case, seed=seed), device=dev, generator=gen)
            protocol.input_fingerprints([data])
        rounds.append({"generator_s": gen_s, "ops": mode.rows, "total_s": time.perf_counter() - t0})
    out.put({"task": task_name, "case": case, "rounds": rounds})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    ctx = mp.get_context("spawn")
    results = []
    for task_name, case_index in (("mxfp4_mm", 5), ("nvfp4_gemm", 2)):
        r = run_in_child(ctx, _probe, (task_name, case_index), 300)
        results.append(r)
        first, again = r["rounds"]
        print(
            f"{task_name}: first {first['total_s'] * 1e3:.1f} ms (generator {first['generator_s'] * 1e3:.2f} ms), "
            f"again {again['total_s'] * 1e3:.1f} ms",
            file=sys.stderr,
        )
        excess = sorted(
            ((a[0], a[1] - b[1]) for a, b in zip(first["ops"], again["ops"])), key=lambda x: x[1], reverse=True
        )
        for name, s in excess[:12]:
            print(f"  {s * 1e3:8.2f} ms  {name}", file=sys.stderr)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
