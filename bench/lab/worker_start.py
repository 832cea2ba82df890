"""Lab probe: where a fresh worker's ``worker_start.cuda_context`` and ``worker_start.sampler`` go (about
0.15 and 0.09 s a block on an H100, ten fresh workers a ranked verdict). In fresh processes forked from
one that imported torch and Triton (as the warm-worker pool forks them), each step of the worker's start
is timed: the CUDA context, then the sampler's parts (the L2 flush buffer, the persisting-L2 state, the
flush's own timing, the launch gate with its check, the timestamp kernel) and the calibration; then a
second sampler in the same process, whose steps pay no first use. The Triton cache is a temporary folder
the first process fills; the later ones load from it, as a worker with a filled cache does.

  python bench/lab/worker_start.py --processes 4 --out /tmp/worker_start.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from _child import run_in_child  # noqa: E402  (beside this script)


def _timed_steps() -> dict[str, float]:
    import torch

    from harness.worker import gate, persisting_l2, sampler

    steps: dict[str, float] = {}

    def wrap(owner, name, label):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                steps[label] = steps.get(label, 0.0) + time.perf_counter() - t0

        setattr(owner, name, timed)

    wrap(sampler.L2Flusher, "__init__", "sampler.flush_buffer")
    wrap(persisting_l2.PersistingL2, "__init__", "sampler.persisting_l2")
    wrap(sampler.Sampler, "_flush_ns", "sampler.flush_timing")
    wrap(gate.LaunchGate, "_why_it_does_not_hold", "sampler.gate_check")
    wrap(gate.LaunchGate, "__init__", "sampler.gate_build")
    dev = torch.device("cuda", 0)
    t0 = time.perf_counter()
    torch.cuda.set_device(dev)
    torch.empty(1, device=dev)
    steps["cuda_context"] = time.perf_counter() - t0
    for round_ in ("first", "again"):
        t0 = time.perf_counter()
        s = sampler.Sampler(dev, torch.cuda.get_device_properties(dev).L2_cache_size, 1 << 30)
        steps[f"{round_}.sampler"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        s.calibrate()
        steps[f"{round_}.calibrate"] = time.perf_counter() - t0
        if round_ == "first":
            steps = {(f"first.{k}" if k.startswith("sampler.") else k): v for k, v in steps.items()}
    return steps


def _child(out) -> None:
    out.put(_timed_steps())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--processes", type=int, default=4)
    p.add_argument("--out", required=True)
    p.add_argument(
        "--no-key", action="store_true", help="do not compute Triton's key before the forks (each process then does)"
    )
    args = p.parse_args()
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="worker-start-cache-")
    import torch  # noqa: F401  (imported before the forks, as in the pool's server)
    import triton  # noqa: F401

    if not args.no_key:
        from triton.runtime.cache import triton_key

        triton_key()  # as the pool's server does: in memory before the forks

    ctx = mp.get_context("fork")
    rows = []
    for i in range(args.processes):
        t0 = time.perf_counter()
        row = run_in_child(ctx, _child, (), 60)
        row["process_s"] = time.perf_counter() - t0
        rows.append(row)
        print(
            f"process {i} ({'empty' if i == 0 else 'filled'} Triton cache): "
            + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in sorted(row.items())),
            flush=True,
        )
    Path(args.out).write_text(json.dumps({"processes": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
