"""``compare``: is submission A faster than B, per shape and overall, beyond measurement error?"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from typing import Any

from harness.analysis import compare as stats
from harness.analysis import ties
from harness.analysis.ranking import Pooled, RankRule, between_runs, pool_runs, run_score
from harness.analysis.run_spread import RunSpread
from harness.cli.options import READ_ONLY_EXIT_CODES, add_results_dir_argument
from harness.engine.preflight import check_store_exists
from harness.errors import UsageError
from harness.report.board import (
    StoredBlocks,
    add_margin_argument,
    margin_fraction,
    ranked_together,
    ranking_rule,
    resolve_task,
)
from harness.report.runs import find_runs, no_runs_error
from harness.report.tables import format_rows, us
from harness.results import Stats
from harness.store.database import RunRow, Store, open_store

EXIT_CODES = READ_ONLY_EXIT_CODES
COMPARE_JSON_VERSION = 4  # 1 - first version; 2 - "decision": the tie rule's call (harness.analysis.ties);
# 3 - each side pools every run that counts on the board ("run_ids"; "run_id" is the latest), and "mode";
# 4 - "between_runs": the between-run spread the decision adds, as the board does (null: none)
EXAMPLES = """  python -m harness compare submissions/a.py submissions/b.py --task mxfp4_mm
  python -m harness compare "Fast Kernel" baseline --task mxfp4_mm --device "NVIDIA H200" --format json

Each side is what the leaderboard ranks: every complete, passing run of its content on the device, in
the mode the board ranks, pooled (the content of its latest such run, for a file that changed). The speed-up is
mean_B / mean_A per shape and their geometric mean overall; "+-" is one standard error propagated
from the samples (delta method), the interval is 95% (Welch-Satterthwaite degrees of freedom), and
"no significant difference" is said when that interval includes 1. The verdict line is the leaderboard's
tie rule on the two scores (intervals from the runs' blocks): A and B are told apart only when the 95%
interval of their ratio excludes 1 and the difference exceeds the equivalence margin (--margin, 1%)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A", help="submission file or name")
    parser.add_argument("b", metavar="B", help="submission file or name")
    parser.add_argument("--task", required=True, help="task name, e.g. mxfp4_mm")
    parser.add_argument("--device", default=None, help="device (needed when both ran on several)")
    parser.add_argument("--format", choices=("table", "markdown", "json"), default="table")
    add_margin_argument(parser)
    add_results_dir_argument(parser)


def _side(
    st: Store,
    task: str,
    ref: str,
    runs: list[RunRow],
    blocks: StoredBlocks,
    rule: RankRule,
    device: str,
    mode: str | None,
) -> Pooled:
    """``ref``'s ``runs`` (on ``device``, in the mode and warm-up the board ranks), pooled as the leaderboard
    pools them (the content of the latest)."""
    cases = st.cases(r.id for r in runs)
    scored = [r for r in runs if run_score(r, cases, rule) is not None]
    if not scored:
        raise UsageError(
            f"{ref!r} has no complete, passing {mode}-mode run with timings on {device!r} that the board "
            f"would rank; see 'python -m harness history {shlex.quote(ref)} --task {task}'"
        )
    latest = max(scored, key=lambda r: (r.started_at, r.id))
    same = [r for r in runs if r.submission_sha256 == latest.submission_sha256]
    pooled = pool_runs(same, cases, rule, blocks.scores)
    assert pooled is not None  # latest has a score
    return pooled


def _device(a: str, b: str, runs_a: list[RunRow], runs_b: list[RunRow], wanted: str | None) -> str:
    devs_a = {r.device_name for r in runs_a if r.device_name}
    devs_b = {r.device_name for r in runs_b if r.device_name}
    common = sorted(devs_a & devs_b)
    if wanted is not None:
        if wanted not in common:
            raise UsageError(
                f"{a!r} and {b!r} have not both run on {wanted!r}; common devices: "
                + (", ".join(map(repr, common)) or "none")
            )
        return wanted
    if len(common) != 1:
        raise UsageError(
            f"{a!r} and {b!r} ran together on {len(common)} devices "
            f"({', '.join(map(repr, common)) or 'none'}); choose one with --device"
            if common
            else f"{a!r} and {b!r} never ran on the same device; results from different devices are not compared"
        )
    return common[0]


def _sides(st: Store, args: argparse.Namespace) -> tuple[str, str | None, Pooled, Pooled, RunSpread | None]:
    """(device, mode, A's runs, B's runs, the between-run spread the board of that device and mode adds), or
    a UsageError saying why they cannot be compared."""
    refs = (args.a, args.b)
    found = {ref: find_runs(st, args.task, ref) for ref in refs}
    for ref in refs:
        if not found[ref]:
            raise no_runs_error(st, args.task, ref)
    device = _device(args.a, args.b, found[args.a], found[args.b], args.device)
    _, rule, _ = ranking_rule(args.task, None, True)
    on_device = list({r.id: r for ref in refs for r in found[ref] if r.device_name == device}.values())
    together = ranked_together(st, on_device)
    for note in together.notes:
        print(note, file=sys.stderr)
    mode, blocks, allowed_ids = together.mode, together.blocks, {r.id for r in together.runs}
    side_a, side_b = (
        _side(
            st,
            args.task,
            ref,
            [r for r in found[ref] if r.id in allowed_ids],
            blocks,
            rule,
            device,
            mode,
        )
        for ref in refs
    )
    if side_a.latest.submission_sha256 == side_b.latest.submission_sha256:
        raise UsageError(
            f"{args.a!r} and {args.b!r} are the same submission (the same content, "
            f"{side_a.latest.submission_sha256[:12]}, ranked as one entry): that would compare it with itself; give "
            "two different submissions (see 'python -m harness leaderboard --task " + args.task + "')"
        )
    board = ranked_together(st, st.runs(task=args.task, device=device), mode)
    cases = st.cases(r.id for r in board.runs)
    return device, mode, side_a, side_b, between_runs(device, args.task, board.runs, cases, rule, board.blocks.scores)


def _decision(a: Pooled, b: Pooled, margin: float, between_runs: RunSpread | None) -> ties.Decision:
    """The tie rule on the two sides' scores, each with its blocks' spread (and the device and task's
    measured between-run spread), or its samples'."""
    return ties.welch(a.spread(between_runs), b.spread(between_runs), margin)


def _decision_text(d: ties.Decision, name_a: str, name_b: str) -> str:
    rule = f"tie rule v{d.rule_version}, {d.margin:.1%} margin"
    if d.call is ties.Call.TIED:
        return f"tied: {name_a} and {name_b} cannot be told apart ({d.reason}; {rule})"
    word = "faster" if d.call is ties.Call.FASTER else "slower"
    return f"{name_a} is {word} than {name_b}: score ratio A/B {d.ratio:.4f}, 95% CI {d.low:.4f}-{d.high:.4f} ({rule})"


def _ratio_dict(r: stats.Ratio) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in vars(r).items()}


def run(args: argparse.Namespace) -> int:
    args.task = resolve_task(args.task)[0]
    check_store_exists(args.results_dir)
    margin = margin_fraction(args.margin)
    with open_store(args.results_dir) as st:
        device, mode, side_a, side_b, between = _sides(st, args)
    decision = _decision(side_a, side_b, margin, between)
    name_a, name_b = side_a.latest.display_name, side_b.latest.display_name
    if name_a == name_b:
        name_a, name_b = f"{name_a} ({_runs_text(side_a)})", f"{name_b} ({_runs_text(side_b)})"
    shapes_a, shapes_b = side_a.stats, side_b.stats
    common = [label for label in shapes_a if label in shapes_b]
    if not common:
        raise UsageError(f"{name_a} and {name_b} share no benchmark shape (rerun them in the same mode)")
    per_shape = [(label, stats.speedup(shapes_a[label], shapes_b[label])) for label in common]
    overall = stats.geomean_speedup([r for _, r in per_shape])
    if args.format == "json":
        out = {
            "version": COMPARE_JSON_VERSION,
            "task": args.task,
            "device": device,
            "mode": mode,
            "a": {"name": name_a, "run_id": side_a.latest.id, "run_ids": [r.id for r in side_a.runs]},
            "b": {"name": name_b, "run_id": side_b.latest.id, "run_ids": [r.id for r in side_b.runs]},
            "shapes": [
                dict(
                    shape=label,
                    mean_us_a=shapes_a[label].mean / 1e3,
                    mean_us_b=shapes_b[label].mean / 1e3,
                    speedup=_ratio_dict(r),
                    text=stats.describe(r, name_a, name_b),
                )
                for label, r in per_shape
            ],
            "overall": dict(speedup=_ratio_dict(overall), text=stats.describe(overall, name_a, name_b)),
            "decision": dict(decision.to_dict(), text=_decision_text(decision, name_a, name_b)),
            "between_runs": None
            if between is None
            else {"sd_log": between.sd_log, "df": between.df, "source": between.source},
        }
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True, allow_nan=False) + "\n")
        return 0
    headers = ["shape", f"A: {name_a} (us)", f"B: {name_b} (us)", "B / A", "\u00b1", "p (Welch)", "verdict"]
    rows = [_shape_row(label, shapes_a[label], shapes_b[label], r) for label, r in per_shape]
    sys.stdout.write(
        f"{args.task} on {device}, {mode} mode: A = {name_a} ({_runs_text(side_a)}), "
        f"B = {name_b} ({_runs_text(side_b)})\n\n"
    )
    sys.stdout.write(format_rows(headers, rows, args.format, right=[1, 2, 3, 4, 5]))
    sys.stdout.write("\noverall (geometric mean over shapes): " + stats.describe(overall, name_a, name_b) + "\n")
    sys.stdout.write("verdict (as the leaderboard decides): " + _decision_text(decision, name_a, name_b) + "\n")
    if between is not None and between.sd_log > 0:
        sys.stdout.write(
            f"(each side's interval adds a {100 * between.sd_log:.2f}% between-run spread: {between.source})\n"
        )
    return 0


def _runs_text(side: Pooled) -> str:
    ids = [str(r.id) for r in side.runs]
    return f"run {ids[0]}" if len(ids) == 1 else f"runs {', '.join(ids)} pooled"


def _shape_row(label: str, a: Stats, b: Stats, r: stats.Ratio) -> list[str]:
    verdict = {None: "cannot tell", False: "no significant difference"}.get(
        r.significant, "A faster" if r.value > 1 else "B faster"
    )
    return [label, us(a.mean / 1e3), us(b.mean / 1e3), f"{r.value:.3f}", f"{r.stderr:.3f}", f"{r.p_value:.2g}", verdict]
