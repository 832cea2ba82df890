"""Prints a markdown summary of the GPU results files in results/: the short form (two tables, for the
README) or, with --long, every figure (for results/README.md).

    python scripts/results_summary.py                    # short form
    python scripts/results_summary.py --long             # long form
    python scripts/results_summary.py --update           # rewrite both generated blocks in place

Reads only what the measuring scripts wrote (results/ and the measured peaks shipped in
harness/data/device_peaks.json); every number printed comes from those files. --update replaces the
text between the '<!-- results_summary ... -->' markers in README.md (short) and results/README.md (long).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.report.tables import format_rows  # noqa: E402
from harness.results import shape_label  # noqa: E402

PEAKS = ROOT / "harness" / "data" / "device_peaks.json"
BLOCKS = {"short": ROOT / "README.md", "long": ROOT / "results" / "README.md"}


def _load(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _f(x, digits=2) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def _geomean(xs) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _range(xs, digits=2, unit="") -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    lo, hi = min(xs), max(xs)
    return f"{_f(lo, digits)}{unit}" if lo == hi else f"{_f(lo, digits)} to {_f(hi, digits)}{unit}"


# ---------------------------------------------------------------- readers (one results file each)


def peaks_lines(doc) -> list[str]:
    return [
        f"Measured peaks, {key} ({row['date'][:10]}): copy {_f(row['mem_bytes_per_s'] / 1e12)} TB/s, "
        + ", ".join(f"{k} {_f(v / 1e12, 0)} TFLOP/s" for k, v in row["matrix_flops_per_s"].items())
        + f", launch floor {_f(row['launch_floor_ns'] / 1e3)} us, per-call overhead of a tiny "
        f"torch op {_f(row.get('per_call_overhead_ns', float('nan')) / 1e3)} us"
        for key, row in doc["devices"].items()
    ]


def examples(doc) -> list[str]:
    out = [
        f"Example submissions ({doc['device']['name']}, {doc.get('date', '?')[:10]}, "
        f"mode {doc['mode']}): mean per call in us, (% of SOL), SOL bound"
    ]
    for task, entries in doc["tasks"].items():
        if not entries:
            continue
        shapes = [shape_label(c["spec"]) for c in entries[0]["benchmarks"]]
        rows = [
            [e["submission"], e["verdict"], _f(e["score_us"])]
            + [
                f"{_f(c['mean_us'])} ({_f(c['percent_of_sol'], 1)}%, {c['sol_bound']})" if c["mean_us"] else "-"
                for c in e["benchmarks"]
            ]
            for e in entries
        ]
        baseline = [c.get("baseline_us") for c in entries[0]["benchmarks"]]
        if all(b is not None for b in baseline):
            rows.append(["published baseline", "", _f(_geomean(baseline))] + [_f(b) for b in baseline])
        out += [
            "",
            f"**{task}**",
            "",
            format_rows(
                ["submission", "verdict", "geomean (us)", *shapes], rows, "markdown", right=range(2, 3 + len(shapes))
            ).rstrip("\n"),
        ]
    return out


def crosscheck(results: Path) -> list[dict]:
    return [d for d in (_load(p) for p in sorted(results.glob("h200_crosscheck_*.json"))) if d]


def crosscheck_lines(docs) -> list[str]:
    return [
        f"- {Path(d['submission']).name}: harness / GPU MODE loop per shape: "
        + ", ".join(_f(c["ratio"], 3) for c in d["cases"])
        + f" (all within 10%: {d['all_within_10pct']})"
        for d in docs
    ]


def timing_rows(doc) -> list[dict]:
    """Per measured thing: the largest |kernel-only - profiler kernel sum| and |... - profiler window|."""
    rows = doc.get("submissions", []) + doc.get("matmul_reference", [])
    within = [r for r in rows if r.get("kernel_only_vs_profiler_pct") is not None]
    out = []
    for what in sorted({r["what"] for r in within}):
        mine = [r for r in within if r["what"] == what]
        kernels = [r["profiler_kernels_per_call"] for r in mine if r.get("profiler_kernels_per_call")]
        windows = [
            abs(100 * (r["kernel_only_ns"] - r["profiler_window_ns"]) / r["profiler_window_ns"])
            for r in mine
            if r.get("profiler_window_ns")
        ]
        out.append(
            {
                "what": what,
                "shapes": len(mine),
                "kernels": kernels,
                "windows": windows,
                "max_dev": max(abs(r["kernel_only_vs_profiler_pct"]) for r in mine),
            }
        )
    return out


def timing_lines(doc) -> list[str]:
    out = [
        f"- kernel-only vs profiler kernel sum, {t['what']}: max |deviation| {_f(t['max_dev'], 1)}%"
        + (f" ({_f(min(t['kernels']), 0)}-{_f(max(t['kernels']), 0)} kernels per call)" if t["kernels"] else "")
        + f", over {t['shapes']} shapes"
        + (f"; vs the profiler's window of the same graphs: {_f(max(t['windows']), 1)}%" if t["windows"] else "")
        for t in timing_rows(doc)
    ]
    rep = doc.get("repeatability") or {}
    if rep.get("scores_us"):
        out.append(
            f"- {len(rep['scores_us'])} leaderboard runs of {rep.get('submission')}: scores "
            + ", ".join(_f(s) for s in rep["scores_us"])
            + f" us, CV {_f(rep.get('cv_pct'))}%"
        )
    cache = doc.get("triton_cache") or {}
    if cache.get("cold"):
        out.append(
            f"- full leaderboard run wall time: cold Triton cache {_f(cache['cold'].get('wall_s'), 1)} s, "
            f"warm {_f(cache['warm'].get('wall_s'), 1)} s"
        )
    return out


def dispatch_gaps(doc) -> list[str]:
    """Per kernel: the graph window's excess over CUPTI's kernel sum, and CUPTI's gap before each kernel."""
    rows = [r for r in doc.get("rows", []) if "error" not in r and r.get("kernels_per_call")]
    if not rows:
        return []
    excess = [(r["gated_kernel_only_ns"] - r["cupti_sum_ns"]) / r["kernels_per_call"] for r in rows]
    gaps = [g for r in rows for g in r.get("cupti_gaps_first_block_ns", [])]
    names = ", ".join(r["name"].split(" {")[0] for r in rows)
    return [
        (
            f"- {len(rows)} calls ({names}): the graph window exceeds CUPTI's kernel sum by "
            f"{_f(min(excess), 0)}-{_f(max(excess), 0)} ns per kernel; CUPTI sees {_f(min(gaps), 0)}-"
            f"{_f(max(gaps), 0)} ns (median {_f(statistics.median(gaps), 0)}) before each kernel"
        )
    ]


def kernel_split_lines(doc) -> list[str]:
    """Per shape: the ranked mean per call, its kernel-only part and the rest (the launch overhead)."""
    out = []
    for task, entries in doc["tasks"].items():
        for e in entries:
            parts = [
                f"{shape_label(c['spec'])}: {_f(c['mean_us'])} = {_f(c['kernel_only_us'])} kernel-only + "
                f"{_f(c['mean_us'] - c['kernel_only_us'])} launch"
                + (f" (published {_f(c['baseline_us'])})" if c.get("baseline_us") else "")
                for c in e["benchmarks"]
                if c["mean_us"] and c["kernel_only_us"]
            ]
            out.append(f"- {e['submission']} on {task}, us: " + "; ".join(parts))
    return out


def ranked(results: Path) -> list[dict]:
    """The ranked runs with the device-clock check (h200_runs/*.leaderboard_clock.json, RunResult JSON)."""
    return [d for d in (_load(p) for p in sorted(results.glob("h200_runs/*.leaderboard_clock.json"))) if d]


def _clock_excess_ns(run) -> list[float]:
    return [
        c["extra"]["device_clock_excess_ns"]
        for c in run["cases"]
        if c["kind"] == "leaderboard" and c.get("extra", {}).get("device_clock_excess_ns") is not None
    ]


def ranked_lines(runs) -> list[str]:
    out = []
    for d in runs:
        excess = _clock_excess_ns(d)
        out.append(
            f"- {d['submission']['name']} on {d['task']} ({d['started_at'][:10]}): {d['verdict'].upper()}, "
            f"score {_f(d['score_us'], 3)} us, wall {_f(d['wall_s'], 1)} s, "
            f"of which input generation {_f(d['phases_s'].get('generate'), 1)} s in the parent and "
            f"{_f(d['phases_s'].get('worker_generate'), 1)} s in the worker, warm-up "
            f"{_f(d['phases_s'].get('warmup'), 1)} s, timing {_f(d['phases_s'].get('timing'), 1)} s"
            + (
                f"; device-clock excess {_f(min(excess) / 1e3)} to {_f(max(excess) / 1e3)} us per sample"
                if excess
                else ""
            )
        )
    return out


def gpu_tests(path: Path) -> dict | None:
    try:
        suite = ET.parse(path).getroot().find("testsuite")
    except (OSError, ET.ParseError):
        return None
    if suite is None:
        return None
    failed = [
        c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None or c.find("error") is not None
    ]
    skipped = sum(c.find("skipped") is not None for c in suite.iter("testcase"))
    return {
        "file": path.name,
        "date": suite.get("timestamp", "?")[:10],
        "failed": failed,
        "skipped": skipped,
        "passed": int(suite.get("tests", 0)) - len(failed) - skipped,
    }


def gpu_test_line(t: dict) -> str:
    return (
        f"GPU tests ({t['file']}, {t['date']}): {t['passed']} passed, {len(t['failed'])} failed, "
        f"{t.get('skipped', 0)} skipped" + (": " + ", ".join(t["failed"]) if t["failed"] else "")
    )


def defense_line(d) -> str:
    return (
        f"Defense overhead (bench/defense_overhead.py): score with defenses on / off = "
        f"{_f(d['ratio_on_over_off'], 3)} over {d['runs_each']} runs each (within 5%: {d['within_5_percent']})"
    )


# ---------------------------------------------------------------- the two forms


def long_form(r: Path) -> str:
    lines = []
    peaks = _load(PEAKS)
    if peaks:
        lines += [*peaks_lines(peaks), ""]
    ex = _load(r / "h200_examples.json")
    if ex:
        lines += [*examples(ex), ""]
    kr = _load(r / "h200_examples_ranked.json")
    if kr:
        lines += [
            *examples(kr),
            "",
            "Where the ranked time goes (kernel-only from CUDA graphs behind the launch gate):",
        ]
        lines += [*kernel_split_lines(kr), ""]
    cc = crosscheck(r)
    if cc:
        lines += ["Protocol cross-check (bench/crosscheck_protocol.py):", *crosscheck_lines(cc), ""]
    tm = _load(r / "h200_timing.json")
    if tm:
        lines += ["Timing validation (bench/validate_timing.py):", *timing_lines(tm), ""]
    gg = _load(r / "h200_graph_gaps.json")
    if gg:
        lines += [
            f"Dispatch gaps (scripts/dev_graph_gaps.py, a development probe since removed; "
            f"{gg.get('date', '?')[:10]}):",
            *dispatch_gaps(gg),
            "",
        ]
    rr = ranked(r)
    if rr:
        lines += ["Ranked runs (`python -m harness run --mode leaderboard`, device-clock check on):"]
        lines += [*ranked_lines(rr), ""]
    lines += [gpu_test_line(t) for t in (gpu_tests(r / x) for x in GPU_TEST_FILES) if t]
    dov = _load(r / "h200_defense_overhead.json")
    if dov:
        lines.append(defense_line(dov))
    return "\n".join(lines).rstrip("\n") + "\n"


def _example_rows(doc) -> list[list[str]]:
    rows = []
    for task, entries in doc["tasks"].items():
        baseline = [c.get("baseline_us") for c in entries[0]["benchmarks"]] if entries else []
        base = _f(_geomean(baseline)) if baseline and all(b is not None for b in baseline) else "-"
        for e in entries:
            rows.append(
                [
                    task,
                    e["submission"],
                    e["verdict"],
                    _f(e["score_us"]),
                    _range([c.get("percent_of_sol") for c in e["benchmarks"]], 1, "%"),
                    base,
                ]
            )
    return rows


def _example_table(doc) -> str:
    return format_rows(
        ["task", "submission", "verdict", "score (us)", "% of SOL", "published baseline (us)"],
        _example_rows(doc),
        "markdown",
        right=(3, 5),
    )


def _days(dates) -> str:
    """The day (or first and last days) of ISO timestamps: when a row's files were measured."""
    days = sorted({d[:10] for d in dates if d})
    if not days:
        return "?"
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"


def _what_was_timed(devs) -> str:
    cublas = sum("cuBLAS" in t["what"] for t in devs)
    return f"{len(devs) - cublas} examples" + (" and cuBLAS" if cublas else "")


def _crosscheck_rows(r: Path) -> list[list[str]]:
    cc = crosscheck(r)
    if not cc:
        return []
    ratios = [c["ratio"] for d in cc for c in d["cases"]]
    return [
        [
            "harness / GPU MODE's own loop (" + ", ".join(Path(d["submission"]).stem for d in cc) + ")",
            f"{_range(ratios, 3)}; all within 10%: {all(d['all_within_10pct'] for d in cc)}",
            "h200_crosscheck_*.json",
            _days(d.get("date") for d in cc),
        ]
    ]


def _timing_rows(r: Path) -> list[list[str]]:
    tm = _load(r / "h200_timing.json")
    if not tm:
        return []
    rows = []
    devs = timing_rows(tm)
    if devs:
        rows.append(
            [
                "kernel-only vs the profiler's kernel sum (max over shapes)",
                _range([t["max_dev"] for t in devs], 1, "%") + f" over {_what_was_timed(devs)}",
                "h200_timing.json",
                _days([tm.get("date")]),
            ]
        )
    rep = tm.get("repeatability") or {}
    if rep.get("scores_us"):
        rows.append(
            [
                f"score of {len(rep['scores_us'])} ranked runs of {rep.get('submission')}",
                f"{_range(rep['scores_us'])} us, CV {_f(rep.get('cv_pct'))}%",
                "h200_timing.json",
                _days([tm.get("date")]),
            ]
        )
    return rows


def _ranked_rows(r: Path) -> list[list[str]]:
    rr = ranked(r)
    if not rr:
        return []
    excess = [x for d in rr for x in _clock_excess_ns(d)]
    passed = sum(d["verdict"] == "pass" for d in rr)
    return [
        [
            f"ranked runs of {len(rr)} examples, device-clock check on",
            f"{passed} of {len(rr)} pass; clock excess {_range([x / 1e3 for x in excess])} us per sample",
            "h200_runs/*.leaderboard_clock.json",
            _days(d.get("started_at") for d in rr),
        ]
    ]


def _verdict_time_rows(r: Path) -> list[list[str]]:
    """Issue #49: the wall time of a whole-process ranked verdict once the file is compiled."""
    rows = []
    for name, how in (("verdict_time.json", "a process of its own"), ("verdict_time_server.json", "a verdict server")):
        doc = _load(r / "h200_verdicts" / name)
        if not doc:
            continue
        walls = [
            f"{Path(sub).stem} {_range([v['wall_s'] for v in runs if v['cache'] == 'filled'], 1)} s"
            for sub, runs in doc["verdicts"].items()
        ]
        commit = doc["environment"].get("commit") or "?"
        rows.append(
            [
                f"ranked verdict, compile cache filled, {how} ({commit[:7]})",
                ", ".join(walls),
                f"h200_verdicts/{name}",
                _days([doc["environment"].get("date")]),
            ]
        )
    return rows


def _ranks_rows(r: Path) -> list[list[str]]:
    """Issue #50: boards of identical copies (all tied?) and final scorings (the slower variant below?)."""
    rows = []
    for path in sorted((r / "ranks").glob("ranks-h200-*.json")):
        doc = _load(path)
        for t in (doc or {}).get("tasks", []):
            if t.get("boards"):
                boards = t["boards"]
                rows.append(
                    [
                        f"{t['task']}: boards of {len(boards[0]['ranks'])} identical copies ({doc['commit']})",
                        f"{t['boards_all_tied']} of {len(boards)} all tied; median 95% half-width "
                        f"{_f(100 * t['median_half_width_rel'])}%, median board {_f(t['median_board_wall_s'], 0)} s",
                        f"ranks/{path.name}",
                        _days([doc.get("date")]),
                    ]
                )
            if t.get("finals"):
                rows.append(
                    [
                        f"{t['task']}: final scoring of a copy, the file and a slower variant ({doc['commit']})",
                        f"{t['finals_passed']} of {len(t['finals'])} ranked the variant "
                        f"({_f(100 * t['median_final_slowdown'], 1)}% slower) below and tied the copies",
                        f"ranks/{path.name}",
                        _days([doc.get("date")]),
                    ]
                )
    return rows


# the GPU test files the summaries show, with the label of their row
GPU_TEST_FILES = {
    "h200_gpu_tests_runs.xml": "GPU tests of the examples' runs",
    "h200_gpu_tests_core.xml": "GPU tests: attacks, sandbox, pool, deadline, timing",
    "h200_gpu_tests_compile_cache.xml": "GPU test: harness kernels in a sealed cache entry",
}


def _gpu_test_rows(r: Path) -> list[list[str]]:
    rows = []
    for xml, label in GPU_TEST_FILES.items():
        t = gpu_tests(r / xml)
        if t:
            result = f"{t['passed']} passed, {len(t['failed'])} failed, {t.get('skipped', 0)} skipped"
            rows.append([label, result, xml, _days([t["date"]])])
    return rows


def _defense_rows(r: Path) -> list[list[str]]:
    dov = _load(r / "h200_defense_overhead.json")
    if not dov:
        return []
    return [
        [
            "score with the defenses on / off",
            f"{_f(dov['ratio_on_over_off'], 3)} (median of {dov['runs_each']} each; within 5%: {dov['within_5_percent']})",
            "h200_defense_overhead.json",
            _days([dov.get("date")]),
        ]
    ]


def _peak_rows() -> list[list[str]]:
    peaks = _load(PEAKS)
    return [
        [
            f"measured peaks, {key}",
            f"copy {_f(row['mem_bytes_per_s'] / 1e12)} TB/s, "
            + ", ".join(f"{k} {_f(v / 1e12, 0)}" for k, v in row["matrix_flops_per_s"].items())
            + f" TFLOP/s, launch {_f(row['launch_floor_ns'] / 1e3)} us",
            "harness/data/device_peaks.json",
            _days([row.get("date")]),
        ]
        for key, row in (peaks or {}).get("devices", {}).items()
    ]


def _check_rows(r: Path) -> list[list[str]]:
    return [
        *_crosscheck_rows(r),
        *_timing_rows(r),
        *_ranked_rows(r),
        *_verdict_time_rows(r),
        *_ranks_rows(r),
        *_gpu_test_rows(r),
        *_defense_rows(r),
        *_peak_rows(),
    ]


def short_form(r: Path) -> str:
    ex = _load(r / "h200_examples.json")
    parts = []
    if ex:
        parts.append(
            f"Example submissions, {ex['device']['name']}, {ex.get('date', '?')[:10]}, mode {ex['mode']} "
            "(score: geometric mean over the benchmark shapes of the mean per call):\n\n" + _example_table(ex)
        )
    kr = _load(r / "h200_examples_ranked.json")
    if kr:
        parts.append(
            f"The Triton examples ranked (mode {kr['mode']}, {kr.get('date', '?')[:10]}, after the kernel "
            "work of issue #21):\n\n" + _example_table(kr)
        )
    checks = _check_rows(r)
    if checks:
        parts.append(format_rows(["check", "result", "file", "measured"], checks, "markdown"))
    return "\n".join(parts)


def update(path: Path, text: str, form: str) -> None:
    begin, end = f"<!-- results_summary {form}: begin -->", f"<!-- results_summary {form}: end -->"
    doc = path.read_text()
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(doc):
        raise SystemExit(f"{path} has no '{begin}' ... '{end}' block to replace")
    path.write_text(pattern.sub(lambda _: f"{begin}\n{text}{end}", doc))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--results", default=str(ROOT / "results"), help="the results folder (default: results/)")
    ap.add_argument("--long", action="store_true", help="every figure (results/README.md's summary)")
    ap.add_argument(
        "--update",
        action="store_true",
        help="rewrite the generated blocks of README.md (short) and results/README.md (long)",
    )
    args = ap.parse_args(argv)
    r = Path(args.results)
    if args.update:
        for form, path in BLOCKS.items():
            update(path, short_form(r) if form == "short" else long_form(r), form)
            print(f"updated the {form} summary in {path}", file=sys.stderr)
        return 0
    print(long_form(r) if args.long else short_form(r), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
