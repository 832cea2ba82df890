#!/usr/bin/env python
"""What the parent's side of a ranked verdict costs per timed call, outside the worker: generating one
input, its fingerprint, the reference output, the check of an output against it, and rebuilding an
output from the worker's bytes. For each benchmark shape of each task, the median of ``--reps`` timed
repetitions (the device synchronized around each), into a results file with the device, the versions,
the commit and the date.

It tells where the "generate", "check" and "receive" phases of a verdict go (bench/verdict_time.py
records the phases; issue 49 measured 21 s of checks and 17 s of input generation in one triton_nvfp4
verdict on the H200). A ranked verdict generates and checks a chunk at a time (the inputs of one batched
sample, or one request's timed calls): for one chunk, the script also times doing it one input at a
time, each read back alone, against the harness's way, every fingerprint and every check read back
together (``protocol.input_fingerprints``, ``Task.check_all``).

Without a GPU, or with --quick, it runs the small CPU fixture tasks (a smoke test, not a measurement).

Examples:
  python bench/check_cost.py --out results/h200_check_cost.json          # on the H200
  python bench/check_cost.py --quick --out /tmp/check_cost.json           # CPU smoke test
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import sys
from pathlib import Path
from typing import Any

from _common import ROOT, doc_parser, git_commit, timed  # _common puts the repository root on sys.path

from harness.engine.benchmark import PER_CALL_CHUNK

VERSION = 2  # 1 - first version; 2 - a chunk one at a time and together
GPU_TASKS = ["mxfp4_mm", "nvfp4_gemm"]
CPU_TASKS = [str(ROOT / "tests/fixtures/tasks" / t / "task.yml") for t in ("mxfp4_small", "nvfp4_small")]


def shape_costs(task: Any, case: dict[str, Any], device: Any, reps: int) -> dict[str, Any]:
    import torch

    from harness import protocol

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    seeds = iter(range(10**6))
    gen_s, data = timed(lambda: task.generate_input(dict(case, seed=next(seeds)), device), sync, reps)
    fp_s, _ = timed(lambda: protocol.input_fingerprints([data]), sync, reps)
    ref_s, ref = timed(lambda: task.reference(data), sync, reps)
    output = ref.clone()
    check_s, verdict = timed(lambda: task.check(data, output), sync, reps)
    raw = output.reshape(-1).view(torch.uint8).clone()  # a tensor frame, as the parent's channel delivers it
    dtype = str(output.dtype).removeprefix("torch.")
    rebuild_s, _ = timed(
        lambda: protocol.rebuild_tensor(dtype, list(output.shape), raw, str(output.device), device), sync, reps
    )
    chunk = task.inputs_per_measurement if task.timing_protocol == "batched" else PER_CALL_CHUNK
    datas = [task.generate_input(dict(case, seed=next(seeds)), device) for _ in range(chunk)]
    pairs = [(d, task.reference(d)) for d in datas]
    specs = [dict(case, seed=s) for s in range(chunk)]
    inputs_alone_s, _ = timed(
        lambda: [protocol.input_fingerprints([task.generate_input(s, device)]) for s in specs], sync, reps
    )
    inputs_together_s, _ = timed(
        lambda: protocol.input_fingerprints([task.generate_input(s, device) for s in specs]), sync, reps
    )
    checks_alone_s, _ = timed(lambda: [task.check(d, o) for d, o in pairs], sync, reps)
    checks_together_s, verdicts = timed(lambda: task.check_all(pairs), sync, reps)
    return {
        "case": {k: v for k, v in case.items() if k != "seed"},
        "chunk": {
            "inputs": chunk,
            "inputs_one_at_a_time_s": inputs_alone_s,  # generate and fingerprint each, read back alone
            "inputs_together_s": inputs_together_s,  # generate all, fingerprints read back together
            "checks_one_at_a_time_s": checks_alone_s,
            "checks_together_s": checks_together_s,
            "checks_passed": all(ok for ok, _ in verdicts),
        },
        "generate_s": gen_s,
        "fingerprint_s": fp_s,
        "reference_s": ref_s,
        "check_s": check_s,  # reference included: the task's check computes it
        "rebuild_output_s": rebuild_s,
        "output_bytes": raw.numel(),
        "check_passed": bool(verdict[0]),
    }


def main(argv: list[str] | None = None) -> int:
    p = doc_parser(__doc__)
    p.add_argument("--out", required=True, help="the results file (JSON)")
    p.add_argument("--quick", action="store_true", help="the CPU fixture tasks (a smoke test, not a measurement)")
    p.add_argument("--reps", type=int, default=10, help="timed repetitions per step (default 10)")
    args = p.parse_args(argv)
    import torch

    from tasks import load_task

    gpu = torch.cuda.is_available() and not args.quick
    device = torch.device("cuda" if gpu else "cpu")
    doc: dict[str, Any] = {
        "version": VERSION,
        "quick": not gpu,
        "environment": {
            "device": torch.cuda.get_device_name(0) if gpu else "cpu",
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "commit": git_commit(),
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        },
        "tasks": {},
    }
    for name in GPU_TASKS if gpu else CPU_TASKS:
        task = load_task(name)
        rows = doc["tasks"][task.name] = []
        for case in task.benchmarks:
            row = shape_costs(task, case, device, args.reps)
            rows.append(row)
            c = row["chunk"]
            print(
                f"{task.name} {row['case']}: generate {row['generate_s'] * 1e3:.1f} ms, check "
                f"{row['check_s'] * 1e3:.1f} ms (reference {row['reference_s'] * 1e3:.1f} ms); a chunk of "
                f"{c['inputs']}: inputs {c['inputs_one_at_a_time_s'] * 1e3:.1f} -> {c['inputs_together_s'] * 1e3:.1f} ms, "
                f"checks {c['checks_one_at_a_time_s'] * 1e3:.1f} -> {c['checks_together_s'] * 1e3:.1f} ms",
                file=sys.stderr,
            )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
