#!/usr/bin/env python
"""Lab probe: does ``harness.input_graphs`` (a ranked verdict's input generation replayed from a CUDA graph
instead of ~40-70 ops launched from Python) give the eager bytes and fingerprints on every benchmark
shape of each task, and what does an input cost then? Per shape: the first input (eager, captured,
checked), then a few seeds compared byte for byte and by fingerprint with eager generation; then the
time per input of a chunk, generated and fingerprinted, both ways.

  python bench/lab/graphed_generation.py --out /tmp/graphed_generation.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from harness import protocol  # noqa: E402
from harness.input_graphs import GraphedInputs, same_inputs  # noqa: E402
from tasks import load_task  # noqa: E402


def per_input_ms(make, n: int) -> float:
    """Median over 3 chunks of ``n`` inputs: generated and fingerprinted, read back together."""
    make(list(range(n)))
    torch.cuda.synchronize()
    times = []
    for rep in range(3):
        t0 = time.perf_counter()
        make([1000 + rep * n + i for i in range(n)])
        times.append((time.perf_counter() - t0) / n * 1e3)
    return statistics.median(times)


def probe(task_name: str, case: dict, seeds: int, n: int) -> dict:
    task = load_task(task_name)
    dev = torch.device("cuda")
    gen_fn = task.module.generate_input
    row: dict = {"task": task_name, "case": {k: v for k, v in case.items() if k != "seed"}}
    try:
        warned: list[str] = []
        graphed = GraphedInputs(gen_fn, dev, warn=warned.append, capture_after=1, faster=float("inf"))
        t0 = time.perf_counter()
        graphed.generate(case)  # eager, captured, checked
        torch.cuda.synchronize()
        row["first_input_with_capture_ms"] = (time.perf_counter() - t0) * 1e3
        specs = [dict(case, seed=12345 + 7919 * i) for i in range(seeds)] + [dict(case, seed=5), dict(case, seed=5)]
        made, fingerprints = graphed.generate_fingerprinted(specs)
        eager = [tuple(gen_fn(**spec, device=dev)) for spec in specs]
        row["same_bytes"] = all(same_inputs(x, y) for x, y in zip(made, eager))
        row["same_fingerprints"] = fingerprints == protocol.input_fingerprints(eager)
        row["inputs_checked"] = len(specs) + 1
        row["warnings"] = warned

        def eager_chunk(seeds_: list[int]) -> None:
            protocol.input_fingerprints([tuple(gen_fn(**dict(case, seed=s), device=dev)) for s in seeds_])

        def graphed_chunk(seeds_: list[int]) -> None:
            graphed.generate_fingerprinted([dict(case, seed=s) for s in seeds_])

        row["eager_ms_per_input"] = per_input_ms(eager_chunk, n)
        row["graph_ms_per_input"] = per_input_ms(graphed_chunk, n)
    except Exception as exc:  # a probe: record what failed and go on
        row["error"] = f"{type(exc).__name__}: {exc}"
        row["traceback"] = traceback.format_exc()[-2000:]
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--out", required=True)
    p.add_argument("--seeds", type=int, default=4, help="seeds compared per shape")
    p.add_argument("--n", type=int, default=50, help="inputs per timed chunk")
    args = p.parse_args()
    rows = []
    for task_name in ("mxfp4_mm", "nvfp4_gemm"):
        for case in load_task(task_name).benchmarks:
            row = probe(task_name, case, args.seeds, args.n)
            print(json.dumps({k: v for k, v in row.items() if k != "traceback"}), flush=True)
            rows.append(row)
            torch.cuda.empty_cache()
    Path(args.out).write_text(
        json.dumps(
            {
                "device": torch.cuda.get_device_name(),
                "torch": torch.__version__,
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "rows": rows,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
