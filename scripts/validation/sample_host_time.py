"""Host time of each call inside a timed sample, as the harness's sampler takes it (a GPU machine).

In the batched protocol (nvfp4_gemm: many distinct inputs between two events) a call's host time
shows in the score once it exceeds the call's GPU time, and the harness's worker has measured more
host time per call than a plain process's tight loop. This script times every call of
``custom_kernel`` (perf_counter_ns around it) in three settings, in one process, taking turns:
- ``sample``: inside the sampler's batched sample (L2 flush, launch gate closed until its cap, the
  GPU then running the calls while the host launches the rest), over ``--inputs`` distinct inputs;
- ``held``: the same calls queued behind a GPU held by a sleeping kernel for the whole batch (nothing
  runs while the host launches);
- ``running``: the same calls with the GPU free from the start (it runs each call as it comes).
Per setting: the median host time per call, over all calls and over the first and last fifth of each
batch, and (``sample``) the event time per call and the host time the sampler found unhidden. Several
configs for one shape take turns in every round (the host's speed drifts over seconds to minutes).

    PYTHONPATH=$PWD python3 scripts/validation/sample_host_time.py --task nvfp4_gemm --out results/x.json \
        [--config 2048=128,64,256,1,8,3,3 --config 2048=128,64,256,1,4,4,4 ...] [--only-k 2048]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "validation"))

from tune_examples import FILES, load_submission  # noqa: E402

from harness.engine.device import device_info  # noqa: E402
from harness.worker.sampler import Sampler  # noqa: E402
from tasks import load_task  # noqa: E402


def timed_calls(fn, inputs, hold_cycles: int = 0):
    """Calls ``fn`` on each input; returns each call's host time in us. ``hold_cycles``: a sleeping
    kernel queued first, so that the GPU runs none of the calls while the host launches them."""
    times = []
    torch.cuda.synchronize()
    if hold_cycles:
        torch.cuda._sleep(hold_cycles)
    for d in inputs:
        t0 = time.perf_counter_ns()
        fn(d)
        times.append((time.perf_counter_ns() - t0) / 1e3)
    torch.cuda.synchronize()
    return times


def summary(batches: list[list[float]]) -> dict:
    fifth = max(1, len(batches[0]) // 5)
    flat = [t for b in batches for t in b]
    return {
        "median_us": statistics.median(flat),
        "first_fifth_median_us": statistics.median(t for b in batches for t in b[:fifth]),
        "last_fifth_median_us": statistics.median(t for b in batches for t in b[-fifth:]),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--task", choices=sorted(FILES), default="nvfp4_gemm")
    ap.add_argument("--inputs", type=int, default=50, help="distinct inputs per batch (the ranked run's count)")
    ap.add_argument("--rounds", type=int, default=20, help="batches per setting, the settings taking turns")
    ap.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="K=CONFIG",
        help="a config for the benchmark shape with this k (comma-separated, as CONFIGS reads it); "
        "several for one k take turns in each round",
    )
    ap.add_argument("--only-k", type=int, action="append", help="only the benchmark shapes with this k")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("sample_host_time: needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    task = load_task(args.task)
    sub = load_submission(task)
    overrides = {}
    for k, v in (c.split("=", 1) for c in args.config):
        overrides.setdefault(int(k), []).append(tuple(int(x) for x in v.split(",")))
    sampler = Sampler(device, device_info(device).l2_bytes, task.original_clear_bytes)
    rows = []
    for case in task.benchmarks:
        if args.only_k and case["k"] not in args.only_k:
            continue
        shape = (case["m"], case["n"], case["k"])
        configs = overrides.get(case["k"]) or [sub.CONFIGS.get(shape)]
        inputs = [task.generate_input({**case, "seed": case["seed"] + i}, device) for i in range(args.inputs)]
        got = [{"sample": [], "held": [], "running": [], "event": [], "unhidden": []} for _ in configs]
        for _ in range(args.rounds):
            for config, g in zip(configs, got):  # the configs take turns, so a drift of the host hits each
                if config is not None:
                    sub.CONFIGS[shape] = config
                getattr(sub, "_PLANS", {}).clear()
                for d in inputs[:3]:
                    sub.custom_kernel(d)  # compiled, and its launch plan made
                times = []

                def fn(d):
                    t0 = time.perf_counter_ns()
                    out = sub.custom_kernel(d)
                    times.append((time.perf_counter_ns() - t0) / 1e3)
                    return out

                ns, _, _ = sampler.batched(fn, inputs)
                g["sample"].append(times)
                g["event"].append(ns / 1e3)
                if sampler.unhidden_host_ns is not None:
                    g["unhidden"].append(sampler.unhidden_host_ns / 1e3)
                g["held"].append(timed_calls(sub.custom_kernel, inputs, hold_cycles=200_000_000))
                g["running"].append(timed_calls(sub.custom_kernel, inputs))
        for config, g in zip(configs, got):
            row = {
                "case": dict(case),
                "config": list(config) if config else None,
                **{k: summary(g[k]) for k in ("sample", "held", "running")},
                "sample_event_us_per_call": statistics.median(g["event"]),
                "sample_unhidden_host_us_per_call": statistics.median(g["unhidden"]) if g["unhidden"] else None,
            }
            rows.append(row)
            print(
                f"{task.name} {shape} {config}: "
                + "; ".join(
                    f"{k} {row[k]['median_us']:.2f} (first {row[k]['first_fifth_median_us']:.2f}, last "
                    f"{row[k]['last_fifth_median_us']:.2f})"
                    for k in ("sample", "held", "running")
                )
                + f"; event {row['sample_event_us_per_call']:.2f}, unhidden {row['sample_unhidden_host_us_per_call']}",
                file=sys.stderr,
            )
        del inputs
        getattr(sub, "_PLANS", {}).clear()
    doc = {
        "script": "scripts/validation/sample_host_time.py",
        "device": device_info(device).__dict__,
        "torch": torch.__version__,
        "triton": getattr(sys.modules.get("triton"), "__version__", None),
        "sampler": sampler.method,
        "inputs": args.inputs,
        "rounds": args.rounds,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "file": FILES[task.name],
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
