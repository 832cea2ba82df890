"""Noise report: per task, protocol and device, the within-block and between-block spread of a file, the
between-run spread, how often a run's interval covers a rerun's score, and the smallest difference a
board can resolve; plus the frontier (predicted half-width against wall time) for other block counts.

Each run is a whole ranked run (``run_submission``, leaderboard mode, a fresh random secret), measured in
B blocks (harness.engine.blocks). Figures, all as fractions of the score unless named otherwise:

- within_block_rel_se: the standard error of a block's log score from its own samples (what one process
  claims); within_block_sample_cv: the samples' coefficient of variation inside a block
- between_block_sd: the sd of the log block scores inside a run (what a fresh worker and fresh inputs add)
- between_run_sd: the sd of the log run scores across runs (what a rerun shows)
- coverage: the fraction of (run i, run j) pairs where run j's score lies in run i's 95% interval
- resolvable: the smallest difference two entries of B blocks each can be told apart by, about
  max(margin, t * sqrt(2) * se), se the standard error of a run's log score from B blocks
- frontier: for B' blocks, the predicted half-width t * se and wall time (the run's fixed part + B' * the
  median block's wall time), se = sqrt(between_block_sd^2 / B' + run_sd^2): run_sd is the between-run sd
  the harness adds for the device and task (harness/data/run_spread.json, block rule 2), which more
  blocks do not shrink
- first_sample_excess: per shape (task order), the median over blocks of a block's first sample over the
  median of its other samples, less 1: how much slower a fresh worker's first timed chunk of a shape is,
  which a score of B blocks counts B times where one process counts it once; --warmup-chunks N (harness
  run --warmup-chunks) moves it out of the timed chunks

GPU (the lead's command):  python bench/noise.py --runs 3 --budget-s 540
CPU (plumbing only):       python bench/noise.py --quick
Stored ranked runs (no run; prints the figures as JSON):
    python bench/noise.py --from-runs results/h200_verdicts/triton_nvfp4.leaderboard.json
Writes results/ranks/noise-<device>.json (--out to choose) after every run, "complete": false until the
last; with --budget-s it starts no run that its estimate says would end past the budget.
"""

from __future__ import annotations

import argparse
import math
import re
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import GPU_FILES, QUICK_FILES, ROOT, ResultsFile, machine, median, rel, say

from harness.analysis import run_spread  # after _common, which puts the root on sys.path
from harness.analysis.run_spread import RunSpread, widen
from harness.cli.options import add_warmup_chunks_argument

FRONTIER_BLOCKS = (1, 2, 3, 5, 8, 10, 15, 20)


def _t(df: float) -> float:
    from harness.analysis.compare import t_quantile

    return t_quantile(0.95, df)


def _split(samples: list[float], counts: list[int]) -> list[list[float]]:
    """A merged case's samples, back into its blocks (they were appended block after block)."""
    out, at = [], 0
    for n in counts:
        out.append(samples[at : at + n])
        at += n
    return out


def within_block(result: Any) -> tuple[list[float], list[float]]:
    """(each block's relative standard error of its log score from its own samples, every
    block-and-shape sample CV)."""
    cases = result.benchmark_cases()
    per_shape = []
    for i, c in enumerate(cases):
        counts = [b.samples[i] for b in result.blocks]
        per_shape.append(_split(c.stats.samples_ns if c.stats else [], counts))
    rel_se, cvs = [], []
    for b in range(len(result.blocks)):
        var = 0.0
        for shape in per_shape:
            xs = shape[b] if b < len(shape) else []
            if len(xs) < 2:
                continue
            cv = statistics.stdev(xs) / statistics.fmean(xs)
            cvs.append(cv)
            var += cv * cv / len(xs)
        if per_shape:
            rel_se.append(math.sqrt(var) / len(per_shape))
    return rel_se, cvs


def first_sample_excess(results: list[Any]) -> list[float | None]:
    """Per shape (task order): the median over every block of ``results`` of (its first sample / the
    median of its other samples) - 1; None for a shape no block timed twice."""
    per_shape: list[list[float]] = []
    for r in results:
        for i, c in enumerate(r.benchmark_cases()):
            counts = [b.samples[i] for b in r.blocks]
            blocks = _split(c.stats.samples_ns if c.stats else [], counts)
            while len(per_shape) <= i:
                per_shape.append([])
            per_shape[i] += [xs[0] / statistics.median(xs[1:]) - 1 for xs in blocks if len(xs) >= 2]
    return [median(x) for x in per_shape]


def _coverage(results: list[Any]) -> float | None:
    """The fraction of (run i, run j) pairs where run j's score lies in run i's 95% interval."""
    pairs = [(i, j) for i in range(len(results)) for j in range(len(results)) if i != j and results[i].score_ci_us]
    covered = 0
    for i, j in pairs:
        low, high = results[i].score_ci_us
        covered += bool(results[j].score_us and low <= results[j].score_us <= high)
    return covered / len(pairs) if pairs else None


def _within(results: list[Any]) -> tuple[list[float], list[float]]:
    rel_se: list[float] = []
    cvs: list[float] = []
    for r in results:
        a, b = within_block(r)
        rel_se += a
        cvs += b
    return rel_se, cvs


def _se(spread: float, blocks: int, between_runs: RunSpread | None) -> tuple[float, float]:
    """(standard error, degrees of freedom) of a run's log score from ``blocks`` blocks (block rule 2)."""
    var, df = widen(spread**2 / blocks, float(blocks - 1), between_runs)
    return math.sqrt(var), df


def _resolvable(margin: float, spread: float | None, blocks: int, between_runs: RunSpread | None) -> float | None:
    if not spread or blocks < 2:
        return None
    se, df = _se(spread, blocks, between_runs)
    return max(margin, _t(2 * df) * math.sqrt(2) * se)


def summarize(results: list[Any], margin: float) -> dict[str, Any]:
    """The figures of the module docstring from ``results`` (RunResults of one file)."""
    rel_se, cvs = _within(results)
    blocks = max((len(r.blocks) for r in results), default=0)
    figures = _scores(results)
    s = figures["between_block_sd"]
    between_runs = run_spread.lookup(results[0].device.name, results[0].task) if results else None
    return {
        **figures,
        "blocks": blocks,
        "within_block_rel_se": median(rel_se),
        "within_block_sample_cv": median(cvs),
        "coverage": _coverage(results),
        "run_sd_added": between_runs.sd_log if between_runs is not None else 0.0,
        "resolvable": _resolvable(margin, s, blocks, between_runs),
        "frontier": frontier(s, median(rel_se), *_walls(results), between_runs),
        "first_sample_excess": first_sample_excess(results),
        "warmup_chunks": sorted({b.warmup_chunks for r in results for b in r.blocks}),
    }


def _scores(results: list[Any]) -> dict[str, Any]:
    scores = [r.score_us for r in results if r.score_us]
    intervals = [r.score_interval for r in results if r.score_interval is not None]
    logs = [math.log(x) for x in scores]
    return {
        "runs": len(results),
        "passed": len(scores),
        "failures": [f"{r.verdict}: {r.message}" for r in results if not r.score_us],
        "scores_us": scores,
        "half_width_rel": [(si.high_us - si.low_us) / (si.high_us + si.low_us) for si in intervals],
        "between_block_sd": median([si.spread for si in intervals if si.spread is not None]),
        "between_run_sd": statistics.stdev(logs) if len(logs) > 1 else None,
        "wall_s": [r.wall_s for r in results],
    }


def _walls(results: list[Any]) -> tuple[float | None, float | None]:
    """(the median block's wall seconds, the median run's fixed part: its wall less its blocks')."""
    block_walls = [b.wall_s for r in results for b in r.blocks if b.wall_s]
    fixed = [r.wall_s - sum(b.wall_s or 0 for b in r.blocks) for r in results if r.wall_s]
    return median(block_walls), median(fixed)


def frontier(
    spread: float | None,
    within: float | None,
    block_wall: float | None,
    fixed: float | None,
    between_runs: RunSpread | None = None,
) -> list:
    """Predicted (blocks, half-width as a fraction of the score, wall seconds) for other block counts."""
    if spread is None or block_wall is None:
        return []
    rows = []
    for b in FRONTIER_BLOCKS:
        if b == 1:
            half = 1.96 * within if within is not None else None
        else:
            se, df = _se(spread, b, between_runs)
            half = _t(df) * se
        rows.append(
            {
                "blocks": b,
                "half_width_rel": half,
                "covers_reruns": b > 1,
                "wall_s": (fixed or 0.0) + b * block_wall,
            }
        )
    return rows


def measure(task: str, path: Path, args: argparse.Namespace, rf: ResultsFile, entry: dict[str, Any]) -> None:
    """``args.runs`` ranked runs of ``path`` into ``entry`` (its figures written after each run), while the
    budget allows."""
    from harness.api import RunOptions, run_submission
    from tasks import load_task

    spec = load_task(task)
    entry.update(task=spec.name, protocol=spec.timing_protocol, file=rel(path), runs=0, same_worker=args.same_worker)
    results = []
    for k in range(args.runs):
        if not rf.allows(f"{task} run {k + 1}/{args.runs}", "run"):
            break
        say(f"{task}: {rel(path)}: run {k + 1}/{args.runs}")
        t0 = time.monotonic()
        options = RunOptions(
            device=args.device,
            secret=secrets.token_hex(16),
            blocks=args.blocks,
            same_worker=args.same_worker,
            warmup_chunks=args.warmup_chunks,
            max_repeats=args.max_repeats,
            max_time_s=args.max_time,
        )
        r = run_submission(str(path), task, "leaderboard", options)
        wall = time.monotonic() - t0
        say(f"  {r.verdict} score {r.score_us} interval {r.score_ci_us} ({wall:.1f} s)")
        results.append(r)
        entry.update(summarize(results, args.margin / 100))
        rf.done("run", wall)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--task", action="append", help="task name (repeatable; default: both GPU tasks)")
    p.add_argument("--file", help="the submission (default: the task's Triton example)")
    p.add_argument("--runs", type=int, default=3, help="whole ranked runs per task (default 3)")
    p.add_argument("--blocks", type=int, default=None, help="blocks per run (default: the harness's)")
    p.add_argument("--same-worker", action="store_true", help="the blocks share one worker (harness run --same-worker)")
    add_warmup_chunks_argument(p)
    p.add_argument("--max-repeats", type=int, default=None)
    p.add_argument("--max-time", type=float, default=None)
    p.add_argument("--margin", type=float, default=1.0, help="the tie rule's margin in percent (default 1)")
    p.add_argument("--device", default=None)
    p.add_argument("--quick", action="store_true", help="CPU, the fixture task, 2 runs of 3 blocks: plumbing only")
    p.add_argument(
        "--from-runs",
        nargs="+",
        metavar="RUN_JSON",
        help="no run: the figures of these stored ranked runs of one file (harness run --json), printed as JSON",
    )
    p.add_argument("--out", help="results file (default results/ranks/noise-<device>.json)")
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="start no run that would end past this many seconds; the file then says complete false and why",
    )
    return p


def _out_path(args: argparse.Namespace, device: str) -> Path:
    if args.out:
        return Path(args.out)
    slug = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")
    return ROOT / "results" / "ranks" / f"noise-{slug}{'-quick' if args.quick else ''}.json"


def from_runs(paths: list[str], margin: float) -> dict[str, Any]:
    """The figures of stored ranked runs (their RunResult JSON), with the files they came from."""
    import json

    from harness.results import RunResult

    results = []
    for path in paths:
        try:
            results.append(RunResult.from_dict(json.loads(Path(path).read_text())))
        except (OSError, ValueError, TypeError, KeyError) as e:
            say(f"--from-runs {path}: not a run's JSON (harness run --json writes one): {e}")
            raise SystemExit(2) from None
    return {"runs_from": [rel(Path(p)) for p in paths], **summarize(results, margin)}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.from_runs:
        import json

        print(json.dumps(from_runs(args.from_runs, args.margin / 100), indent=2, sort_keys=True, default=str))
        return 0
    if args.quick:
        args.device, args.runs = "cpu", min(args.runs, 2)
        args.blocks, args.max_repeats = args.blocks or 3, args.max_repeats or 6
        files = dict(QUICK_FILES)
    else:
        files = {t: GPU_FILES[t] for t in (args.task or GPU_FILES)}
    if args.file:
        files = {t: args.file for t in files}
    facts = machine(args.device)
    out = _out_path(args, facts["device"])
    tasks: list[dict[str, Any]] = []
    argv_seen = sys.argv[1:] if argv is None else argv
    rf = ResultsFile(out, {"script": "bench/noise.py", "argv": argv_seen, **facts, "tasks": tasks}, args.budget_s)
    for name, f in files.items():
        if rf.doc["stopped"] is not None:
            break
        tasks.append({})
        measure(name, ROOT / f, args, rf, tasks[-1])
    rf.finish()
    for t in tasks:
        if not t["runs"]:
            continue
        pct = lambda x: "-" if x is None else f"{100 * x:.2f}%"  # noqa: E731
        say(
            f"{t['task']} ({t['protocol']}): within-block {pct(t['within_block_rel_se'])}, between-block "
            f"{pct(t['between_block_sd'])}, between-run {pct(t['between_run_sd'])}, coverage "
            f"{t['coverage']}, resolvable {pct(t['resolvable'])}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
