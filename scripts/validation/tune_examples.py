"""Config sweep for the Triton examples on the current GPU; writes every timing to a results file.

For each benchmark shape of mxfp4_mm (submissions/triton_mxfp4.py) and nvfp4_gemm
(submissions/triton_nvfp4.py), tries the file's own config and variants (among them the
pre-quantized / pre-decoded A path), checks each config's output with the task's checker, and times
it with the harness's sampler in the task's protocol (per call, or 10 distinct inputs per sample for
nvfp4_gemm's batched protocol; launch gate, L2 flush before every sample). The best config per
shape is printed as a CONFIGS line to paste into the submission; the file keeps every row.

    python scripts/validation/tune_examples.py --out results/h200_tuning.json [--task mxfp4_mm] [--samples 20] [--m 64] [--pre-a 2] [--stages 3] [--swap 0]
        [--only '*,64,128/256,1,3,*,*,0'] [--set _PDL=0] [--time-wrong]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import itertools
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.engine.device import device_info  # noqa: E402
from harness.worker.sampler import Sampler  # noqa: E402
from tasks import load_task  # noqa: E402

FILES = {"mxfp4_mm": "triton_mxfp4.py", "nvfp4_gemm": "triton_nvfp4.py"}


def load_submission(task):
    spec = importlib.util.spec_from_file_location(f"tune_{task.name}", ROOT / "submissions" / FILES[task.name])
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(task.compat_dir))
    spec.loader.exec_module(module)
    return module


def candidates(task_name: str, shape: tuple, base: tuple) -> list[tuple]:
    """The file's config first, then variants (config tuples as the submission reads them)."""
    M, N, K = shape
    out = [base]
    if task_name == "mxfp4_mm":  # (BN, BM, BK, SPLIT, PRE_A, warps, STAGES, SWAP_AB)
        bm0 = 16 if M <= 16 else min(128, 1 << (M - 1).bit_length())
        bms = {bm0, max(16, bm0 // 2)} | ({256} if M >= 256 else set()) | ({64} if M < 64 else set())
        for bn, bm, bk, split, pre_a, nw, stages, swap in itertools.product(
            (32, 64, 128, 256), bms, (64, 128, 256), (1, 2, 4, 7, 8, 14, 16), (0, 1, 3), (4, 8), (1, 2, 3, 4), (1, 0)
        ):
            programs = -(-N // bn) * -(-M // bm) * split
            if K % (split * bk) or not 20 <= programs <= 1100 or bn * bk > 128 * 256:
                continue
            if swap and (bn < 64 or (nw == 8 and bn * max(bm, bk) < 128 * 128)):  # 8 warps: big tiles only
                continue
            # the PIPELINED loop: at least two chunks per split, its stages within 160 KB of shared memory
            # (A: bf16, or e4m3 on the FP8 path)
            a_bytes = bm * bk * (1 if pre_a == 3 else 2)
            if stages > 1 and (K // split < 2 * bk or stages * (bn * bk // 2 + a_bytes) > 160 * 1024):
                continue
            if pre_a == 0 and M >= 64:  # A quantized again by every N tile: slower at M >= 64 in every sweep
                continue
            if not swap and (bm < 64 or stages == 1):  # C tiles: M on the MMA's M side (64 rows at least)
                continue
            if swap and M < 64 and bm == 64:  # M < 64: BM = 64 only for C tiles (rows past M are masked)
                continue
            out.append((bn, bm, bk, split, pre_a, nw, stages, swap))
        if M >= 64:  # PREPARE (2): both operands in one kernel (BN rows of B, BM of A
            # each; BM = 0: BN), then cuBLAS (SWAP_AB = 1: cuBLAS computes C^T)
            out += [
                (rows, rows_a, bk, 0, 2, nw, 1, swap)
                for rows, rows_a, bk, nw, swap in itertools.product(
                    (4, 8, 16, 32, 64), (0, 2, 4, 8, 16), (64, 128, 256, 512), (1, 2, 4, 8), (0, 1)
                )
                if rows * bk <= 64 * 256 and rows_a != rows
            ]
    else:  # (BM, BN, BK, SPLIT, warps, stages, A_DEC)
        for bn, bk, split, a_dec in itertools.product((64, 128, 256), (64, 128), (2, 4, 8, 16), (0, 1)):
            programs = N // bn * split
            if (K // split) % bk == 0 and N % bn == 0 and 100 <= programs <= 1100 and (a_dec or bn == 128):
                out.append((128, bn, bk, split, 4 if bn == 64 else 8, 3, a_dec))
        # FP8 (A_DEC = 2): any split (the chunks are shared out), the grid just under a whole number of
        # waves (one program of BN = 128 per SM, or two of BN = 64, with 4 or 8 warps)
        for bn, bk, stages, split, nw in itertools.product((64, 128), (128, 256), (2, 3, 4), range(1, 17), (4, 8)):
            slots = 132 * (2 if bn == 64 else 1)
            waves = N // bn * split / slots
            if (
                N % bn == 0
                and K // bk >= 2 * split
                and 0.7 <= waves <= 4
                and math.ceil(waves) - waves <= 0.3
                and not (bk == 256 and stages == 4)
                and (nw == 8 or bn == 64)
            ):
                out.append((128, bn, bk, split, nw, stages, 2))
        # INT8 (A_DEC = 3: both operands folded into int8 by a first kernel, then an int8 GEMM): programs
        # per SM by the sm_90 compile's registers (two of BN = 64 with 4 warps, else one)
        for bn, bk, stages, split, nw in itertools.product((64, 128, 256), (128, 256), (3, 4), range(1, 17), (4, 8)):
            waves = N // bn * split / (132 * (2 if (bn, nw) == (64, 4) else 1))
            if (
                N % bn == 0
                and K // bk >= 2 * split
                and 0.7 <= waves <= 2.2
                and math.ceil(waves) - waves <= 0.25
                and stages * (128 + bn) * bk <= 200 * 1024
                and (nw == 8 or bn == 64)
            ):
                out.append((128, bn, bk, split, nw, stages, 3))
        # I8G (A_DEC = 4: A folded into int8 by a first kernel, B decoded in the Gluon loop while the
        # previous chunk's wgmma runs; 5, I8F: A folded by the GEMM's programs themselves): BK 128 (loads
        # by cp.async) or 256 (by TMA), a warpgroup per 64 or 128 rows of B, as many programs per SM as
        # shared memory holds. By TMA, stages are A's and B's ring takes the rest (two stages at least;
        # the submission's _b_stages)
        for bn, bk, nw, stages, split in itertools.product(
            (64, 128, 256), (128, 256), (4, 8, 16), (2, 3, 4, 5), range(1, 17)
        ):
            b_stages = 2 if bk == 256 else stages  # TMA: B has a ring of its own
            smem = stages * 128 * bk + b_stages * (bn // 2 + bn // 16) * bk + 2 * bn * bk
            if bk == 128 and stages == 2:
                continue
            waves = N // bn * split / (132 * max(1, min(2, 220 * 1024 // smem)))
            if (
                N % bn == 0
                and K // bk >= 2 * split
                and 0.7 <= waves <= 2.2
                and math.ceil(waves) - waves <= 0.3
                and smem <= 220 * 1024
                and bn // 128 <= nw // 4 <= bn // 64
            ):
                out.append((128, bn, bk, split, nw, stages, 4))
                if bk == 256 and nw == 4:  # I8F (5): warp-specialized, A made by the GEMM (one launch)
                    out.append((128, bn, bk, split, nw, stages, 5))
    seen = []
    return [c for c in out if not (c in seen or seen.append(c))]


def matches(cfg: tuple, pattern: str) -> bool:
    """``pattern``: one field per config field, each ``*`` or values joined by ``/`` (``*,64,128/256,1``...)."""
    fields = pattern.split(",")
    if len(fields) != len(cfg):
        raise SystemExit(f"tune_examples: --only {pattern!r} has {len(fields)} fields, the configs {len(cfg)}")
    return all(f == "*" or str(v) in f.split("/") for v, f in zip(cfg, fields))


def sweep(
    task,
    device,
    samples: int,
    log,
    only_m=None,
    pre_a=None,
    stages=None,
    swap=None,
    only=None,
    save=lambda rows: None,
    settings=(),
    time_wrong=False,
) -> list[dict]:
    sub = load_submission(task)
    for name, value in settings:  # --set: module switches of the submission (e.g. _PDL=0)
        if not hasattr(sub, name):
            raise SystemExit(f"tune_examples: --set {name}: {FILES[task.name]} has no {name}")
        setattr(sub, name, type(getattr(sub, name))(int(value)))
    sampler = Sampler(device, device_info(device).l2_bytes, task.original_clear_bytes)
    log(f"{task.name}: {sampler.method}")
    rows = []
    for case in task.benchmarks:
        if only_m and case["m"] not in only_m:
            continue
        shape = (case["m"], case["n"], case["k"])
        data = task.generate_input(case, device)
        batch = (
            [data] + [task.generate_input(dict(case, seed=case["seed"] + i), device) for i in range(1, 10)]
            if task.timing_protocol == "batched"
            else None
        )
        ref = task.reference(data).float()
        base = sub.CONFIGS.get(shape) or (
            sub._pick_config(*shape) if task.name == "mxfp4_mm" else sub._pick(*shape, case.get("l", 1))
        )
        configs = candidates(task.name, shape, tuple(base))
        if task.name == "mxfp4_mm":  # the file's config, then those of the chosen PRE_A / STAGES / SWAP_AB
            configs = configs[:1] + [
                c
                for c in configs[1:]
                if (pre_a is None or c[4] == pre_a)
                and (not stages or c[6] in stages)
                and (swap is None or c[7] == swap)
            ]
        configs = configs[:1] + [c for c in configs[1:] if not only or any(matches(c, p) for p in only)]
        for cfg in configs:
            sub.CONFIGS[shape] = cfg
            for cache in ("_PLANS", "_HANDLES"):  # launch plans made for the previous config
                getattr(sub, cache, {}).clear()
            row = {
                "task": task.name,
                "shape": dict(case),
                "config": list(cfg),
                **({"settings": dict(settings)} if settings else {}),
            }
            try:
                if task.name == "nvfp4_gemm":  # the provided output buffer: no stale result may pass
                    data[6].fill_(float("nan"))
                ok, message = task.check(data, sub.custom_kernel(data))
                out = sub.custom_kernel(data)  # the fast launch path
                ok2, message2 = task.check(data, out)
                if not (ok and ok2):
                    row["error"] = f"wrong output: {(message or message2)[:200]}"
                else:  # 1.0 would be the tolerance's edge
                    row["tolerance_used"] = (
                        ((out.float() - ref).abs() / (task.atol + task.rtol * ref.abs())).max().item()
                    )
                if (ok and ok2) or time_wrong:  # --time-wrong: a probe's row keeps its error and is never best
                    times = [
                        sampler.batched(sub.custom_kernel, batch)[0]
                        if batch
                        else sampler.per_call(sub.custom_kernel, data)[0]
                        for _ in range(samples)
                    ]
                    row.update(mean_ns=statistics.fmean(times), median_ns=statistics.median(times))
                    row["registers"] = {
                        str(k[0]): h.n_regs
                        for k, h in getattr(sub, "_HANDLES", {}).items()
                        if getattr(h, "n_regs", None) is not None
                    }
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
            rows.append(row)
            save(rows)  # a sweep cut short keeps the configs it finished
            log(
                f"  {shape} {cfg}: "
                + ", ".join(
                    ([f"{row['median_ns'] / 1e3:.2f} us"] if "median_ns" in row else [])
                    + ([f"tolerance used {row['tolerance_used']:.3f}"] if "tolerance_used" in row else [])
                    + ([row["error"]] if "error" in row else [])
                )
            )
        sub.CONFIGS[shape] = tuple(base)
    return rows


def best(rows: list[dict]) -> dict:
    out = {}
    for r in rows:
        key = (r["task"], json.dumps(r["shape"], sort_keys=True))
        if "median_ns" in r and "error" not in r and (key not in out or r["median_ns"] < out[key]["median_ns"]):
            out[key] = r
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True)
    ap.add_argument("--task", choices=sorted(FILES), action="append")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--m", type=int, action="append", dest="only_m", help="only the benchmark shapes of this m")
    ap.add_argument(
        "--pre-a",
        type=int,
        help="mxfp4_mm: only configs with this PRE_A (0 fused, 1 first kernel, "
        "2 both operands prepared, then cuBLAS, 3 FP8 operands)",
    )
    ap.add_argument(
        "--stages",
        type=int,
        action="append",
        help="mxfp4_mm: only configs with this STAGES (1: the register prefetch loop, >= 2: cp.async stages)",
    )
    ap.add_argument("--swap", type=int, choices=(0, 1), help="mxfp4_mm: only configs with this SWAP_AB")
    ap.add_argument(
        "--only",
        action="append",
        help="only configs that match this pattern: one field per config "
        "field, '*' or values joined by '/' (repeatable)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=INT",
        help="set a module switch of the submission first, e.g. _PDL=0 (repeatable)",
    )
    ap.add_argument(
        "--time-wrong",
        action="store_true",
        help="time configs whose output is wrong too (timing probes; such rows keep their error)",
    )
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("tune_examples: needs a CUDA GPU", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    log = lambda msg: print(f"[tune {time.monotonic() - t0:6.1f}s] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    device = torch.device("cuda")
    rows = []

    def save(more=()):
        winners = best(rows + list(more))
        doc = {
            "script": "scripts/validation/tune_examples.py",
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "device": device_info(device).__dict__,
            "samples": args.samples,
            "rows": rows + list(more),
            "best": [r for _, r in sorted(winners.items())],
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        return winners

    for name in args.task or sorted(FILES):
        rows += sweep(
            load_task(name),
            device,
            args.samples,
            log,
            args.only_m,
            args.pre_a,
            args.stages,
            args.swap,
            args.only,
            save,
            [kv.split("=", 1) for kv in args.set],
            args.time_wrong,
        )
    winners = save()
    for (task, _), r in sorted(winners.items()):
        s = r["shape"]
        print(f"{task} ({s['m']}, {s['n']}, {s['k']}): {tuple(r['config'])},  # {r['median_ns'] / 1e3:.2f} us")
    for task in sorted({t for t, _ in winners}):
        meds = [r["median_ns"] / 1e3 for (t, _), r in winners.items() if t == task]
        print(f"{task}: geomean of the best per shape {math.exp(sum(map(math.log, meds)) / len(meds)):.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
