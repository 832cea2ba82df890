#!/usr/bin/env python
"""Lab probe: what does the worker's touch of a batched sample's inputs cost? A ranked triton_nvfp4 verdict
spent about 1.4 s in ``timing.touch`` when the worker read every tensor of a sample's 50 inputs with one
read op each (about 350 launches a sample); since b83ab58 ``harness.worker.sampler.Sampler.touch`` reads
them all with one ``torch._foreach_norm`` over the storages viewed as float16. Per nvfp4 benchmark shape,
for one batch of 50 inputs: the host wall time (synchronized) of each.

  python bench/lab/touch_cost.py --out /tmp/touch_cost.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from _child import run_in_child  # noqa: E402  (beside this script)


def _probe(batch: int, reps: int, out) -> None:
    import torch

    from harness.worker.sampler import Sampler
    from tasks import load_task

    dev = torch.device("cuda")
    task = load_task("nvfp4_gemm")

    sampler = SimpleNamespace(device=dev)  # all that Sampler.touch reads of its sampler

    def per_tensor(inputs: list) -> None:  # the touch before b83ab58: one read op a tensor
        for data in inputs:
            for t in data:
                torch.empty(0, dtype=torch.uint8, device=dev).set_(t.untyped_storage()).max()

    def sampler_touch(inputs: list) -> None:  # today's: the whole sample's tensors at once
        Sampler.touch(sampler, [t for data in inputs for t in data])  # type: ignore[arg-type]

    rows = []
    for case in task.benchmarks:
        inputs = [task.module.generate_input(**dict(case, seed=s), device=dev) for s in range(batch)]
        row: dict[str, object] = {"case": dict(case), "tensors": sum(len(d) for d in inputs)}
        for name, fn in (("per_tensor", per_tensor), ("sampler_touch", sampler_touch)):
            fn(inputs)  # first use
            torch.cuda.synchronize()
            walls = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn(inputs)
                torch.cuda.synchronize()
                walls.append((time.perf_counter() - t0) * 1e3)
            row[f"{name}_ms"] = statistics.median(walls)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    out.put({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--out", required=True)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--reps", type=int, default=10)
    args = p.parse_args()
    result = run_in_child(mp.get_context("spawn"), _probe, (args.batch, args.reps), 300)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
