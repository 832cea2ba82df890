"""Cross-checks the harness's per-shape means against GPU MODE's published timing loop.

A throwaway re-implementation of GPU MODE's loop (amd_202602 eval.py), run in this process on the
same inputs as the harness's benchmark mode: for each benchmark shape, import the submission here,
then repeat (synchronize, L2 clear, start event, one call, end event, synchronize) and take the mean.
The clear is the original's: ``torch.randn`` of the task's ``original_clear_bytes`` (62.5 GiB for
mxfp4_mm), enqueued with no synchronize before the start event, so the host's launch time hides
behind it. The harness's figures come from the JSON of
``python -m harness run FILE --task mxfp4_mm --mode benchmark --json J``. The two must agree within
10% per shape.

    python bench/crosscheck_protocol.py submissions/triton_mxfp4.py --harness-json J --out results/x.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.engine.device import device_info  # noqa: E402
from harness.results import RunResult  # noqa: E402
from tasks import load_task  # noqa: E402


def gpumode_loop_ns(kernel, data, repeats: int, clear_bytes: int) -> list[float]:
    """GPU MODE's benchmark loop (ns per call), with its stop rule (standard error < 0.1% of the mean)."""

    def clear_l2_cache():
        dummy = torch.randn(clear_bytes // 4, device="cuda")
        del dummy

    kernel(data)
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        clear_l2_cache()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        kernel(data)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e6)
        if len(times) > 2 and statistics.stdev(times) / len(times) ** 0.5 < 0.001 * statistics.fmean(times):
            break
    return times


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("submission")
    ap.add_argument("--harness-json", required=True, help="the harness's benchmark-mode result for this file")
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    result = RunResult.from_json(Path(args.harness_json).read_text())
    task = load_task(result.task)
    spec = importlib.util.spec_from_file_location("submission", args.submission)
    if spec is None or spec.loader is None:
        raise SystemExit(f"crosscheck_protocol: {args.submission} is not a Python file it can import")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(task.compat_dir))
    spec.loader.exec_module(module)
    info = device_info(torch.device("cuda", 0))
    clear_bytes = task.original_clear_bytes or 2 * (info.l2_bytes or 64 << 20)
    rows = []
    for case in result.benchmark_cases():
        if case.stats is None:
            print(f"crosscheck_protocol: {case.spec} has no timing in {args.harness_json}: skipped", file=sys.stderr)
            continue
        data = task.generate_input(case.spec, torch.device("cuda"))
        times = gpumode_loop_ns(module.custom_kernel, data, args.repeats, clear_bytes)
        ours, theirs = case.stats.mean, sum(times) / len(times)
        rows.append(
            {
                "spec": case.spec,
                "harness_mean_us": ours / 1e3,
                "gpumode_loop_mean_us": theirs / 1e3,
                "ratio": ours / theirs,
                "within_10pct": abs(ours / theirs - 1) <= 0.10,
            }
        )
        print(
            f"{case.spec}: harness {ours / 1e3:.2f} us, GPU MODE loop {theirs / 1e3:.2f} us, ratio {ours / theirs:.3f}",
            file=sys.stderr,
        )
    doc = {
        "script": "bench/crosscheck_protocol.py",
        "submission": args.submission,
        "task": result.task,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": info.__dict__,
        "repeats": args.repeats,
        "clear_bytes": clear_bytes,
        "harness_timing_method": result.timing_method,
        "cases": rows,
        "all_within_10pct": all(r["within_10pct"] for r in rows),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return 0 if doc["all_within_10pct"] else 1


if __name__ == "__main__":
    sys.exit(main())
