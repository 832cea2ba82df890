"""The profiler's kernel table for the Triton examples on each benchmark shape: which kernels one call
launches and how long each runs on a cold L2 (the L2 is flushed before every call), written to a
results file. It splits a call's kernel-only time between its kernels (e.g. triton_mxfp4's A
quantization and its GEMM) where the harness's figure gives only their sum.

    python scripts/validation/profile_examples.py --out results/h200_profile_examples.json [--calls 20]
        [--task mxfp4_mm] [--config 64=64,64,128,1,1,4,3,0]   (a config tried instead of the file's for the
                                                            shapes of that m)
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "validation"))

from tune_examples import FILES, load_submission  # noqa: E402

from harness.engine.device import device_info  # noqa: E402
from tasks import load_task  # noqa: E402


def _kernel_times(run, calls: int) -> dict[str, list[float]]:
    """Device microseconds per launch, by kernel name, of ``calls`` calls of ``run``."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        torch.cuda.synchronize()
    times = collections.defaultdict(list)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            times[event.name].append(event.time_range.elapsed_us())
    return times


def kernel_table(sub, data, calls: int, flush: torch.Tensor) -> dict:
    """Per kernel name: launches per call and mean device microseconds per launch, the flush's own
    kernels (found by profiling the flush alone) left out."""
    flush_kernels = set(_kernel_times(lambda: flush.add_(1), 1))
    sub.custom_kernel(data)
    torch.cuda.synchronize()

    def call():
        flush.add_(1)  # evicts the inputs from L2 (the buffer is twice its size)
        sub.custom_kernel(data)

    times = {name: t for name, t in _kernel_times(call, calls).items() if name not in flush_kernels}
    return {name: {"launches_per_call": len(t) / calls, "mean_us": sum(t) / len(t)} for name, t in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--task", choices=sorted(FILES), action="append")
    ap.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="M=C1,C2,...",
        help="the config tuple to use for the benchmark shapes with this m",
    )
    args = ap.parse_args(argv)
    overrides = {int(m): tuple(int(x) for x in cfg.split(",")) for m, cfg in (c.split("=") for c in args.config)}
    if not torch.cuda.is_available():
        print("profile_examples: needs a CUDA GPU", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    info = device_info(device)
    flush = torch.zeros(2 * info.l2_bytes // 4, device=device)
    doc = {
        "script": "scripts/validation/profile_examples.py",
        "calls": args.calls,
        "device": info.__dict__,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "tasks": {},
    }
    for name in args.task or sorted(FILES):
        task = load_task(name)
        sub = load_submission(task)
        rows = []
        for case in task.benchmarks:
            if case["m"] in overrides:
                sub.CONFIGS[(case["m"], case["n"], case["k"])] = overrides[case["m"]]
                rows_config = {"config": list(overrides[case["m"]])}
            else:
                rows_config = {}
            table = kernel_table(sub, task.generate_input(case, device), args.calls, flush)
            total = sum(k["launches_per_call"] * k["mean_us"] for k in table.values())
            rows.append({"spec": dict(case), "kernels": table, "kernel_sum_us": total, **rows_config})
            print(
                f"{name} {case}: "
                + ", ".join(f"{k[:40]} {v['mean_us']:.2f} us x{v['launches_per_call']:g}" for k, v in table.items()),
                file=sys.stderr,
            )
        doc["tasks"][name] = rows
    Path(args.out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
