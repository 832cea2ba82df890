"""Dev probe: the host time of one ``custom_kernel`` call, per benchmark shape of a task.

Calls each submission 50 times in a row on one input without synchronizing (the GPU runs behind),
five rounds, after a first call that compiles; prints and writes the median host time per call. Under
the batched protocol (nvfp4_gemm: 50 calls between two events) a call whose host time exceeds its
kernel time is measured by the host: the harness then warns "host-bound".

    python scripts/dev_host_time.py --task nvfp4_gemm submissions/triton_nvfp4.py [more.py ...] --out f.json
"""
import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from harness.device import device_info  # noqa: E402
from dev_graph_gaps import load  # noqa: E402  (the sibling probe's loader)
from tasks import load_task  # noqa: E402


def host_us_per_call(fn, data, calls=50, rounds=5) -> float:
    fn(data)
    torch.cuda.synchronize()
    per_call = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn(data)
        per_call.append((time.perf_counter_ns() - t0) / calls / 1e3)
        torch.cuda.synchronize()
    return statistics.median(per_call)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--task", required=True)
    ap.add_argument("--out")
    args = ap.parse_args()
    task, dev = load_task(args.task), torch.device("cuda")
    sys.path.insert(0, str(task.compat_dir))
    rows = []
    for path in args.files:
        fn = load(path)
        for case in task.benchmarks:
            us = host_us_per_call(fn, task.generate_input(case, dev))
            rows.append({"file": path, "case": case, "host_us_per_call": us})
            print(f"{Path(path).name:32s} {case}: {us:7.1f} us of host time per call", flush=True)
    if args.out:
        info = device_info(dev)
        Path(args.out).write_text(json.dumps({
            "script": "scripts/dev_host_time.py", "argv": sys.argv[1:], "device": info.name,
            "torch": torch.__version__, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
