"""Runs every example submission through the harness on this device and writes a results file.

For each task: ``python -m harness run-all submissions/ --task TASK --mode MODE`` into a results
store, then, from the stored results, a JSON file (device, versions, date, per-shape times, SOL,
% of SOL, geomeans) and the markdown leaderboard.

    python bench/bench_examples.py --out results/h200_examples.json --markdown results/logs/h200_leaderboard.md
    python bench/bench_examples.py --task tests/fixtures/tasks/mxfp4_small/task.yml --device cpu --quick \\
        --out /tmp/examples.json
    python bench/bench_examples.py --mode leaderboard --submissions DIR --out results/h200_ranked.json
        # DIR: a folder holding only the files to rank (e.g. copies of submissions/triton_*.py)
    python bench/bench_examples.py --from-runs results/h200_runs --out results/h200_examples.json \\
        --markdown results/logs/h200_leaderboard.md     # summarize a run that stopped before its summary
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.api import RunOptions, load_board, render_board, run_folder  # noqa: E402
from harness.report.tables import format_rows  # noqa: E402
from harness.results import RunResult, shape_label  # noqa: E402
from harness.store.database import open_store  # noqa: E402


def _us(ns) -> float | None:
    """ns -> us; None stays None (JSON stores an undefined statistic, e.g. one sample's stderr, as null)."""
    return None if ns is None else ns / 1e3


def _case_row(case) -> dict:
    s, sol, x = case.stats, case.sol, case.extra
    return {
        "spec": case.spec,
        "verdict": case.verdict,
        "mean_us": _us(s and s.mean),
        "stderr_us": _us(s and s.stderr),
        "min_us": _us(s and s.min),
        "median_us": _us(s and s.median),
        "runs": s.runs if s else 0,
        "baseline_us": case.baseline_us,
        "sol_us": _us(sol and sol.time_ns),
        "sol_bound": sol.bound if sol else None,
        "percent_of_sol": sol.percent if sol else None,
        "kernel_only_us": _us(x.get("kernel_only_ns")),
        "warnings": case.warnings,
    }


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--task", action="append", dest="tasks", help="task (repeatable; default: mxfp4_mm, nvfp4_gemm)")
    ap.add_argument("--mode", default="test+benchmark", choices=("test+benchmark", "benchmark", "leaderboard"))
    ap.add_argument("--device", default=None)
    ap.add_argument("--quick", action="store_true", help="3 samples per shape (a smoke test of this script)")
    ap.add_argument("--out", required=True, help="the JSON results file")
    ap.add_argument("--markdown", help="also write the markdown leaderboards here")
    ap.add_argument("--results-dir", help="keep the results store here (default: a temporary folder)")
    ap.add_argument("--runs-dir", help="also write each run's full result JSON here, as <file stem>.json")
    ap.add_argument(
        "--submissions",
        default=str(ROOT / "submissions"),
        help="the folder of submissions to run (default: the examples in submissions/)",
    )
    ap.add_argument(
        "--from-runs",
        metavar="DIR",
        help="run nothing: summarize the result JSONs a run of this "
        "script left in DIR (--runs-dir), e.g. after it stopped",
    )
    return ap


def _stored_runs(folder: str, task_name: str, results_dir: str) -> list:
    """The run results a run of this script left in ``folder`` for one task, recorded in the store."""
    results = [
        RunResult.from_json(p.read_text()) for p in sorted(Path(folder).glob("*.json")) if p.stem.count(".") == 0
    ]
    results = [r for r in results if r.task == task_name]
    with open_store(results_dir) as st:
        for r in results:
            st.record(r)
    return results


def _fresh_runs(args: argparse.Namespace, task: str, task_name: str, results_dir: str) -> list:
    """Runs every submission of the folder on one task; their results from the store."""
    run_folder(
        Path(args.submissions),
        task,
        args.mode,
        RunOptions(device=args.device, max_repeats=3 if args.quick else None),
        results_dir=results_dir,
        progress=lambda line: print(line, file=sys.stderr),
        rerun=True,
    )  # a benchmark measures, even where the store holds a result
    with open_store(results_dir) as st:
        return [st.result(r.id) for r in st.runs(task=task_name)]


def _entry(r, cases: list[dict]) -> dict:
    return {
        "submission": r.submission.name,
        "path": r.submission.path,
        "verdict": r.verdict,
        "message": r.message,
        "score_us": r.score_us,
        "wall_s": r.wall_s,
        "benchmarks": cases,
    }


def _cell(c: dict) -> str:
    if c["mean_us"] and c["percent_of_sol"]:
        return f"{c['mean_us']:.2f} ({c['percent_of_sol']:.0f}%)"
    return f"{c['mean_us']:.2f}" if c["mean_us"] else "-"


def _task_entries(results: list, runs_dir: str | None, doc: dict) -> tuple[list[dict], list[list[str]]]:
    """The results file's entries of one task and the rows of its table on stderr."""
    entries, rows = [], []
    for r in results:
        if r is None:
            continue
        doc.setdefault("device", r.device.__dict__)
        if runs_dir:
            Path(runs_dir).mkdir(parents=True, exist_ok=True)
            (Path(runs_dir) / (Path(r.submission.path).stem + ".json")).write_text(r.to_json() + "\n")
        cases = [_case_row(c) for c in r.benchmark_cases()]
        entries.append(_entry(r, cases))
        rows.append(
            [r.submission.name, r.verdict, f"{r.score_us:.3f}" if r.score_us else "-"] + [_cell(c) for c in cases]
        )
    return entries, rows


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    tasks = args.tasks or ["mxfp4_mm", "nvfp4_gemm"]
    if args.from_runs:
        args.runs_dir = None  # they are there already
    with tempfile.TemporaryDirectory(prefix="bench-examples-") as tmp:
        results_dir = args.results_dir or tmp
        doc = {
            "script": "bench/bench_examples.py",
            "mode": args.mode,
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "tasks": {},
        }
        markdown = []
        for task in tasks:
            task_name = Path(task).parent.name if task.endswith(".yml") else task
            if args.from_runs:
                results = _stored_runs(args.from_runs, task_name, results_dir)
                doc["from_runs"] = args.from_runs
                doc["date"] = min((r.started_at for r in results), default=doc["date"])
            else:
                results = _fresh_runs(args, task, task_name, results_dir)
            entries, rows = _task_entries(results, args.runs_dir, doc)
            doc["tasks"][task] = entries
            shapes = [shape_label(c["spec"]) for c in (entries[0]["benchmarks"] if entries else [])]
            print(f"\n{task}: mean us per shape (% of SOL)", file=sys.stderr)
            print(format_rows(["submission", "verdict", "geomean us", *shapes], rows), file=sys.stderr)
            markdown.append(render_board(load_board(task, results_dir=results_dir)[0], "markdown"))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text("\n".join(markdown))
    print("\n".join(markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
