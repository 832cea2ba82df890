"""Where triton_mxfp4's MMA path (PRE_A 4: CUDA C++ through NVRTC, bf16 mma.sync) spends its GPU time.

For each config, the GPU duration of each kernel (torch.profiler's CUDA activity: mma_quant_a and the
GEMM mma_mxfp4) averaged over 20 calls, each after a 256 MB write that evicts L2, and the same with
parts of the GEMM compiled out (its timing alone is meaningful, its output is not): SKIP_A (A's staging
in shared memory), SKIP_B (B's tiles and scales), SKIP_RED (the cluster's sum of partial tiles). The
file's own config of the shape is profiled too.

    PYTHONPATH=$PWD python3 scripts/validation/mma_probe.py --out results/probes/h200_mma_probe.json
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

from harness.engine.device import device_info  # noqa: E402
from tasks import load_task  # noqa: E402
from tests.helpers import load_example  # noqa: E402

VARIANTS = ([], ["-DSKIP_A"], ["-DSKIP_B"], ["-DSKIP_RED"], ["-DSKIP_A", "-DSKIP_B"], ["-DSKIP_A", "-DSKIP_B", "-DSKIP_RED"])
CONFIGS = {(64, 7168, 2048): [(128, 64, 0, 4, 4, 4, 16, 0), (128, 64, 0, 8, 4, 4, 8, 0), (64, 64, 0, 8, 4, 2, 8, 0)],
           (256, 3072, 1536): [(128, 64, 0, 4, 4, 4, 12, 0), (128, 32, 0, 2, 4, 4, 24, 0)]}


def kernel_us(sub, data, flush) -> dict:
    sub.custom_kernel(data)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            flush.zero_()
            sub.custom_kernel(data)
        torch.cuda.synchronize()
    times = collections.defaultdict(list)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and "elementwise" not in ev.name:
            times[ev.name[:60]].append(ev.device_time_total)
    return {name: sum(v) / len(v) for name, v in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("mma_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    task = load_task("mxfp4_mm")
    sub = load_example("triton_mxfp4", task)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    rows = []
    for shape, configs in CONFIGS.items():
        case = next(c for c in task.benchmarks if (c["m"], c["n"], c["k"]) == shape)
        data = task.generate_input(case, dev)
        base = sub._pick_config(*shape)
        for cfg, variants in [(base, [[]])] + [(c, VARIANTS if i == 0 else [[]]) for i, c in enumerate(configs)]:
            sub.CONFIGS[shape] = cfg
            for defines in variants:
                sub._MMA_DEFINES[:] = defines
                sub._MODULES.clear()
                ok = task.check(data, sub.custom_kernel(data))[0] if not defines else None
                row = {"shape": case, "config": list(cfg), "defines": defines, "output_ok": ok,
                       "kernel_us": kernel_us(sub, data, flush)}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        sub.CONFIGS[shape] = base
    doc = {"script": "scripts/validation/mma_probe.py", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "device": device_info(dev).__dict__, "torch": torch.__version__, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
