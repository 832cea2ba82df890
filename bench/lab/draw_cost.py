#!/usr/bin/env python
"""Lab probe: what does each step of a task's input generation cost on the device, and would drawing
the packed FP4 operands as wider words (the same uniform bytes, fewer draws) make it cheaper? A
ranked triton_nvfp4 verdict spends about 8 s generating (its parent's copies 6.8 s), and
bench/lab/concurrent_generation.py found the largest shape bound by the device's work of drawing its
58 MB operand. Per benchmark shape, in one process: the device time (CUDA events, the host's launches
queued behind a sleep) of the task's whole ``generate_input`` with its fingerprints, of each of its
steps, and of the packed operand drawn as int8 (today), int16 and int32 words; and the fingerprints of
an input as summed today (8-byte words) and before (4-byte words widened to int64).

  python bench/lab/draw_cost.py --out /tmp/draw_cost.json
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing as mp
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from _child import run_in_child  # noqa: E402  (beside this script)


def _device_ms(fn: Callable[[], object], reps: int) -> float:
    """Median device time of ``fn``'s work, its launches queued behind a sleep so the host never paces it."""
    import torch

    fn()  # first use (kernel loading) left out
    times = []
    for _ in range(reps):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(50_000_000)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    return statistics.median(times)


def _draw(shape: tuple[int, ...], dtype, lo: int, hi: int, dev, gen) -> object:
    import torch

    return torch.empty(shape, dtype=dtype, device=dev).random_(lo, hi, generator=gen)


def _nvfp4_steps(spec: dict, data: tuple, dev, gen, reps: int) -> dict[str, float]:
    import torch

    from fp4_reference import to_blocked_scales

    m, n, k, l = spec["m"], spec["n"], spec["k"], spec["l"]
    row = {}
    for name, dtype, width in (("int8", torch.int8, 1), ("int16", torch.int16, 2), ("int32", torch.int32, 4)):
        lo, hi = -(1 << (8 * width - 1)), 1 << (8 * width - 1)
        draw = functools.partial(_draw, (l, n, k // 2 // width), dtype, lo, hi, dev, gen)
        row[f"draw_b_{name}_ms"] = _device_ms(draw, reps)
    row["draw_c_ms"] = _device_ms(lambda: torch.randn((l, m, n), dtype=torch.float16, device=dev, generator=gen), reps)
    scales = functools.partial(torch.randint, 0, 4, (l, n, k // 16), dtype=torch.int32, device=dev, generator=gen)
    row["scales_b_ms"] = _device_ms(lambda: scales().to(torch.float8_e4m3fn), reps)
    row["blocked_b_ms"] = _device_ms(lambda: to_blocked_scales(data[3]), reps)
    return row


def _int32_word_fingerprints(data: tuple) -> list[int]:
    """The fingerprints before 2026-12-07, for comparison: 4-byte words widened to int64 and summed."""
    import torch

    sums = []
    for t in data:
        if isinstance(t, torch.Tensor):
            n = t.untyped_storage().nbytes() // t.element_size()
            sums.append(torch.as_strided(t, (n,), (1,), 0).view(torch.int32).sum(dtype=torch.int64))
    return torch.stack(sums).tolist()


def _case_row(task, spec: dict, dev, gen, reps: int) -> dict[str, object]:
    from harness import protocol

    row: dict[str, object] = {"task": task.name, "case": spec}
    row["generate_ms"] = _device_ms(lambda: task.module.generate_input(**spec, device=dev, generator=gen), reps)
    data = task.module.generate_input(**spec, device=dev, generator=gen)
    row["fingerprints_ms"] = _device_ms(lambda: protocol.input_fingerprints([data]), reps)
    row["fingerprints_int32_words_ms"] = _device_ms(lambda: _int32_word_fingerprints(data), reps)
    if task.name == "nvfp4_gemm":
        row |= _nvfp4_steps(spec, data, dev, gen, reps)
    return row


def _probe(reps: int, out) -> None:
    import torch

    from tasks import load_task

    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(1)
    rows = []
    for task_name in ("nvfp4_gemm", "mxfp4_mm"):
        task = load_task(task_name)
        for case in task.benchmarks:
            rows.append(_case_row(task, dict(case), dev, gen, reps))
            print(json.dumps(rows[-1]), file=sys.stderr)
    out.put({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=15)
    args = p.parse_args()
    result = run_in_child(mp.get_context("spawn"), _probe, (args.reps,), 600)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
