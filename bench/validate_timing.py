"""Can the harness's timings be trusted? (issue #7) One results file from one device run.

(a) per shape: competition mean, kernel-only (CUDA graphs behind the launch gate), the profiler's
    kernel sum and window from the same graphs, the deviation of kernel-only from the kernel sum and
    the launch overhead, for a cuBLAS bf16 matmul (``A @ B.T`` on mxfp4_mm's bf16 inputs, timed in
    this process with the harness's own primitives: it would fail mxfp4_mm's check, so it does not go
    through the runner) and for the example submissions through ``run_submission`` (--verify-timing);
(b) ``--runs`` independent leaderboard runs (distinct secrets) of triton_mxfp4 on mxfp4_mm: scores,
    bootstrap intervals and the coefficient of variation of the score;
(c) the wall time of a full leaderboard run of mxfp4_mm with a cold Triton cache and a warm one.

    python bench/validate_timing.py --out results/h200_timing.json          # on the GPU, < ~4 min
    python bench/validate_timing.py --quick --out /tmp/timing_cpu.json       # CPU: small fixtures

Every GPU-only figure that cannot be had is null with a note; a failing step becomes a note in the
file, never a crash. The file is rewritten after each section.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
import json
import platform
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from relative_paths import repo_relative  # noqa: E402

import harness  # noqa: E402
from harness.api import RunOptions, run_submission  # noqa: E402
from harness.engine.device import device_info, select_device  # noqa: E402
from harness.results import json_safe  # noqa: E402
from harness.worker.kernel_only import graph_kernel_time  # noqa: E402
from harness.worker.sampler import Sampler  # noqa: E402
from tasks import load_task  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "tasks"
SUBS = ROOT / "submissions"
T0 = time.monotonic()
# Sections (a) and (b) share one Triton cache, so triton_mxfp4 compiles once (section (c) measures the
# compile cost on its own fresh cache). Made world-writable: the worker may run as 'nobody'.
SHARED_CACHE = tempfile.mkdtemp(prefix="validate-timing-triton-")
Path(SHARED_CACHE).chmod(0o777)


def log(msg: str) -> None:
    print(f"[validate_timing {time.monotonic() - T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def _versions() -> dict:
    import importlib.metadata as md

    out = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "harness": harness.__version__,
        "cuda_runtime": torch.version.cuda,
    }
    for pkg in ("triton", "numpy", "nvidia-ml-py"):
        try:
            out[pkg] = md.version(pkg)
        except Exception:
            out[pkg] = None
    return out


def _pct(a, b):
    return 100.0 * (a - b) / b if a is not None and b else None


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip()[:500]}"


# -- (a) ------------------------------------------------------------------------------------------
def matmul_reference(task, device, repeats: int) -> list[dict]:
    """cuBLAS bf16 ``A @ B.T`` per benchmark shape, with the harness's timing primitives."""
    info = device_info(device)
    sampler = Sampler(device, info.l2_bytes, task.original_clear_bytes)
    fn = lambda d: d[0] @ d[1].T  # noqa: E731
    rows = []
    log(f"matmul timing: {sampler.method}")
    for case in task.benchmarks:
        row: dict[str, Any] = {"what": "cuBLAS bf16 A @ B.T (reference kernel)", "shape": _shape(case)}
        try:
            data = task.generate_input(case, device)
            for _ in range(3):
                sampler.per_call(fn, data)
            samples = [sampler.per_call(fn, data)[0] for _ in range(repeats)]
            row["competition_mean_ns"] = statistics.fmean(samples)
            row["competition_median_ns"] = statistics.median(samples)
            graph = graph_kernel_time(fn, [data], device, sampler.flush, gate=sampler.gate, profile=True)
            prof = graph.get("profiler") or {"ns": None, "note": graph["note"]}
            row.update(
                kernel_only_ns=graph["ns"],
                kernel_only_note=graph["note"],
                kernel_only_spread_pct=graph.get("spread_pct"),
                kernel_only_nodes_per_call=graph.get("nodes_per_call"),
                profiler_kernel_ns=prof["ns"],
                profiler_note=prof["note"],
                profiler_window_ns=prof.get("window_ns"),
                kernel_only_vs_profiler_pct=_pct(graph["ns"], prof["ns"]),
                profiler_kernels_per_call=prof.get("kernels_per_call"),
                launch_overhead_ns=(row["competition_mean_ns"] - graph["ns"] if graph["ns"] is not None else None),
            )
        except Exception as exc:
            row["error"] = _error(exc)
        rows.append(row)
        log(f"matmul {row['shape']}: {_brief(row)}")
    return rows


def _shape(spec: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in spec.items() if k != "seed")


def _brief(row: dict) -> str:
    if row.get("error"):
        return "error: " + row["error"]
    f = lambda k: "-" if row.get(k) is None else f"{row[k] / 1e3:.2f}"  # noqa: E731
    dev = row.get("kernel_only_vs_profiler_pct")
    return (
        f"mean {f('competition_mean_ns')} us, kernel-only {f('kernel_only_ns')}, profiler "
        f"{f('profiler_kernel_ns')}, dev {'-' if dev is None else f'{dev:+.1f}%'}, "
        f"launch {f('launch_overhead_ns')}"
    )


def submissions_verify(pairs, device: str, repeats: int) -> list[dict]:
    rows: list[dict[str, Any]] = []
    for sub, task in pairs:
        name = f"{Path(sub).name} on {Path(task).parent.name if task.endswith('.yml') else task}"
        log(f"benchmark --verify-timing: {name}")
        try:
            r = run_submission(
                sub,
                task,
                "benchmark",
                RunOptions(device=device, max_repeats=repeats, verify_timing=True, triton_cache_dir=SHARED_CACHE),
            )
        except Exception as exc:
            rows.append({"what": name, "error": _error(exc)})
            continue
        for c in r.benchmark_cases():
            x = c.extra
            row: dict[str, Any] = {
                "what": name,
                "shape": _shape(c.spec),
                "verdict": c.verdict,
                "competition_mean_ns": c.stats.mean if c.stats else None,
                "competition_median_ns": c.stats.median if c.stats else None,
                **{
                    k: x.get(k)
                    for k in (
                        "kernel_only_ns",
                        "kernel_only_method",
                        "kernel_only_note",
                        "kernel_only_spread_pct",
                        "kernel_only_nodes_per_call",
                        "profiler_kernel_ns",
                        "profiler_window_ns",
                        "profiler_note",
                        "kernel_only_vs_profiler_pct",
                        "launch_overhead_ns",
                        "profiler_kernels_per_call",
                        "clocks_before",
                        "clocks_after",
                    )
                },
                "warnings": c.warnings,
            }
            if c.verdict != "pass":
                row["error"] = c.message
            rows.append(row)
            log(f"  {row['shape']}: {_brief(row)}")
        if r.verdict != "pass" and not r.benchmark_cases():
            rows.append({"what": name, "error": r.message})
    return rows


# -- (b) ------------------------------------------------------------------------------------------
def repeatability(sub, task, device: str, runs: int, repeats: int) -> dict:
    scores: list[float] = []
    out: dict[str, Any] = {"submission": Path(sub).name, "task": repo_relative(task), "runs": []}
    for i in range(runs):
        log(f"leaderboard run {i + 1}/{runs}")
        try:
            r = run_submission(
                sub,
                task,
                "leaderboard",
                RunOptions(
                    device=device, secret=f"validate-timing-{i}", max_repeats=repeats, triton_cache_dir=SHARED_CACHE
                ),
            )
            out["runs"].append(
                {
                    "score_us": r.score_us,
                    "score_ci_us": r.score_ci_us,
                    "verdict": r.verdict,
                    "wall_s": r.wall_s,
                    "phases_s": r.phases_s,
                    "message": r.message,
                    "case_means_us": [c.stats.mean / 1e3 if c.stats else None for c in r.benchmark_cases()],
                }
            )
            if r.score_us is not None:
                scores.append(r.score_us)
            ci = "-" if not r.score_ci_us else f"{r.score_ci_us[0]:.3f}-{r.score_ci_us[1]:.3f}"
            score = "-" if r.score_us is None else f"{r.score_us:.3f}"
            log(f"  score {score} us (95% CI {ci}), wall {r.wall_s:.1f} s, {r.verdict}")
        except Exception as exc:
            out["runs"].append({"error": _error(exc)})
    out["scores_us"] = scores
    out["cv_pct"] = (100 * statistics.stdev(scores) / statistics.fmean(scores)) if len(scores) > 1 else None
    return out


# -- (c) ------------------------------------------------------------------------------------------
def triton_cache_walls(sub, task, device: str) -> dict:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="validate-triton-cache-") as cache:
        Path(cache).chmod(0o777)
        for label in ("cold", "warm"):
            log(f"full leaderboard run, {label} Triton cache")
            try:
                r = run_submission(
                    sub,
                    task,
                    "leaderboard",
                    RunOptions(device=device, secret="validate-timing-cache", triton_cache_dir=cache),
                )
                out[label] = {
                    "wall_s": r.wall_s,
                    "verdict": r.verdict,
                    "score_us": r.score_us,
                    "phases_s": r.phases_s,
                    "message": r.message,
                }
                log(f"  wall {r.wall_s:.1f} s ({r.verdict})")
            except Exception as exc:
                out[label] = {"error": _error(exc)}
    cold, warm = out.get("cold", {}).get("wall_s"), out.get("warm", {}).get("wall_s")
    out["cold_minus_warm_s"] = cold - warm if cold is not None and warm is not None else None
    return out


def _us(row: dict, key: str) -> str:
    """row[key] (ns) in us, or '-' where it is missing."""
    return "-" if row.get(key) is None else f"{row[key] / 1e3:.2f}"


def _row_line(row: dict) -> str:
    """One measured thing's line of the table (times in us)."""
    if row.get("error") and "shape" not in row:
        return f"{row['what'][:34]:34} error: {row['error'][:80]}"
    f = functools.partial(_us, row)
    dev, kernels = row.get("kernel_only_vs_profiler_pct"), row.get("profiler_kernels_per_call")
    return (
        f"{row['what'][:34]:34} {row.get('shape', '')[:26]:26} {f('competition_mean_ns'):>9} "
        f"{f('kernel_only_ns'):>9} {f('profiler_kernel_ns'):>9} "
        f"{'-' if dev is None else f'{dev:+.1f}':>7} {f('profiler_window_ns'):>9} "
        f"{'-' if kernels is None else f'{kernels:g}':>7} "
        f"{f('launch_overhead_ns'):>8}"
    )


def _wall(cache: dict, key: str) -> str:
    return "-" if (cache.get(key) or {}).get("wall_s") is None else f"{cache[key]['wall_s']:.1f} s"


def _table(results: dict) -> str:
    lines = [
        "",
        f"{'what':34} {'shape':26} {'mean':>9} {'k-only':>9} {'prof':>9} {'dev%':>7} "
        f"{'p-window':>9} {'kernels':>7} {'launch':>8}  (us)",
    ]
    lines += [_row_line(row) for row in results.get("matmul_reference", []) + results.get("submissions", [])]
    rep = results.get("repeatability") or {}
    if rep:
        cv = rep.get("cv_pct")
        lines.append(
            f"\nleaderboard x{len(rep.get('runs', []))} ({rep.get('submission')}): scores "
            + ", ".join(f"{s:.3f}" for s in rep.get("scores_us", []))
            + f" us; CV {'-' if cv is None else f'{cv:.2f}%'}"
        )
    cache = results.get("triton_cache") or {}
    if cache:
        lines.append(f"full leaderboard wall: cold Triton cache {_wall(cache, 'cold')}, warm {_wall(cache, 'warm')}")
    notes = sorted({row.get("kernel_only_note") or "" for row in results.get("submissions", [])} - {""})
    lines += [f"note: {n}" for n in notes[:5]]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", default="results/timing_validation.json", help="results file (JSON)")
    p.add_argument("--runs", type=int, default=5, help="leaderboard runs for the repeatability section")
    p.add_argument("--quick", action="store_true", help="small fixture tasks, 2 runs: checks the script end to end")
    p.add_argument("--device", help="auto (default), cpu or cuda[:N]")
    p.add_argument("--sections", default="a,b,c", help="which sections to run (a, b, c)")
    args = p.parse_args(argv)
    device = select_device(args.device)
    gpu = device.type == "cuda"
    runs = 2 if args.quick and args.runs == 5 else args.runs
    if args.quick:
        mx, nv = str(FIX / "mxfp4_small" / "task.yml"), str(FIX / "nvfp4_small" / "task.yml")
    else:
        mx, nv = "mxfp4_mm", "nvfp4_gemm"
    repeats_a, repeats_b = (30, 50) if gpu else (3, 3)
    results = {
        "script": "bench/validate_timing.py",
        "argv": sys.argv[1:] if argv is None else list(argv),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": dataclasses.asdict(device_info(device)),
        "versions": _versions(),
        "quick": args.quick,
        "notes": []
        if gpu
        else [
            "CPU run: every GPU-only figure (kernel-only, profiler kernel sum, "
            "launch overhead, clocks) is null with a 'not available on CPU' note; "
            "times are host-clock times"
        ],
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save():
        out.write_text(json.dumps(json_safe(results), indent=2, sort_keys=True, default=str) + "\n")

    sections = set(args.sections.split(","))
    steps: list[tuple[str, Callable[[], Any]]] = []
    if "a" in sections:
        steps += [
            ("matmul_reference", lambda: matmul_reference(load_task(mx), device, repeats_a)),
            (
                "submissions",
                lambda: submissions_verify(
                    [
                        (str(SUBS / "torch_mxfp4.py"), mx),
                        (str(SUBS / "triton_mxfp4.py"), mx),
                        (str(SUBS / "gluon.py"), mx),
                        (str(SUBS / "torch_nvfp4.py"), nv),
                        (str(SUBS / "triton_nvfp4.py"), nv),
                    ],
                    str(device),
                    repeats_a,
                ),
            ),
        ]
    if "b" in sections:
        steps.append(
            ("repeatability", lambda: repeatability(str(SUBS / "triton_mxfp4.py"), mx, str(device), runs, repeats_b))
        )
    if "c" in sections:
        steps.append(("triton_cache", lambda: triton_cache_walls(str(SUBS / "triton_mxfp4.py"), mx, str(device))))
    for key, step in steps:
        t = time.monotonic()
        try:
            results[key] = step()
        except Exception as exc:
            results[key] = {"error": _error(exc), "traceback": traceback.format_exc()[-3000:]}
        results.setdefault("section_wall_s", {})[key] = time.monotonic() - t
        save()
    results["total_wall_s"] = time.monotonic() - T0
    save()
    import shutil

    shutil.rmtree(SHARED_CACHE, ignore_errors=True)
    print(_table(results))
    print(f"\nwrote {out} ({results['total_wall_s']:.0f} s, device {results['device']['name']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
