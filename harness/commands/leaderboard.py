"""``leaderboard``: rank the stored runs of a task, one section per device.

Also home of the small table renderer (table / markdown / csv) that history, compare and export use.
"""
from __future__ import annotations

import csv
import io
import json
import math
import sys
from typing import Any, Sequence

from harness.errors import UsageError
from harness.ranking import RankRule, Leaderboard, build_leaderboard
from harness.store import open_store

NAME = "leaderboard"
HELP = "rank the stored results of a task (per device; ties within measurement error marked '=')"
EXAMPLES = """  python -m harness leaderboard --task mxfp4_mm
  python -m harness leaderboard --task mxfp4_mm --device "NVIDIA H200" --format markdown
  python -m harness leaderboard --task nvfp4_gemm --format json > board.json

Ranking: the best complete, passing run of each submission (same content hash and name) on each
device, scored by the task's rule (geom: geometric mean of the per-shape means). Failed, crashed,
timed-out, rejected and interrupted submissions are listed under "not ranked" with the reason.
Ties: an entry whose 95% interval (score +- 1.96 standard errors, propagated from the per-shape
standard errors) overlaps its group leader's shares the leader's rank, shown as "=2"."""

FORMATS = ("table", "markdown", "json", "csv")


def add_results_dir_argument(parser) -> None:
    parser.add_argument("--results-dir", metavar="DIR", default=None,
                        help="results folder or .sqlite file (default: $HARNESS_RESULTS_DIR or ./harness-results)")


def add_arguments(parser) -> None:
    parser.add_argument("--task", required=True, help="task name, e.g. mxfp4_mm")
    parser.add_argument("--device", default=None, help="only this device (as shown in the section titles)")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("--rule", choices=[r.value for r in RankRule], default=None,
                        help="override the task's ranking rule")
    parser.add_argument("--mode", choices=("leaderboard", "benchmark", "test+benchmark"), default=None,
                        help="rank only runs made in this mode (default: every mode that has timings)")
    add_results_dir_argument(parser)


def run(args) -> int:
    sys.stdout.write(leaderboard_text(args.task, fmt=args.format, device=args.device,
                                      results_dir=args.results_dir, rule=args.rule, mode=args.mode))
    return 0


# --- library-style helpers (return strings; the commands print) ---------------------------------

def resolve_task(task: str, override: str | None = None) -> tuple[str, RankRule | None, str | None]:
    """(task name, its ranking rule or the override, why the task could not be loaded or None).

    ``task`` may be a name or a task.yml path (then the name is the task's own).
    """
    try:
        from tasks import load_task
        spec = load_task(task)
    except Exception as exc:  # noqa: BLE001 - unknown task or task package not importable
        return task, RankRule(override) if override else None, str(exc)
    return spec.name, RankRule(override or spec.ranking_by), None


def ranking_rule(task: str, override: str | None, known_in_store: bool) -> tuple[str, RankRule, str | None]:
    """(task name, the task's rule or the override, a warning to show when the rule had to be assumed)."""
    name, rule, problem = resolve_task(task, override)
    if rule is not None:
        return name, rule, None
    if not known_in_store:
        raise UsageError(f"unknown task {task!r} ({problem}); pass a task that has results in the store "
                         "or one under tasks/")
    return name, RankRule.GEOM, (f"warning: cannot load task {task!r} ({problem}); ranking by 'geom'; "
                                 "pass --rule to choose")


def build(task: str, *, device: str | None = None, results_dir: str | None = None,
          rule: str | None = None, mode: str | None = None) -> tuple[Leaderboard, list[str]]:
    """The leaderboard of a task from the store, plus warnings for stderr."""
    name = resolve_task(task)[0]
    with open_store(results_dir) as st:
        runs = [r for r in st.runs(task=name) if mode is None or r.mode == mode]
        _, rank_rule, warning = ranking_rule(task, rule, bool(runs))
        known_tasks, devices = st.tasks(), st.devices(name)
        if device is not None and device not in devices:
            raise UsageError(f"no results for task {name!r} on device {device!r}; choose one of: "
                             + (", ".join(repr(d) for d in devices) or "(none yet)"))
        cases = st.cases(r.id for r in runs)
    warnings = [warning] if warning else []
    if not runs:
        warnings.append(f"no results for task {name!r} in the store yet (tasks with results: "
                        f"{', '.join(known_tasks) or 'none'}); run 'python -m harness run-all' first")
    return build_leaderboard(name, rank_rule, runs, cases, device=device), warnings


def leaderboard_text(task: str, *, fmt: str = "table", device: str | None = None,
                     results_dir: str | None = None, rule: str | None = None, mode: str | None = None) -> str:
    """The rendered leaderboard; warnings (assumed rule, empty store) go to stderr."""
    board, warnings = build(task, device=device, results_dir=results_dir, rule=rule, mode=mode)
    for w in warnings:
        print(w, file=sys.stderr)
    return render(board, fmt)


def us(x: float | None) -> str:
    """A time in microseconds, rounded for people."""
    if x is None or not math.isfinite(x):
        return "-"
    if abs(x) >= 100:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def format_rows(headers: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str,
                right: Sequence[int] = ()) -> str:
    """Render rows as an aligned text table, a GitHub markdown table or CSV."""
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(headers)
        writer.writerows(["" if v is None else v for v in row] for row in rows)
        return buf.getvalue()
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    if fmt == "markdown":
        def esc(s: str) -> str:
            return s.replace("|", "\\|").replace("\n", " ")
        lines = ["| " + " | ".join(esc(h) for h in headers) + " |",
                 "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"]
        lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in cells]
        return "\n".join(lines) + "\n"
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(row):
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in cells]) + "\n"


def render(board: Leaderboard, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(board.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n"
    if fmt == "csv":
        return _render_csv(board)
    parts = []
    if not board.boards:
        parts.append(f"No results for {board.task} yet.\n")
    for b in board.boards:
        title = f"{board.task} on {b.device}" + (f" ({b.device_kind})" if b.device_kind else "")
        rule = (f"Ranked by the {board.rule.description} (lower is better); '=' marks a tie within "
                "measurement error (95% intervals overlap).")
        parts.append(f"### {title}\n\n{rule}\n" if fmt == "markdown" else f"{title}\n{rule}\n")
        if b.ranked:
            headers = ["rank", "name", "score (us)", "\u00b1 (us)", "gap to leader"] + b.shapes + ["verdict", "date"]
            rows = []
            for e in b.ranked:
                times = {s.label: s.mean_us for s in e.shapes}
                gap = "leader" if e.gap_us == 0 else f"{e.gap_x:.2f}x slower (+{us(e.gap_us)} us)"
                rows.append([e.rank_label, e.name, us(e.score_us), us(e.stderr_us), gap]
                            + [us(times.get(label)) for label in b.shapes] + [e.verdict, e.date])
            right = [0, 2, 3] + list(range(5, 5 + len(b.shapes)))
            parts.append(format_rows(headers, rows, fmt, right))
        else:
            parts.append("No complete passing run with timings yet.\n")
        if b.unranked:
            heading = "**Not ranked**\n\n" if fmt == "markdown" else "not ranked:\n"
            rows = [[u.name, u.verdict, u.reason, u.date] for u in b.unranked]
            parts.append(heading + format_rows(["name", "verdict", "reason", "date"], rows, fmt))
    return "\n".join(parts)


def _render_csv(board: Leaderboard) -> str:
    shapes: list[str] = []
    for b in board.boards:
        shapes += [s for s in b.shapes if s not in shapes]
    headers = ["task", "rule", "device", "section", "rank", "tied", "name", "sha256", "score_us", "stderr_us",
               "gap_x", "gap_us", "verdict", "reason", "date", "run_id"] + [f"mean_us[{s}]" for s in shapes]
    rows = []
    for b in board.boards:
        for e in b.ranked:
            times = {s.label: s.mean_us for s in e.shapes}
            rows.append([board.task, board.rule.value, b.device, "ranked", e.rank, e.tied, e.name, e.sha256,
                         repr(e.score_us), repr(e.stderr_us), repr(e.gap_x), repr(e.gap_us), e.verdict, "",
                         e.date, e.run_id] + [repr(times[s]) if s in times else "" for s in shapes])
        for u in b.unranked:
            rows.append([board.task, board.rule.value, b.device, "unranked", "", "", u.name, u.sha256, "", "", "",
                         "", u.verdict, u.reason, u.date, u.run_id] + [""] * len(shapes))
    return format_rows(headers, rows, "csv")
