"""Prints a markdown summary of the GPU results files in results/ (for the README).

    python scripts/results_summary.py [--results results]

Reads only what the measuring scripts wrote; every number printed comes from those files.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _f(x, digits=2) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def examples(doc) -> list[str]:
    out = [f"Example submissions ({doc['device']['name']}, {doc.get('date', '?')[:10]}, "
           f"mode {doc['mode']}): mean per call in us, (% of SOL), SOL bound"]
    for task, entries in doc["tasks"].items():
        if not entries:
            continue
        shapes = [" ".join(f"{k}={v}" for k, v in c["spec"].items() if k in ("m", "n", "k")) for c in
                  entries[0]["benchmarks"]]
        out += ["", f"**{task}**", "", "| submission | verdict | geomean (us) | " + " | ".join(shapes) + " |",
                "|---|---|---:|" + "---:|" * len(shapes)]
        for e in entries:
            cells = [f"{_f(c['mean_us'])} ({_f(c['percent_of_sol'], 1)}%, {c['sol_bound']})" if c["mean_us"]
                     else "-" for c in e["benchmarks"]]
            out.append(f"| {e['submission']} | {e['verdict']} | {_f(e['score_us'])} | " + " | ".join(cells) + " |")
        baseline = [c.get("baseline_us") for c in entries[0]["benchmarks"]]
        if any(b is not None for b in baseline):
            out.append("| published baseline | | " + _f(math.exp(sum(math.log(b) for b in baseline) / len(baseline)))
                       + " | " + " | ".join(_f(b) for b in baseline) + " |")
    return out


def crosscheck(results: Path) -> list[str]:
    out = []
    for path in sorted(results.glob("h200_crosscheck_*.json")):
        d = _load(path)
        ratios = ", ".join(_f(c["ratio"], 3) for c in d["cases"])
        out.append(f"- {Path(d['submission']).name}: harness / GPU MODE loop per shape: {ratios} "
                   f"(all within 10%: {d['all_within_10pct']})")
    return out


def timing(doc) -> list[str]:
    out = []
    rows = doc.get("submissions", []) + doc.get("matmul_reference", [])
    within = [r for r in rows if r.get("kernel_only_vs_profiler_pct") is not None]
    for what in sorted({r["what"] for r in within}):
        mine = [r for r in within if r["what"] == what]
        devs = [abs(r["kernel_only_vs_profiler_pct"]) for r in mine]
        kernels = [r["profiler_kernels_per_call"] for r in mine if r.get("profiler_kernels_per_call")]
        windows = [abs(100 * (r["kernel_only_ns"] - r["profiler_window_ns"]) / r["profiler_window_ns"])
                   for r in mine if r.get("profiler_window_ns")]
        out.append(f"- kernel-only vs profiler kernel sum, {what}: max |deviation| {_f(max(devs), 1)}%"
                   + (f" ({_f(min(kernels), 0)}-{_f(max(kernels), 0)} kernels per call)" if kernels else "")
                   + f", over {len(devs)} shapes"
                   + (f"; vs the profiler's window of the same graphs: {_f(max(windows), 1)}%" if windows else ""))
    rep = doc.get("repeatability") or {}
    if rep.get("scores_us"):
        out.append(f"- {len(rep['scores_us'])} leaderboard runs of {rep.get('submission')}: scores "
                   + ", ".join(_f(s) for s in rep["scores_us"]) + f" us, CV {_f(rep.get('cv_pct'))}%")
    cache = doc.get("triton_cache") or {}
    if cache.get("cold"):
        out.append(f"- full leaderboard run wall time: cold Triton cache {_f(cache['cold'].get('wall_s'), 1)} s, "
                   f"warm {_f(cache['warm'].get('wall_s'), 1)} s")
    return out


def dispatch_gaps(doc) -> list[str]:
    """Per kernel: the graph window's excess over CUPTI's kernel sum, and CUPTI's gap before each kernel."""
    rows = [r for r in doc.get("rows", []) if "error" not in r and r.get("kernels_per_call")]
    if not rows:
        return []
    excess = [(r["gated_kernel_only_ns"] - r["cupti_sum_ns"]) / r["kernels_per_call"] for r in rows]
    gaps = sorted(g for r in rows for g in r.get("cupti_gaps_first_block_ns", []))
    names = ", ".join(r["name"].split(" {")[0] for r in rows)
    return [(f"- {len(rows)} calls ({names}): the graph window exceeds CUPTI's kernel sum by "
             f"{_f(min(excess), 0)}-{_f(max(excess), 0)} ns per kernel; CUPTI sees {_f(gaps[0], 0)}-"
             f"{_f(gaps[-1], 0)} ns (median {_f(gaps[len(gaps) // 2], 0)}) before each kernel")]


def ranked_runs(results: Path) -> list[str]:
    """The ranked runs with the device-clock check (h200_runs/*.leaderboard_clock.json, RunResult JSON)."""
    out = []
    for path in sorted(results.glob("h200_runs/*.leaderboard_clock.json")):
        d = _load(path)
        excess = [c["extra"]["device_clock_excess_ns"] for c in d["cases"]
                  if c["kind"] == "leaderboard" and c.get("extra", {}).get("device_clock_excess_ns") is not None]
        out.append(f"- {d['submission']['name']} on {d['task']} ({d['started_at'][:10]}): {d['verdict'].upper()}, "
                   f"score {_f(d['score_us'], 3)} us, wall {_f(d['wall_s'], 1)} s, "
                   f"of which input generation {_f(d['phases_s'].get('generate'), 1)} s in the parent and "
                   f"{_f(d['phases_s'].get('worker_generate'), 1)} s in the worker, warm-up "
                   f"{_f(d['phases_s'].get('warmup'), 1)} s, timing {_f(d['phases_s'].get('timing'), 1)} s"
                   + (f"; device-clock excess {_f(min(excess) / 1e3)} to {_f(max(excess) / 1e3)} us per sample"
                      if excess else ""))
    return out


def gpu_tests(path: Path) -> list[str]:
    import xml.etree.ElementTree as ET
    try:
        suite = ET.parse(path).getroot().find("testsuite")
    except (OSError, ET.ParseError):
        return []
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None or c.find("error") is not None]
    return [f"GPU tests ({path.name}, {suite.get('timestamp', '?')[:10]}): {int(suite.get('tests', 0)) - len(failed)} "
            f"passed, {len(failed)} failed" + (": " + ", ".join(failed) if failed else "")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=str(Path(__file__).resolve().parents[1] / "results"))
    args = ap.parse_args(argv)
    r = Path(args.results)
    lines = []
    peaks = _load(r / "device_peaks.json")
    if peaks:
        for key, row in peaks["devices"].items():
            lines.append(f"Measured peaks, {key} ({row['date'][:10]}): copy {_f(row['mem_bytes_per_s'] / 1e12)} TB/s, "
                         + ", ".join(f"{k} {_f(v / 1e12, 0)} TFLOP/s" for k, v in row["matrix_flops_per_s"].items())
                         + f", launch floor {_f(row['launch_floor_ns'] / 1e3)} us, per-call overhead of a tiny "
                         f"torch op {_f(row.get('per_call_overhead_ns', float('nan')) / 1e3)} us")
        lines.append("")
    ex = _load(r / "h200_examples.json")
    if ex:
        lines += examples(ex) + [""]
    cc = crosscheck(r)
    if cc:
        lines += ["Protocol cross-check (scripts/crosscheck_protocol.py):"] + cc + [""]
    tm = _load(r / "h200_timing.json")
    if tm:
        lines += ["Timing validation (scripts/validate_timing.py):"] + timing(tm) + [""]
    gg = _load(r / "h200_graph_gaps.json")
    if gg:
        lines += [f"Dispatch gaps (scripts/dev_graph_gaps.py, {gg.get('date', '?')[:10]}):"] + dispatch_gaps(gg) + [""]
    rr = ranked_runs(r)
    if rr:
        lines += ["Ranked runs (`python -m harness run --mode leaderboard`, device-clock check on):"] + rr + [""]
    for xml in ("h200_gpu_tests.xml", "h200_gpu_security_tests.xml"):
        lines += gpu_tests(r / xml)
    dov = _load(r / "h200_defense_overhead.json")
    if dov:
        lines.append(f"Defense overhead (scripts/defense_overhead.py): score with defenses on / off = "
                     f"{_f(dov['ratio_on_over_off'], 3)} over {dov['runs_each']} runs each (within 5%: "
                     f"{dov['within_5_percent']})")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
