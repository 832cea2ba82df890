"""Lab probe: does another process's start on the same GPU disturb a worker's timed samples?

The question behind starting block b+1's worker while block b is timed: a ranked verdict renews its worker
ten times, and each new worker's CUDA context and sampler cost about 0.3 s on an H100, on the verdict's
path. One timing process (the harness's own ``Sampler``: L2 flush, launch gate, events, tails) times a
bf16 matmul of about 10 us in rounds; between rounds, the conditions take turns:

- ``quiet``: nothing else runs;
- ``context``: fresh processes, forked as the pool forks them, one after another, each creating its CUDA
  context (``torch.empty(1)`` on the device) and exiting: what a started worker does before its sampler;
- ``sampler``: the same processes also build the harness's ``Sampler`` and calibrate it (kernels of their
  own on the GPU): the control, which should disturb the samples if anything does.

Per condition: the samples' median, mean and 99th percentile, and the tails' median and maximum with the
count of tails more than ``ESCAPE_MIN_NS`` beyond the timer's calibrated gap (the escaped-work check's
threshold).

  python bench/lab/context_overlap.py --rounds 6 --seconds 1.5 --out /tmp/context_overlap.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CONDITIONS = ("quiet", "context", "sampler")


def _sampler(torch):
    from harness.worker.sampler import Sampler

    dev = torch.device("cuda", 0)
    return Sampler(dev, torch.cuda.get_device_properties(dev).L2_cache_size, 1 << 30)


def _timer(conn) -> None:
    """Times the matmul for each ``seconds`` it is sent; replies (samples ns, tails ns); None ends it."""
    import torch

    torch.cuda.set_device(0)
    s = _sampler(torch)
    gap = s.calibrate()
    a = torch.randn(64, 2048, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(2048, 7168, device="cuda", dtype=torch.bfloat16)
    for _ in range(50):
        s.per_call(lambda x: x[0] @ x[1], (a, b))
    conn.send({"gpu": torch.cuda.get_device_name(0), "gap_ns": gap, "method": s.method})
    while (seconds := conn.recv()) is not None:
        samples, tails = [], []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            ns, tail, _ = s.per_call(lambda x: x[0] @ x[1], (a, b))
            samples.append(ns)
            tails.append(tail)
        conn.send((samples, tails))


def _starter(condition: str) -> None:
    import torch

    torch.cuda.set_device(0)
    torch.empty(1, device="cuda")
    if condition == "sampler":
        _sampler(torch).calibrate()
    os._exit(0)


def _summary(samples: list[float], tails: list[float], gap_ns: float, starts: int) -> dict:
    from harness.analysis.plausibility import ESCAPE_MIN_NS

    q = statistics.quantiles(samples, n=100)
    return {
        "samples": len(samples),
        "starts": starts,
        "median_us": statistics.median(samples) / 1e3,
        "mean_us": statistics.fmean(samples) / 1e3,
        "p99_us": q[98] / 1e3,
        "tail_median_us": statistics.median(tails) / 1e3,
        "tail_max_us": max(tails) / 1e3,
        "tails_over_limit": sum(t - gap_ns > ESCAPE_MIN_NS for t in tails),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--seconds", type=float, default=1.5, help="each condition's share of a round")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="context-overlap-cache-")
    import torch  # noqa: F401  (imported before the forks, as in the pool's server; no CUDA context here)
    import triton  # noqa: F401
    from triton.runtime.cache import triton_key

    triton_key()
    ctx = mp.get_context("fork")
    ours, theirs = ctx.Pipe()
    timer = ctx.Process(target=_timer, args=(theirs,))
    timer.start()
    head = ours.recv()
    runs: dict[str, list[tuple[list[float], list[float], int]]] = {c: [] for c in CONDITIONS}
    for r in range(args.rounds):
        for condition in CONDITIONS[r % 3 :] + CONDITIONS[: r % 3]:  # each condition first in turn
            ours.send(args.seconds)
            starts = 0
            while not ours.poll():
                if condition == "quiet":
                    time.sleep(0.01)
                    continue
                child = ctx.Process(target=_starter, args=(condition,))
                child.start()
                child.join(30)
                starts += 1
            samples, tails = ours.recv()
            runs[condition].append((samples, tails, starts))
    ours.send(None)
    timer.join(10)
    out = {"timer": head, "seconds": args.seconds, "rounds": args.rounds, "conditions": {}}
    for condition, parts in runs.items():
        out["conditions"][condition] = {
            "rounds": [_summary(s, t, head["gap_ns"], n) for s, t, n in parts],
            "all": _summary(
                [x for s, _, _ in parts for x in s], [x for _, t, _ in parts for x in t], head["gap_ns"],
                sum(n for _, _, n in parts),
            ),
        }  # fmt: skip
        a = out["conditions"][condition]["all"]
        print(
            f"{condition:8s} {a['samples']:6d} samples, {a['starts']:3d} starts: median {a['median_us']:.3f} us, "
            f"mean {a['mean_us']:.3f}, p99 {a['p99_us']:.3f}; tail median {a['tail_median_us']:.1f} us, "
            f"max {a['tail_max_us']:.1f}, {a['tails_over_limit']} over the limit",
            flush=True,
        )
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
