"""Lab probe: does another process on the same GPU disturb a worker's timed samples while it starts?

The question behind ``--start-ahead``: while block b is timed, the worker of block b+1 is forked, makes its
CUDA context, loads the harness's kernels and waits (idle) until block b is done. One timing process (the harness's own ``Sampler``:
L2 flush, launch gate, events, tails) times a bf16 matmul of about 19 us on an H100 in rounds; the
conditions take turns, each first in turn:

- ``quiet``: nothing else runs;
- ``context``: fresh processes, forked as the pool forks them, one after another, each making its CUDA
  context (``torch.empty(1)`` on the device), loading the harness's own kernels (``gate.load_ahead``:
  read from the Triton cache the timer filled, loaded, none launched) and exiting: a worker started
  ahead, again and again;
- ``idle``: one process that made its context before the round waits through it: a worker started ahead,
  held;
- ``busy``: one process that keeps the GPU busy with matmuls of its own through the round: the control,
  which must show as slower samples if the probe can see anything.

Each sample keeps its host time, and each context's making its window (from the fork to the process's
exit), so the slow samples (over 1.5 times the round's median) are counted inside and outside those
windows. Per condition: the samples' median, mean and 99th percentile, the slow samples and what they
added to the mean, and the tails (median, maximum, how many more than ``ESCAPE_MIN_NS`` beyond the
calibrated gap, the escaped-work check's threshold).

  python bench/lab/context_overlap.py --rounds 6 --seconds 1.0 --out /tmp/context_overlap.json
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

CONDITIONS = ("quiet", "context", "idle", "busy")
SLOW = 1.5  # a slow sample: over this many times its round's median


def _sampler(torch):
    from harness.worker.sampler import Sampler

    dev = torch.device("cuda", 0)
    return Sampler(dev, torch.cuda.get_device_properties(dev).L2_cache_size, 1 << 30)


def _timer(conn) -> None:
    """Times the matmul for each ``seconds`` it is sent; replies (samples ns, tails ns, host ns at each
    sample's start); None ends it."""
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
        samples, tails, at = [], [], []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            at.append(time.monotonic_ns())
            ns, tail, _ = s.per_call(lambda x: x[0] @ x[1], (a, b))
            samples.append(ns)
            tails.append(tail)
        conn.send((samples, tails, at))


def _context_then_exit() -> None:
    import torch

    from harness.worker.gate import load_ahead

    torch.cuda.set_device(0)
    torch.empty(1, device="cuda")
    load_ahead(torch.device("cuda", 0))
    os._exit(0)


def _beside(condition: str, ready, stop) -> None:
    """``idle``: a context, then waiting; ``busy``: matmuls until ``stop`` is set."""
    import torch

    torch.cuda.set_device(0)
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    ready.set()
    while not stop.is_set():
        if condition == "busy":
            for _ in range(20):
                x @ x
            torch.cuda.synchronize()
        else:
            time.sleep(0.01)
    os._exit(0)


def _summary(samples: list[float], tails: list[float], at: list[int], windows: list[tuple[int, int]], gap: float):
    from harness.analysis.plausibility import ESCAPE_MIN_NS

    median = statistics.median(samples)
    slow = [i for i, x in enumerate(samples) if x > SLOW * median]
    inside = [i for i in slow if any(t0 <= at[i] <= t1 for t0, t1 in windows)]
    return {
        "samples": len(samples),
        "contexts_made": len(windows),
        "median_us": median / 1e3,
        "mean_us": statistics.fmean(samples) / 1e3,
        "p99_us": statistics.quantiles(samples, n=100)[98] / 1e3,
        "max_us": max(samples) / 1e3,
        "slow": len(slow),
        "slow_in_context_windows": len(inside),
        "slow_excess_of_mean_us": sum(samples[i] - median for i in slow) / len(samples) / 1e3,
        "slowest_us": sorted((samples[i] / 1e3 for i in slow), reverse=True)[:5],
        "tail_median_us": statistics.median(tails) / 1e3,
        "tail_max_us": max(tails) / 1e3,
        "tails_over_limit": sum(t - gap > ESCAPE_MIN_NS for t in tails),
    }


def _round(ours, ctx, condition: str, seconds: float) -> tuple[list, list[tuple[int, int]]]:
    """One condition's share of a round: the timer's (samples, tails, times) and the contexts' windows."""
    windows: list[tuple[int, int]] = []
    helper, stop = None, ctx.Event()
    if condition in ("idle", "busy"):
        ready = ctx.Event()
        helper = ctx.Process(target=_beside, args=(condition, ready, stop))
        helper.start()
        ready.wait(60)
    ours.send(seconds)
    while not ours.poll():
        if condition != "context":
            time.sleep(0.01)
            continue
        t0 = time.monotonic_ns()
        child = ctx.Process(target=_context_then_exit)
        child.start()
        child.join(30)
        windows.append((t0, time.monotonic_ns()))
    reply = ours.recv()
    if helper is not None:
        stop.set()
        helper.join(30)
    return reply, windows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--seconds", type=float, default=1.0, help="each condition's share of a round")
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
    rows: dict[str, list[dict]] = {c: [] for c in CONDITIONS}
    for r in range(args.rounds):
        k = r % len(CONDITIONS)
        for condition in CONDITIONS[k:] + CONDITIONS[:k]:
            (samples, tails, at), windows = _round(ours, ctx, condition, args.seconds)
            rows[condition].append(_summary(samples, tails, at, windows, head["gap_ns"]))
    ours.send(None)
    timer.join(10)
    for condition, parts in rows.items():
        means = [x["mean_us"] for x in parts]
        print(
            f"{condition:8s} median {statistics.median(x['median_us'] for x in parts):.3f} us; round means "
            f"{min(means):.3f}-{max(means):.3f}; slow samples {sum(x['slow'] for x in parts)} "
            f"({sum(x['slow_in_context_windows'] for x in parts)} while a context was made), max "
            f"{max(x['max_us'] for x in parts):.1f} us; tails over the limit {sum(x['tails_over_limit'] for x in parts)}",
            flush=True,
        )
    out = {"timer": head, "seconds": args.seconds, "rounds": args.rounds, "slow_factor": SLOW, "conditions": rows}
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
