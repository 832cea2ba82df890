"""Dev probe (issue #7): how much does kernel-only (CUDA graph minus flushes) move against the profiler's
kernel sum from one measurement to the next, in this process and through the worker, and what is the
profiler's own gap between the harness's flush kernels (a per-kernel dispatch gap calibration)?

    python scripts/dev_kernel_only_probe.py --out results/probes/h200_kernel_only_probe.json

In this process: ``--trials`` fresh graph_kernel_time(profile=True) measurements, behind the launch
gate, for a few submissions and shapes, with the harness's write flush and with a read-only flush.
Through the worker: ``--worker-runs`` benchmark runs of gluon with --verify-timing.
"""
import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402

from harness import timing  # noqa: E402
from harness.device import device_info  # noqa: E402
from harness.gate import LaunchGate  # noqa: E402
from harness.runner import RunOptions, run_submission  # noqa: E402
from tasks import load_task  # noqa: E402

from dev_graph_gaps import capture, cupti, load  # noqa: E402  (the sibling probe's helpers)


class ReadFlusher(timing.L2Flusher):
    """Evicts the L2 by reading (not writing) a buffer twice its size: no dirty lines left behind."""

    def __call__(self) -> None:
        self.buffer.max()


def flush_gaps(flush, n=20):
    """The profiler's gaps (ns) between consecutive flush kernels in a replay of a graph of n flushes."""
    ops = cupti(capture(lambda: [flush() for _ in range(n)]))
    return [1e3 * (ops[i + 1][0] - ops[i][1]) for i in range(len(ops) - 1)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--trials", type=int, default=4)
    p.add_argument("--worker-runs", type=int, default=2)
    args = p.parse_args()
    dev = torch.device("cuda")
    info = device_info(dev)
    gate, why = LaunchGate.create(dev, 50e6)
    assert gate, why
    flushes = {"write": timing.L2Flusher(dev, info.l2_bytes), "read": ReadFlusher(dev, info.l2_bytes)}
    out = {"device": torch.cuda.get_device_name(), "driver": info.driver, "torch": torch.__version__,
           "triton": triton.__version__, "argv": sys.argv[1:],
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "flush_gaps_ns": {k: flush_gaps(f) for k, f in flushes.items()}, "rows": [], "worker": []}
    for k, g in out["flush_gaps_ns"].items():
        print(f"flush gaps ({k}): median {statistics.median(g):.0f} ns", flush=True)
    mx, nv = load_task("mxfp4_mm"), load_task("nvfp4_gemm")
    subs = ROOT / "submissions"
    cublas = lambda d: d[0] @ d[1].T  # noqa: E731
    todo = [("gluon", load(subs / "gluon.py"), mx, 0, ("write", "read")),
            ("triton_mxfp4", load(subs / "triton_mxfp4.py"), mx, 1, ("write",)),
            ("torch_mxfp4", load(subs / "torch_mxfp4.py"), mx, 0, ("write", "read")),
            ("triton_nvfp4", load(subs / "triton_nvfp4.py"), nv, 1, ("write",)),
            ("cublas", cublas, mx, 2, ("write",))]
    for name, fn, task, idx, kinds in todo:
        case = task.benchmarks[idx]
        data = task.generate_input(case, dev)
        fn(data)
        torch.cuda.synchronize()
        for kind in kinds:
            for t in range(args.trials):
                r = timing.graph_kernel_time(fn, [data], dev, flushes[kind], gate=gate, profile=True)
                prof = r.pop("profiler", {})
                row = {"name": name, "case": case, "flush": kind, "trial": t, **r,
                       "profiler_ns": prof.get("ns"), "profiler_window_ns": prof.get("window_ns"),
                       "profiler_kernels": prof.get("kernels_per_call")}
                if r.get("ns") and prof.get("ns"):
                    row["dev_pct"] = 100 * (r["ns"] - prof["ns"]) / prof["ns"]
                    row["excess_per_node_ns"] = (r["ns"] - prof["ns"]) / (r.get("nodes_per_call") or 1)
                out["rows"].append(row)
                print(f"{name:13} {str(case)[:40]:40} {kind:5} k-only {r.get('ns') or 0:9.0f} prof "
                      f"{prof.get('ns') or 0:9.0f} win {prof.get('window_ns') or 0:9.0f} "
                      f"dev {row.get('dev_pct', float('nan')):+6.2f}% /node {row.get('excess_per_node_ns', 0):5.0f}",
                      flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    for i in range(args.worker_runs):
        r = run_submission(str(subs / "gluon.py"), "mxfp4_mm", "benchmark",
                           RunOptions(device="cuda", max_repeats=30, verify_timing=True))
        for c in r.benchmark_cases():
            x = {k: c.extra.get(k) for k in ("kernel_only_ns", "profiler_kernel_ns", "profiler_window_ns",
                                             "kernel_only_vs_profiler_pct", "kernel_only_nodes_per_call")}
            out["worker"].append({"run": i, "case": c.spec, **x})
            print(f"worker gluon {c.spec} {x}", flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
