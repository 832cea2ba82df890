"""Do ranks hold? Boards of byte-different copies of each example, and final scorings with a slower variant.

Boards: each board is a fresh ``run-all`` (leaderboard mode, a fresh random secret, a fresh store) of
``--copies`` byte-different copies of the task's example. A board passes when every copy is tied ("=1").
Reported per task: boards with all copies tied, the median 95% half-width as a fraction of the score, and
the wall time per board; each board also records, per copy, how many of its run's blocks were measured
again after the escaped-work check alone rejected them (``measured_again``).

Finals: each is a final scoring (``harness.engine.final``) of the example, one copy and a variant that is
``--slowdown`` slower (the example plus a calibrated ``torch.cuda._sleep`` per call on a GPU, a host spin
on the CPU; calibrated from the first board's per-shape means so that the task's score grows by the
slowdown). A final passes when the variant is ranked below the original (not tied with it) and the copy
is tied with the original. The variant's slowdown is measured separately before the finals, by ranked runs of
the original and the variant (--slowdown-pairs pairs, default 1; with several, the file gives the ratio's
95% interval too); when it is more than 2x off the target, it is corrected once
and measured again (both attempts in the file), and the finals use the corrected variant: too slow, one
call in ``every`` is slowed (a GPU sleep costs a kernel launch, about 2 us on the H200, however short);
too fast, the extra time grows by target/measured (--cycles-per-us is only a guess of the GPU's clock).
The finals' own scores measure it again.

The results file is written after every board, slowdown measurement and final (``"complete": false``
until the last); --budget-s starts no unit that its estimate (the median of the finished units) says would
end past the budget, so one call fits a 10-minute device limit. On the H200 (a board 73-78 s, 118 s
while compiling; a ranked run 25-30 s), boards in one call, then finals in others that start from the
boards' file (before the first final, one final block of the example is timed: a final's estimate is 3
such blocks times --max-rounds; the second command is one line):
    python bench/ranks.py --task mxfp4_mm --boards 5 --finals 0 --budget-s 540 --out results/ranks/ranks-h200-mxfp4_mm-boards.json
    python bench/ranks.py --task mxfp4_mm --boards 0 --finals 1 --min-rounds 3 --max-rounds 3 --budget-s 540
        --calibrate-from results/ranks/ranks-h200-mxfp4_mm-boards.json --out results/ranks/ranks-h200-mxfp4_mm-finals1.json
Boards that do not fit one session (nvfp4_gemm: about 6 minutes a board) accumulate in one file over
several: --resume continues the --out file's boards up to --boards (each board records its commit and
date, the file its sessions), on the same device only:
    python bench/ranks.py --task nvfp4_gemm --boards 10 --finals 0 --budget-s 540 --resume --out results/ranks/ranks-h200-nvfp4_gemm-boards.json
Finals do the same with --boards 0: --resume continues the --out file's finals up to --finals with the
variant its first call measured (not measured again), or starts them as above when it holds none:
    python bench/ranks.py --task nvfp4_gemm --boards 0 --finals 10 --budget-s 540 --resume
        --calibrate-from results/ranks/ranks-h100-nvfp4_gemm-boards-short.json --out results/ranks/ranks-h100-nvfp4_gemm-finals.json
A call that started without the --out file's latest boards or finals (the device tool copies the tree as
it was) writes a file of its own; --merge adds its boards, finals and sessions to --out's, measuring nothing:
    python bench/ranks.py --merge SECOND.json --out results/ranks/ranks-h100-nvfp4_gemm-boards-short.json
CPU (plumbing only; a test runs it):
    python bench/ranks.py --quick
Writes results/ranks/ranks-<device>[-<task>].json (--out to choose).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _common import (
    GPU_FILES,
    QUICK_FILES,
    ROOT,
    ResultsFile,
    copy_file,
    machine,
    median,
    rel,
    say,
    utc_now,
    write_results,
)

from harness.cli.options import add_warmup_chunks_argument  # after _common, which puts the root on sys.path

GPU_VARIANT = """

import torch as _bench_torch

_BENCH_SLEEP_CYCLES = {cycles}
_BENCH_EVERY = {every}
_bench_calls = 0


def custom_kernel(data):  # the example, then a calibrated GPU sleep after one call in _BENCH_EVERY (bench/ranks.py)
    global _bench_calls
    out = _bench_original_kernel(data)
    _bench_calls += 1
    if _bench_calls % _BENCH_EVERY == 0:
        _bench_torch.cuda._sleep(_BENCH_SLEEP_CYCLES)
    return out
"""
CPU_VARIANT = """

import time as _bench_time

_BENCH_SPIN_S = {seconds!r}
_BENCH_EVERY = {every}
_bench_calls = 0


def custom_kernel(data):  # the example, then a calibrated host spin after one call in _BENCH_EVERY (bench/ranks.py --quick)
    global _bench_calls
    out = _bench_original_kernel(data)
    _bench_calls += 1
    if _bench_calls % _BENCH_EVERY == 0:
        end = _bench_time.perf_counter() + _BENCH_SPIN_S
        while _bench_time.perf_counter() < end:
            pass
    return out
"""


@dataclass(frozen=True)
class Variant:
    """How the slower variant is made: ``extra_us`` more after one call in ``every``."""

    extra_us: float
    every: int = 1


def extra_per_call_us(shape_means_us: list[float], rule: str, slowdown: float) -> float:
    """The time ``c`` to add to every call so that the task's score grows by ``slowdown`` (bisection)."""
    from harness.analysis.blocks import combine

    base = combine(shape_means_us, rule)
    lo, hi = 0.0, base * slowdown * 10
    for _ in range(60):
        mid = (lo + hi) / 2
        if combine([t + mid for t in shape_means_us], rule) < base * (1 + slowdown):
            lo = mid
        else:
            hi = mid
    return hi


def write_variant(src: Path, dest: Path, v: Variant, gpu: bool, cycles_per_us: float) -> dict[str, Any]:
    text = src.read_text().replace("def custom_kernel(", "def _bench_original_kernel(")
    if gpu:
        cycles = max(1, round(v.extra_us * cycles_per_us))
        copy_file(src, dest, 2, text + GPU_VARIANT.format(cycles=cycles, every=v.every))
        return {"extra_us": v.extra_us, "every": v.every, "sleep_cycles": cycles}
    copy_file(src, dest, 2, text + CPU_VARIANT.format(seconds=v.extra_us / 1e6, every=v.every))
    return {"extra_us": v.extra_us, "every": v.every, "spin_s": v.extra_us / 1e6}


def _options(args: argparse.Namespace) -> Any:
    from harness.api import RunOptions

    return RunOptions(
        device=args.device,
        blocks=args.blocks,
        max_repeats=args.max_repeats,
        max_time_s=args.max_time,
        warmup_chunks=args.warmup_chunks,
    )


def one_board(task: str, folder: Path, args: argparse.Namespace) -> tuple[Any, float, dict[str, int]]:
    """A fresh run-all of ``folder`` into its own store; (the board's section, wall seconds, how many
    blocks of each file's run were measured again after the escaped-work check alone rejected them)."""
    from harness.api import load_board, run_folder

    store = folder / "store"
    t0 = time.monotonic()
    run = run_folder(str(folder), task, "leaderboard", _options(args), results_dir=str(store), progress=_quiet)
    wall = time.monotonic() - t0
    board, _ = load_board(task, results_dir=str(store), mode="leaderboard", margin=args.margin / 100)
    if not board.boards:
        raise SystemExit(f"no board for {task}: every run failed? see {store}")
    return board.boards[0], wall, measured_again(run.entries)


def measured_again(entries: list[Any]) -> dict[str, int]:
    """Per file of a run-all (its name without .py), how many blocks of its run were measured again after
    the escaped-work check alone rejected them (each says so in a warning)."""
    from harness.engine.blocks import remeasured_blocks

    return {e.path.stem: remeasured_blocks(e.result.warnings) for e in entries}


def _between_runs(section: Any, task: str) -> float:
    """The measured between-run sd the board added to each copy's blocks (harness.analysis.run_spread)."""
    from harness.analysis import run_spread

    spread = run_spread.lookup(section.device, task)
    return spread.sd_log if spread is not None else 0.0


def _quiet(line: str) -> None:
    if line.startswith(("error", "warning")) or "retry" in line:
        say("  " + line)


def _half_width(e: Any) -> float | None:
    if e.low_us is None or e.high_us is None:
        return None
    return (e.high_us - e.low_us) / (2 * e.score_us)


def boards(task: str, src: Path, args: argparse.Namespace, rf: ResultsFile, entry: dict[str, Any]) -> None:
    """``args.boards`` boards into ``entry`` (written after each), while the budget allows."""
    out: list[dict[str, Any]] = entry.setdefault("boards", [])  # --resume: the boards of earlier sessions
    for k in range(len(out), args.boards):
        if not rf.allows(f"{task} board {k + 1}/{args.boards}", "board"):
            break
        with tempfile.TemporaryDirectory(prefix="ranks-board-") as tmp:
            for i in range(args.copies):
                copy_file(src, Path(tmp) / f"copy{i}.py", i)
            section, wall, again = one_board(task, Path(tmp), args)
        record = _board_record(section, wall, args.copies) | {
            "between_run_sd": _between_runs(section, task),
            "measured_again": again,
        }
        out.append(record | {"commit": rf.doc["commit"], "date": utc_now()})
        tied = out[-1]["all_tied"]
        _summarize_boards(entry)
        rf.done("board", wall)
        left = entry["median_board_wall_s"] * (args.boards - k - 1)
        say(
            f"{task}: board {k + 1}/{args.boards}: tied {tied} {out[-1]['ranks']} ({wall:.0f} s; boards left ~{left:.0f} s)"
        )


def _summarize_boards(entry: dict[str, Any]) -> None:
    out = entry["boards"]
    halves = [h for b in out for h in b["half_width_rel"] if h is not None]
    entry.update(
        boards_all_tied=sum(b["all_tied"] for b in out),
        median_half_width_rel=median(halves),
        median_board_wall_s=median([b["wall_s"] for b in out]),
    )


def _summarize_finals(entry: dict[str, Any]) -> None:
    out = entry["finals"]
    entry.update(
        finals_passed=sum(f["pass"] for f in out),
        median_final_slowdown=median([f["final_slowdown"] for f in out]),
    )


def _board_record(section: Any, wall: float, copies: int) -> dict[str, Any]:
    entries = section.ranked
    return {
        "all_tied": len(entries) == copies and all(e.rank_label == "=1" for e in entries),
        "ranks": {e.name: e.rank_label for e in entries},
        "scores_us": {e.name: e.score_us for e in entries},
        "half_width_rel": [_half_width(e) for e in entries],  # in rank order, as "blocks" and "se_log"
        "se_log": [e.stderr_us / e.score_us if e.interval_source == "blocks" else None for e in entries],
        "blocks": [e.blocks for e in entries],
        "interval_source": sorted({e.interval_source for e in entries}),
        "shape_means_us": [s.mean_us for s in entries[0].shapes] if entries else [],
        "not_ranked": [f"{u.name}: {u.verdict}: {u.reason}" for u in section.unranked],
        "wall_s": wall,
    }


def measured_slowdown(task: str, orig: Path, slow: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The variant's slowdown, measured apart from the finals: ``--slowdown-pairs`` pairs of ranked runs, the
    original and the variant (a fresh secret each run, the order alternating), their ratio the geometric
    mean of the pairs'; with two pairs or more, its 95% t interval too (``interval``)."""
    from harness.analysis.blocks import combine, interval_from_blocks
    from harness.api import run_submission

    pairs: list[dict[str, float | None]] = []
    for k in range(args.slowdown_pairs):
        order = (("orig", orig), ("slow", slow)) if k % 2 == 0 else (("slow", slow), ("orig", orig))
        scores: dict[str, float | None] = {}
        for name, path in order:
            r = run_submission(str(path), task, "leaderboard", _options(args))
            scores[name] = r.score_us
            say(f"{task}: slowdown run of {name} ({k + 1}/{args.slowdown_pairs}): {r.verdict} {r.score_us}")
        pairs.append({"orig": scores["orig"], "slow": scores["slow"]})
    ratios = [p["slow"] / p["orig"] for p in pairs if p["slow"] and p["orig"]]
    out: dict[str, Any] = {"scores_us": pairs[-1], "pairs": pairs, "slowdown": None, "interval": None}
    if len(ratios) == len(pairs):  # every run passed: the ratios' geometric mean and t interval, as blocks'
        ratio = combine(ratios, "geom")
        out["slowdown"] = ratio - 1
        ci = interval_from_blocks(ratio, ratios)
        out["interval"] = [ci.low_us - 1, ci.high_us - 1] if ci else None
    return out


def corrected_variant(v: Variant, target: float, measured: float | None) -> Variant | None:
    """The variant corrected once when its measured slowdown is off the target by more than a factor of 2;
    None when no correction is due, or none can be computed (a failed run, or a measured slowdown <= 0).
    Too slow: one call in more is slowed (a slowed call costs at least a kernel launch, about 2 us on the
    H200: asked 4%, a GPU sleep of 0.08 us per call still gave 18.5%, ``results/ranks/``), so fewer calls
    are slowed rather than each by less. Too fast: each slowed call gets target/measured times more."""
    if measured is None or not math.isfinite(measured) or measured <= 0 or target <= 0:
        return None
    if target / 2 <= measured <= target * 2:
        return None
    if measured > target:
        return replace(v, every=v.every * max(2, round(measured / target)))
    return replace(v, extra_us=v.extra_us * target / measured)


def calibrate(
    task: str, src: Path, variant: Variant, args: argparse.Namespace, rf: ResultsFile, entry: dict
) -> Variant | None:
    """The variant's slowdown measured apart from the finals, before them; when it is off the target by more
    than a factor of 2, the variant is corrected once (``corrected_variant``) and measured again (both
    attempts are recorded). Returns the variant the finals use (None: the budget stopped it)."""
    gpu = args.device != "cpu"
    attempts: list[dict[str, Any]] = []
    sep: dict[str, Any] = {"attempts": attempts, "corrected": False}
    entry["slowdown_measured_separately"] = sep
    for attempt in (1, 2):
        guess = rf.estimate("slowdown") if "slowdown" in rf.walls else _per_run(entry, args) * 2 * args.slowdown_pairs
        if not rf.allows(f"{task} slowdown measurement {attempt}", "slowdown", guess):
            return None
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="ranks-slowdown-") as tmp:
            orig = copy_file(src, Path(tmp) / "orig.py", 0)
            written = write_variant(src, Path(tmp) / "slow.py", variant, gpu, args.cycles_per_us)
            measured = measured_slowdown(task, orig, Path(tmp) / "slow.py", args)
        attempts.append({**measured, "variant": written})
        sep.update({k: measured[k] for k in ("scores_us", "pairs", "slowdown", "interval")}, variant=written)
        rf.done("slowdown", time.monotonic() - t0)
        ci = measured["interval"]
        say(
            f"{task}: variant slowdown measured separately: {_pct(measured['slowdown'])}"
            + (f" (95% {_pct(ci[0])} to {_pct(ci[1])})" if ci else "")
            + f" (target {_pct(args.slowdown)})"
        )
        fixed = corrected_variant(variant, args.slowdown, measured["slowdown"])
        if fixed is None or attempt == 2:
            break
        say(f"{task}: more than 2x off the target: {variant} -> {fixed}, measured again")
        variant, sep["corrected"] = fixed, True
    return variant


def _per_run(entry: dict, args: argparse.Namespace) -> float:
    """A ranked run's wall time, estimated from the boards (a board is ``--copies`` runs), this call's or
    those of --calibrate-from."""
    board = entry.get("median_board_wall_s") or (entry.get("calibrated_from") or {}).get("median_board_wall_s")
    return (board or 0.0) / max(args.copies, 1)


def finals(
    task: str, src: Path, shape_means: list[float], args: argparse.Namespace, rf: ResultsFile, entry: dict
) -> None:
    import hashlib

    from harness.engine.final import FinalPlan, block_runner, run_final
    from harness.store.database import open_store
    from harness.store.finals import blocks
    from tasks import load_task

    spec = load_task(task)
    gpu = args.device != "cpu"
    chosen = _resumed_variant(entry)
    if chosen is not None and entry.get("slowdown_target") != args.slowdown:
        say(f"--resume: the finals there aim at --slowdown {entry.get('slowdown_target')}, not {args.slowdown}")
        raise SystemExit(2)
    if chosen is None:
        entry.update(slowdown_target=args.slowdown, finals=[], finals_passed=0, median_final_slowdown=None)
        earlier = entry.get("calibrated_from") or {}  # an earlier call's (corrected) variant
        start = (
            Variant(earlier["extra_us"], earlier.get("every") or 1)
            if earlier.get("extra_us")
            else Variant(extra_per_call_us(shape_means, spec.ranking_by, args.slowdown))
        )
        chosen = calibrate(task, src, start, args, rf, entry)
        if chosen is None:
            return
    out: list[dict[str, Any]] = entry["finals"]
    run_block = block_runner(spec, _options(args), gpu)
    device = machine(args.device)["device"]

    block_wall = None
    if out:  # --resume: the earlier finals' walls are the first estimate
        rf.walls.setdefault("final", []).extend(f["final_wall_s"] for f in out)
    elif "final" not in rf.walls:
        block_wall = _one_block_wall(task, src, run_block, rf, entry, args)
    for k in range(len(out), args.finals):
        # 3 entries, one block each a round, up to --max-rounds rounds (the worst case: a kill loses the final)
        guess = (
            rf.estimate("final") if "final" in rf.walls else 3 * args.max_rounds * (block_wall or _per_run(entry, args))
        )
        if not rf.allows(f"{task} final {k + 1}/{args.finals}", "final", guess):
            break
        with tempfile.TemporaryDirectory(prefix="ranks-final-") as tmp:
            folder = Path(tmp)
            paths = [copy_file(src, folder / "orig.py", 0), copy_file(src, folder / "copy.py", 1)]
            variant = write_variant(src, folder / "slow.py", chosen, gpu, args.cycles_per_us)
            paths.append(folder / "slow.py")
            entries = [(hashlib.sha256(p.read_bytes()).hexdigest(), p.stem, str(p)) for p in paths]
            plan = FinalPlan(spec.name, device, entries, args.min_rounds, args.max_rounds, args.margin / 100)
            t0 = time.monotonic()
            with open_store(str(folder / "store")) as st:
                final, ranking, _ = run_final(st, plan, f"bench-{time.time_ns()}", run_block)
                scores = _block_scores(blocks(st, final.id), entries)
            final_wall = time.monotonic() - t0
        outcome = _final_outcome(ranking, variant, final_wall) | {"block_scores_us": scores}
        out.append(outcome | {"commit": rf.doc["commit"], "date": utc_now()})
        _summarize_finals(entry)
        rf.done("final", final_wall)
        say(f"{task}: final {k + 1}/{args.finals}: {out[-1]['ranks']} pass {out[-1]['pass']} ({final_wall:.0f} s)")


def _resumed_variant(entry: dict[str, Any]) -> Variant | None:
    """The variant of the finals an earlier call of --resume left in ``entry`` (measured separately there),
    or None: no finals yet, or none measured."""
    variant = (entry.get("slowdown_measured_separately") or {}).get("variant") or {}
    if not entry.get("finals") or not variant.get("extra_us"):
        return None
    return Variant(variant["extra_us"], variant.get("every") or 1)


def _one_block_wall(
    task: str, src: Path, run_block: Any, rf: ResultsFile, entry: dict, args: argparse.Namespace
) -> float | None:
    """The wall time of one final block (a one-block ranked run of the example), measured once before the
    finals: their first estimate. Counting a whole ranked run per block put the first final on the H200
    at 229 s, and the budget then started none. None when the budget leaves no room for it."""
    if not rf.allows(f"{task} one final block (the finals' estimate)", "final_block", _per_run(entry, args) / 2):
        return None
    with tempfile.TemporaryDirectory(prefix="ranks-block-") as tmp:
        path = copy_file(src, Path(tmp) / "orig.py", 0)
        t0 = time.monotonic()
        r = run_block(str(path), 0, secrets.token_hex(16), 1)
        wall = time.monotonic() - t0
    entry["final_block_wall_s"] = wall
    rf.done("final_block", wall)
    say(f"{task}: one final block: {r.verdict} in {wall:.1f} s")
    return wall


def _block_scores(stored: list[Any], entries: list[tuple[str, str, str]]) -> dict[str, list[float | None]]:
    """Each entry's block score per round (None: its block did not pass), by the entry's name: the
    paired differences a final ranked by, kept for the spread between rounds."""
    from harness.analysis.final import entries_from_blocks

    rounds = range(1 + max((b.round for b in stored), default=-1))
    return {e.name: [e.scores.get(r) for r in rounds] for e in entries_from_blocks(entries, [vars(b) for b in stored])}


def _final_outcome(ranking: Any, variant: dict, final_wall: float) -> dict:
    places = {p.name: p for p in ranking.places}
    orig, copy, slow = places.get("orig"), places.get("copy"), places.get("slow")
    ok = (
        orig is not None
        and copy is not None
        and slow is not None
        and not (orig.failed or copy.failed or slow.failed)
        and slow.rank > orig.rank
        and copy.rank == orig.rank
    )
    ratio = lambda a, b: a / b - 1 if a and b else None  # noqa: E731
    return {
        "pass": bool(ok),
        "ranks": {p.name: p.rank_label for p in ranking.places},
        "rounds": ranking.rounds,
        "undecided": ranking.undecided,
        "rounds_to_settle": ranking.rounds_to_settle,
        "final_scores_us": {p.name: p.score_us for p in ranking.places},
        "final_slowdown": ratio(slow.score_us, orig.score_us) if slow and orig else None,
        "variant": variant,
        "final_wall_s": final_wall,
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--task", action="append", help="task name (repeatable; default both GPU tasks)")
    p.add_argument("--boards", type=int, default=10, help="boards per task (default 10)")
    p.add_argument("--copies", type=int, default=3, help="byte-different copies per board (default 3)")
    p.add_argument("--finals", type=int, default=None, help="final scorings per task (default 5, --quick 1; 0: none)")
    p.add_argument("--min-rounds", type=int, default=3)
    p.add_argument("--max-rounds", type=int, default=10)
    p.add_argument("--slowdown", type=float, default=0.04, help="the variant's target slowdown (default 0.04)")
    p.add_argument(
        "--slowdown-pairs",
        type=int,
        default=1,
        help="pairs of ranked runs (the original, the variant) that measure the variant's slowdown apart from "
        "the finals (default 1; nvfp4_gemm, whose runs spread a few percent, needs several)",
    )
    p.add_argument(
        "--cycles-per-us",
        type=float,
        default=1980.0,
        help="GPU clock for the sleep (H200: 1980); the measured slowdown corrects it when 2x off",
    )
    p.add_argument("--blocks", type=int, default=None, help="blocks per ranked run (default: the harness's)")
    add_warmup_chunks_argument(p)
    p.add_argument("--max-repeats", type=int, default=None)
    p.add_argument("--max-time", type=float, default=None)
    p.add_argument("--margin", type=float, default=1.0, help="the tie rule's margin in percent (default 1)")
    p.add_argument("--device", default=None)
    p.add_argument("--quick", action="store_true", help="CPU, the fixture task, 1 small board and 1 short final")
    p.add_argument("--out", help="results file (default results/ranks/ranks-<device>[-task].json)")
    p.add_argument(
        "--calibrate-from",
        help="with --boards 0: an earlier results file of this script whose boards (shape means, wall time) and "
        "last variant the finals start from (the slowdown is still measured, and corrected when 2x off)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the --out file (same device): with --finals 0 its boards up to --boards; with --boards 0 "
        "its finals up to --finals, with the variant its first call measured",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        metavar="FILE",
        help="measure nothing: add these board files' boards and sessions (same device) to --out's, as --resume "
        "would have (for a device call that wrote to a file of its own)",
    )
    p.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="start no board, slowdown measurement or final that would end past this many seconds; the file "
        "then says complete false and why (e.g. 540 inside a 10-minute device call)",
    )
    return p


def _files(args: argparse.Namespace) -> dict[str, str]:
    if args.quick:
        args.device, args.boards, args.copies = "cpu", min(args.boards, 1), 2
        args.finals = 1 if args.finals is None else args.finals
        args.blocks, args.max_repeats = args.blocks or 2, args.max_repeats or 4
        args.min_rounds, args.max_rounds = 2, 2
        return dict(QUICK_FILES)
    args.finals = 5 if args.finals is None else args.finals
    return {t: GPU_FILES[t] for t in (args.task or GPU_FILES)}


def _shape_means(entry: dict[str, Any]) -> list[float] | None:
    return next((b["shape_means_us"] for b in entry.get("boards") or [] if b.get("shape_means_us")), None)


def _calibrate_from(path: str, task: str, entry: dict[str, Any]) -> list[float]:
    """The shape means, board wall time and last variant of ``task`` in an earlier results file of this
    script (--calibrate-from): a finals-only call then starts from them (and still measures the slowdown)."""
    try:
        data = json.loads(Path(path).read_text())
        prev = next(t for t in data["tasks"] if t.get("task") == task)
    except (OSError, ValueError, KeyError, TypeError, StopIteration) as e:
        say(f"--calibrate-from {path}: no entry for {task} in a results file of bench/ranks.py ({e!r})")
        raise SystemExit(2) from None
    means = _shape_means(prev)
    if means is None:
        say(f"--calibrate-from {path}: no board of {task} there ranked the example; run boards first")
        raise SystemExit(2)
    variant = (prev.get("slowdown_measured_separately") or {}).get("variant") or {}
    entry["calibrated_from"] = {
        "file": rel(path),
        "median_board_wall_s": prev.get("median_board_wall_s"),
        "extra_us": variant.get("extra_us"),
        "every": variant.get("every"),
        "slowdown": (prev.get("slowdown_measured_separately") or {}).get("slowdown"),
    }
    return means


def _one_task(task: str, src: Path, args: argparse.Namespace, rf: ResultsFile, entry: dict[str, Any]) -> None:
    t0 = time.monotonic()
    boards(task, src, args, rf, entry)
    if args.finals and rf.doc["stopped"] is None and _resumed_variant(entry) is not None:
        finals(task, src, [], args, rf, entry)  # --resume: the earlier finals' variant, not calibrated again
    elif args.finals and rf.doc["stopped"] is None:
        means = _shape_means(entry)
        if means is None and args.calibrate_from:
            means = _calibrate_from(args.calibrate_from, task, entry)
        if means is None:
            why = f"{task}: no board ranked the example, so the variant cannot be calibrated"
            rf.doc["stopped"] = why
            say(why)
        else:
            finals(task, src, means, args, rf, entry)
    entry["wall_s"] = entry.get("wall_s", 0.0) + time.monotonic() - t0  # with an earlier call's, on --resume


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.merge:
        if not args.out:
            say("--merge: give --out, the board file the others join")
            return 2
        return merge(Path(args.out), [Path(m) for m in args.merge])
    files = _files(args)
    facts = machine(args.device)
    slug = re.sub(r"[^a-z0-9]+", "-", facts["device"].lower()).strip("-")
    suffix = "-quick" if args.quick else ("-" + "-".join(files) if args.task else "")
    out = Path(args.out) if args.out else ROOT / "results" / "ranks" / f"ranks-{slug}{suffix}.json"
    config = {k: v for k, v in vars(args).items() if k not in ("out",)}
    if args.calibrate_from:  # a file without the task is a usage error before anything is written
        for task in files:
            _calibrate_from(args.calibrate_from, task, {})
    earlier = _resumed(out, facts, args) if args.resume else {}
    results: list[dict[str, Any]] = list(earlier.get("tasks") or [])
    sessions = [*earlier.get("sessions", []), {k: facts[k] for k in SESSION_KEYS}]
    doc = {"script": "bench/ranks.py", "config": config, **facts, "sessions": sessions, "tasks": results}
    rf = ResultsFile(out, doc, args.budget_s, earlier.get("elapsed_s", 0.0), earlier.get("units_done", 0))
    for task, f in files.items():
        if rf.doc["stopped"] is not None:
            break
        entry = next((r for r in results if r["task"] == task), None)
        if entry is None:
            results.append(entry := {"task": task, "file": rel(ROOT / f)})
        _one_task(task, ROOT / f, args, rf, entry)
    rf.finish()
    for r in results:
        if r.get("boards") or r.get("finals"):
            say(_summary(r))
    return 1 if rf.doc["stopped"] and not rf.doc["stopped"].startswith("budget:") else 0


SESSION_KEYS = ("commit", "date", "device", "driver", "torch", "triton")


def _resumed(out: Path, facts: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The --out file whose boards --resume continues (nothing there: a new file); exit 2 on a misuse."""
    why = None
    prev: dict[str, Any] = {}
    if args.finals and args.boards:
        why = "--resume continues boards (--finals 0) or finals (--boards 0), not both in one call"
    elif out.exists():
        try:
            prev = json.loads(out.read_text())
        except (OSError, ValueError) as e:
            why = f"--resume: {rel(out)} is not a readable results file ({e}); choose another --out"
        else:
            why = _not_poolable(out, prev, facts["device"], args.warmup_chunks, "--resume")
    if why:
        say(why)
        raise SystemExit(2)
    if not prev:
        return {}
    first = {k: prev.get(k) for k in SESSION_KEYS}
    return {
        "tasks": prev.get("tasks") or [],
        "sessions": prev.get("sessions") or [first],
        "elapsed_s": prev.get("elapsed_s") or 0.0,
        "units_done": prev.get("units_done") or 0,
    }


def _not_poolable(path: Path, prev: dict[str, Any], device: str, warmup_chunks: int, flag: str) -> str | None:
    """Why the boards of ``prev`` (read from ``path``) may not join a file of ``device``, or None."""
    if prev.get("script") != "bench/ranks.py" or prev.get("device") != device:
        return (
            f"{flag}: {rel(path)} is not a board file of bench/ranks.py on {device} (script "
            f"{prev.get('script')!r}, device {prev.get('device')!r}); boards of two devices are not pooled"
        )
    chunks = (prev.get("config") or {}).get("warmup_chunks", 0)
    if chunks != warmup_chunks:
        return f"{flag}: {rel(path)} was measured with --warmup-chunks {chunks}, not {warmup_chunks}: give the same, or another --out"
    return None


def merge(out: Path, others: list[Path]) -> int:
    """Adds the boards and sessions of ``others`` to the --out file as --resume would have (a device call
    that started from a copy of the tree without --out's latest boards wrote them to a file of its own);
    nothing is measured. The file's ``merged`` lists what was added."""
    try:
        doc = json.loads(out.read_text())
        extra = [(p, json.loads(p.read_text())) for p in others]
    except (OSError, ValueError) as e:
        say(f"--merge: {e}; give --out and --merge board files of this script")
        return 2
    for p, prev in extra:
        why = _not_poolable(
            p, prev, doc.get("device", "-"), (doc.get("config") or {}).get("warmup_chunks", 0), "--merge"
        )
        if why:
            say(why)
            return 2
    for p, prev in extra:
        for task in prev.get("tasks") or []:
            entry = next((r for r in doc["tasks"] if r["task"] == task["task"]), None)
            if entry is None:
                doc["tasks"].append(entry := task | {"boards": [], "finals": [], "wall_s": 0.0})
            entry["boards"] += task.get("boards") or []
            entry["wall_s"] = entry.get("wall_s", 0.0) + task.get("wall_s", 0.0)
            _summarize_boards(entry)
            if task.get("finals"):
                entry["finals"] = (entry.get("finals") or []) + task["finals"]
                _summarize_finals(entry)
        doc["sessions"] += prev.get("sessions") or []
        doc["units_done"] += prev.get("units_done", 0)
        doc["elapsed_s"] += prev.get("elapsed_s", 0.0)
        doc["stopped"], doc["complete"] = prev.get("stopped"), prev.get("complete", False)
        doc.setdefault("merged", []).append(f"{p.name}: {len(prev.get('sessions') or [])} session(s), added by --merge")
    write_results(out, doc)
    for r in doc["tasks"]:
        say(_summary(r))
    return 0


def _summary(r: dict[str, Any]) -> str:
    line = f"{r['task']}: no boards"
    if r.get("boards"):
        hw = r["median_half_width_rel"]
        line = (
            f"{r['task']}: {r['boards_all_tied']}/{len(r['boards'])} boards all tied; median half-width "
            f"{'-' if hw is None else f'{100 * hw:.2f}%'}; median board {r['median_board_wall_s']:.0f} s"
        )
    if r.get("finals"):
        line += (
            f"; finals passed {r['finals_passed']}/{len(r['finals'])}, variant slowdown "
            f"{_pct(r['median_final_slowdown'])} (finals) / "
            f"{_pct(r['slowdown_measured_separately'].get('slowdown'))} (measured separately)"
        )
    return line


def _pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.1f}%"


if __name__ == "__main__":
    sys.exit(main())
