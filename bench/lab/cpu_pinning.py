#!/usr/bin/env python
"""Lab probe: does pinning a fresh process to one CPU core narrow how much a launch-bound batched
sample differs from one process to the next? A ranked nvfp4 run measures in blocks, each in a fresh
worker, and its smallest shape (a ~10 us kernel behind ~15 us of host launch per call) spreads by up
to 15% between blocks while the largest stays within 2%: the sample counts the host's launch rate.

Each child is a fresh interpreter (optionally pinned with ``sched_setaffinity`` before it imports
torch) that times the nvfp4 batched protocol on every benchmark shape (50 distinct inputs, an L2
clear, start event, 50 calls, end event, synchronize), ``--samples`` times, and prints the per-call
median of each shape with the host's launch time per call (or, timed by the harness's own ``Sampler``,
the launch time its gate left unhidden). The same 50 inputs serve every sample, unlike a ranked run's
fresh ones. The parent runs the variants (``--variants``) interleaved,
``--rounds`` children each, in a fresh random order each round, and reports per variant and shape the
children's medians and their spread (sd of the log medians).

  python bench/lab/cpu_pinning.py --out /tmp/cpu_pinning.json
  python bench/lab/cpu_pinning.py --variants unpinned,sampler,sampler_touch,sampler_last_core --out /tmp/p.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUBMISSION = ROOT / "submissions" / "triton_nvfp4.py"
VARIANTS = {  # name: (how the child times, where it is pinned)
    "unpinned": ("plain", ""),
    "last_core": ("plain", "last_core"),
    "middle_core": ("plain", "middle_core"),
    "sampler": ("sampler", ""),
    "sampler_touch": ("sampler_touch", ""),
    "sampler_last_core": ("sampler", "last_core"),
}


def child(cpus: list[int], samples: int, batch: int, how: str) -> dict:
    """``how``: "plain" (a 256 MB clear, synchronize, start event: the GPU idles
    there, so launch time counts), "sampler" (the harness's own ``Sampler.batched``: its L2 flush, launch gate and
    stamps) or "sampler_touch" (and ``Sampler.touch`` of each input first, as a ranked chunk does)."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    sys.path.insert(0, str(ROOT))
    import importlib.util

    import torch

    from tasks import load_task

    task = load_task("nvfp4_gemm")
    spec = importlib.util.spec_from_file_location("submission", SUBMISSION)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kernel = mod.custom_kernel
    dev = torch.device("cuda")
    clear = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    sampler = None
    if how.startswith("sampler"):
        from harness.worker.sampler import Sampler

        l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", None)
        sampler = Sampler(dev, l2, task.original_clear_bytes)
    shapes = []
    for case in task.benchmarks:
        inputs = [task.generate_input(dict(case, seed=1000 + i), dev) for i in range(batch)]
        for d in inputs[:3]:
            kernel(d)
        torch.cuda.synchronize()
        device_us, host_us = [], []
        for _ in range(samples):
            if sampler is not None:
                if how == "sampler_touch":
                    for d in inputs:
                        sampler.touch(d)
                ns, _tail, _outs = sampler.batched(kernel, inputs)
                device_us.append(ns / 1e3)
                host_us.append((sampler.unhidden_host_ns or 0) / 1e3)
                continue
            clear.zero_()
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            start.record()
            for d in inputs:
                kernel(d)
            end.record()
            t1 = time.perf_counter_ns()
            torch.cuda.synchronize()
            device_us.append(start.elapsed_time(end) * 1e3 / batch)
            host_us.append((t1 - t0) / 1e3 / batch)
        shapes.append(
            {
                "case": {k: case[k] for k in ("m", "n", "k")},
                "median_us": statistics.median(device_us),
                "host_launch_us": statistics.median(host_us),  # sampler: the unhidden part only
            }
        )
        del inputs
    return {
        "how": how,
        "gate": sampler is not None and sampler.gate is not None,
        "cpus": cpus,
        "affinity": sorted(os.sched_getaffinity(0)),
        "shapes": shapes,
    }


def run_child(cpus: list[int], how: str, samples: int, batch: int) -> dict:
    cmd = [sys.executable, __file__, "--child", ",".join(map(str, cpus)), "--how", how]
    cmd += ["--samples", str(samples), "--batch", str(batch)]
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode:
        return {"cpus": cpus, "error": out.stderr[-2000:]}
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row["wall_s"] = time.monotonic() - t0
    return row


def summary(rows: list[dict]) -> dict:
    ok = [r for r in rows if "shapes" in r]
    out = {"children": len(ok), "errors": len(rows) - len(ok), "shapes": []}
    if not ok:
        return out
    for i, shape in enumerate(ok[0]["shapes"]):
        meds = [r["shapes"][i]["median_us"] for r in ok]
        hosts = [r["shapes"][i]["host_launch_us"] for r in ok]
        logs = [math.log(m) for m in meds]
        out["shapes"].append(
            {
                "case": shape["case"],
                "medians_us": [round(m, 3) for m in meds],
                "host_launch_us": [round(h, 3) for h in hosts],
                "between_process_sd_log": statistics.stdev(logs) if len(logs) > 1 else None,
                "range_rel": max(meds) / min(meds) - 1,
            }
        )
    scores = [math.exp(statistics.fmean(math.log(s["median_us"]) for s in r["shapes"])) for r in ok]
    out["geomean_us"] = [round(s, 3) for s in scores]
    out["geomean_sd_log"] = statistics.stdev(math.log(s) for s in scores) if len(scores) > 1 else None
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--out")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--samples", type=int, default=15)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--budget-s", type=float, default=240)
    p.add_argument(
        "--variants", default="unpinned,last_core,middle_core", help="comma-separated, of " + ", ".join(VARIANTS)
    )
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--how", default="plain", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        cpus = [int(c) for c in args.child.split(",") if c]
        print(json.dumps(child(cpus, args.samples, args.batch, args.how)))
        return 0
    allowed = sorted(os.sched_getaffinity(0))
    cores = {"": [], "last_core": [allowed[-1]], "middle_core": [allowed[len(allowed) // 2]]}
    variants = {}
    for name in args.variants.split(","):
        if name not in VARIANTS:
            p.error(f"--variants: unknown {name!r}; choose from {', '.join(VARIANTS)}")
        how, where = VARIANTS[name]
        variants[name] = (how, cores[where])
    rows: dict[str, list[dict]] = {k: [] for k in variants}
    began = time.monotonic()
    for r in range(args.rounds):
        order = list(variants)
        random.shuffle(order)
        for name in order:
            if time.monotonic() - began > args.budget_s:
                break
            how, cpus = variants[name]
            row = run_child(cpus, how, args.samples, args.batch)
            rows[name].append(row)
            brief = [round(s["median_us"], 2) for s in row.get("shapes", [])] or row.get("error", "")[-300:]
            print(f"round {r + 1} {name}: {brief}", file=sys.stderr, flush=True)
    result = {
        "allowed_cpus": allowed,
        "variants": variants,
        "summary": {k: summary(v) for k, v in rows.items()},
        "rows": rows,
    }
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
