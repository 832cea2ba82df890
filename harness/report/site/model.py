"""The page model of the leaderboard site: plain dataclasses built from the results store.

The ranking is :func:`harness.report.board.load_board`'s (the one the text leaderboard, the CSV/JSON
boards and ``export`` use); this module only adds what the pages show beside it: per-shape speed of
light from each run's stored result, every stored run's score over time (history) and the board's
best-so-far line, and one :class:`RunPage` per stored run. Templates and charts read these objects and
nothing else. A figure that is missing (no speed of light on a CPU, a single sample, NaN, an
interrupted run) is None here, and a note says why.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from harness.analysis.final import undecided_labels
from harness.analysis.ranking import UNKNOWN_DEVICE, DeviceBoard, Entry, Leaderboard, RankRule, run_score, tie_rule_text
from harness.report.board import interval_notes, load_board
from harness.results import BlockRecord, CaseResult, RunResult, shape_label
from harness.store.database import CaseRow, RunRow, Store

RUNS_DIR = "runs"


def finite(x: Any) -> float | None:
    """``x`` as a float, or None when it is missing, NaN or infinite."""
    if x is None:
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def run_href(run_id: int) -> str:
    """Where a run's page is, relative to the site's root."""
    return f"{RUNS_DIR}/run-{run_id}.html"


@dataclass
class RankedRow:
    rank_label: str
    tied: bool
    name: str
    score_us: float
    ci_low_us: float | None  # None when the score has no standard error (a single sample)
    ci_high_us: float | None
    gap: str  # "leader" or "1.52x slower (+3.10 us)", as the text table says it
    verdict: str
    mode: str
    date: str
    run_id: int
    sha256: str
    interval_source: str = "none"  # "blocks", "samples" (one process) or "none"
    blocks: int = 0
    aliases: list[str] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)  # every run the entry pools (run_id: the latest)


@dataclass
class UnrankedRow:
    name: str
    verdict: str
    reason: str
    date: str
    run_id: int


@dataclass
class ShapePoint:
    label: str
    mean_us: float
    stderr_us: float | None
    sol_percent: float | None  # 100 * speed of light / mean, from the run's stored result


@dataclass
class Series:
    """One ranked submission's per-shape times: one trace of the per-shape plots."""

    name: str
    label: str  # the name, with the content hash's start when two entries share a name
    run_id: int
    points: list[ShapePoint]


@dataclass
class HistoryPoint:
    name: str
    run_id: int
    when: str  # ISO 8601
    score_us: float
    stderr_us: float | None
    mode: str


@dataclass
class BoardSection:
    """One task on one device: the table, the plots' data and what is missing from them."""

    task: str
    device: str
    device_kind: str | None
    anchor: str
    rule: str
    shapes: list[str]
    ranked: list[RankedRow]
    unranked: list[UnrankedRow]
    series: list[Series]
    sol_floor_us: dict[str, float]  # shape -> speed-of-light time, for the shapes that have one
    history: list[HistoryPoint]  # every scored run, oldest first
    best_so_far: list[HistoryPoint]  # the board's best score after each run that improved it
    notes: list[str] = field(default_factory=list)  # what is missing and why
    tie_rule: str = ""  # the tie rule, in words
    final: FinalView | None = None  # the latest final scoring of this board


@dataclass
class FinalRow:
    rank_label: str
    name: str
    score_us: float | None
    rounds: int
    vs_leader: str  # "ratio 1.0312 (95% CI 1.02-1.04) vs orig", or ""
    failed: str


@dataclass
class FinalView:
    final_id: int | None
    rounds: int
    margin: float
    finished_at: str
    rows: list[FinalRow]
    undecided: list[str]


@dataclass
class TaskSection:
    name: str
    anchor: str
    sections: list[BoardSection]
    warnings: list[str]


@dataclass
class CaseLine:
    kind: str
    label: str
    verdict: str
    message: str
    runs: int | None
    mean_us: float | None
    stderr_us: float | None
    kernel_only_us: float | None
    kernel_only_note: str
    sol_us: float | None
    sol_percent: float | None
    sol_note: str
    timing: str  # the run's sampling method, and the kernel-only method when there is one
    warnings: list[str]


@dataclass
class BlockLine:
    """One block of a run, as its page shows it."""

    index: int
    order: str  # the shapes in the order the block timed them
    score_us: float | None
    sm_mhz: str  # before -> after, or why not known
    temp_c: str
    throttled: str  # the throttle reasons seen, or ""
    wall_s: float | None


@dataclass
class RunPage:
    run_id: int
    task: str
    name: str
    path: str
    sha256: str
    mode: str
    verdict: str
    complete: bool
    message: str
    started_at: str
    finished_at: str | None
    wall_s: float | None
    score_us: float | None
    score_ci_us: list[float] | None
    device: dict
    software: dict
    harness_version: str | None
    git_commit: str | None
    timing_method: str
    warnings: list[str]
    cases: list[CaseLine]
    board_anchor: str  # the index section that lists it
    board_place: str  # e.g. "ranked =2", "not ranked: ...", "not one of the runs its board entry pools"
    other_runs: list[RunRow]  # the other stored runs of the same name on the same task and device
    notes: list[str] = field(default_factory=list)
    interval_method: str = ""  # how score_ci_us was made, in words
    blocks: list[BlockLine] = field(default_factory=list)


@dataclass
class SiteModel:
    tasks: list[TaskSection]
    runs: list[RunPage]
    warnings: list[str]


def _section_anchor(task: str, device: str) -> str:
    return f"{slug(task)}--{slug(device)}"


def _gap(e: Entry) -> str:
    return "leader" if e.gap_us == 0 else f"{e.gap_x:.2f}x slower (+{e.gap_us:.2f} us)"


def _ranked_row(e: Entry) -> RankedRow:
    return RankedRow(
        e.rank_label,
        e.tied,
        e.name,
        e.score_us,
        finite(e.low_us),
        finite(e.high_us),
        _gap(e),
        e.verdict,
        e.mode,
        e.date,
        e.run_id,
        e.sha256,
        e.interval_source,
        e.blocks,
        list(e.aliases),
        list(e.run_ids),
    )


def _sol_by_shape(result: RunResult | None) -> dict[str, tuple[float | None, float | None, str]]:
    """shape label -> (SOL time in us, % of SOL, note) for a run's benchmark cases."""
    out = {}
    for c in result.benchmark_cases() if result else []:
        sol = c.sol
        time_us = _us(sol.time_ns) if sol else None
        out[shape_label(c.spec)] = (time_us, finite(sol.percent) if sol else None, (sol.note if sol else "") or "")
    return out


def _history(runs: list[RunRow], cases: dict[int, list[CaseRow]], rule: RankRule) -> list[HistoryPoint]:
    points = []
    for r in runs:
        top = run_score(r, cases, rule)
        if top is not None:
            s = top[0]
            points.append(
                HistoryPoint(
                    r.display_name, r.id, r.finished_at or r.started_at, s.value_us, finite(s.stderr_us), r.mode
                )
            )
    return sorted(points, key=lambda p: (p.when, p.run_id))


def _best_so_far(history: list[HistoryPoint]) -> list[HistoryPoint]:
    best: list[HistoryPoint] = []
    for p in history:
        if not best or p.score_us < best[-1].score_us:
            best.append(p)
    return best


def _series(b: DeviceBoard, results: dict[int, RunResult | None]) -> tuple[list[Series], dict[str, float], set[str]]:
    """The per-shape plots' traces, the speed-of-light floor per shape, and why some shapes have none."""
    series: list[Series] = []
    floor: dict[str, float] = {}
    sol_notes: set[str] = set()
    names = [e.name for e in b.ranked]
    for e in b.ranked:
        sol = _sol_by_shape(results.get(e.run_id))
        points = []
        for s in e.shapes:
            time_us, percent, note = sol.get(s.label, (None, None, "no stored result for this run"))
            if time_us is not None:
                floor.setdefault(s.label, time_us)
            elif note:
                sol_notes.add(note)
            if finite(s.mean_us) is not None:
                points.append(ShapePoint(s.label, s.mean_us, finite(s.stderr_us), percent))
        label = e.name if names.count(e.name) == 1 else f"{e.name} ({e.sha256[:8]})"
        series.append(Series(e.name, label, e.run_id, points))
    return series, floor, sol_notes


def _sol_notes(b: DeviceBoard, floor: dict[str, float], sol_notes: set[str]) -> list[str]:
    if not b.ranked:
        return ["no ranked submission on this device yet, so there is nothing to plot"]
    if len(floor) < len(b.shapes):
        missing = [s for s in b.shapes if s not in floor]
        why = "; ".join(sorted(sol_notes)) or "the stored results carry no speed-of-light figure"
        return [
            f"no speed of light for {len(missing)} of {len(b.shapes)} shapes ({why}), "
            "so the floor and the % of SOL view are missing there"
        ]
    return []


def _board_section(
    task: str,
    rule: RankRule,
    b: DeviceBoard,
    runs: list[RunRow],
    cases: dict[int, list[CaseRow]],
    results: dict[int, RunResult | None],
    margin: float,
) -> BoardSection:
    device_runs = [r for r in runs if (r.device_name or UNKNOWN_DEVICE) == b.device]
    series, floor, sol_notes = _series(b, results)
    notes = _sol_notes(b, floor, sol_notes)
    notes += interval_notes(b.ranked, b)
    history = _history(device_runs, cases, rule)
    return BoardSection(
        task=task,
        device=b.device,
        device_kind=b.device_kind,
        anchor=_section_anchor(task, b.device),
        rule=rule.description,
        shapes=list(b.shapes),
        ranked=[_ranked_row(e) for e in b.ranked],
        unranked=[UnrankedRow(u.name, u.verdict, u.reason, u.date, u.run_id) for u in b.unranked],
        series=series,
        sol_floor_us=floor,
        history=history,
        best_so_far=_best_so_far(history),
        notes=notes,
        tie_rule=tie_rule_text(margin),
        final=_final_view(b.final),
    )


def _final_view(final: dict[str, Any] | None) -> FinalView | None:
    if not final:
        return None
    rows = []
    for p in final.get("places", []):
        vs = p.get("vs_leader") or {}
        text = (
            f"ratio {vs['ratio']:.4f} (95% CI {vs['low']:.4f}-{vs['high']:.4f}) vs {vs.get('leader')}"
            if vs.get("low") is not None
            else ""
        )
        rows.append(
            FinalRow(
                str(p.get("rank_label")),
                str(p.get("name")),
                finite(p.get("score_us")),
                int(p.get("rounds") or 0),
                text,
                str(p.get("failed") or ""),
            )
        )
    return FinalView(
        final.get("final_id"),
        int(final.get("rounds") or 0),
        float(final.get("margin") or 0.0),
        str(final.get("finished_at") or ""),
        rows,
        undecided_labels(final),
    )


def _us(ns: Any) -> float | None:
    """Nanoseconds as microseconds; None when missing or not finite."""
    value = finite(ns)
    return value / 1e3 if value is not None else None


def _case_line(c: CaseResult, run_timing: str) -> CaseLine:
    s, sol, extra = c.stats, c.sol, c.extra or {}
    method = extra.get("kernel_only_method")
    timing = run_timing.split(":")[0] if c.kind != "test" and run_timing else ""
    if method:
        timing += f"; kernel-only: {method}"
    return CaseLine(
        kind=c.kind,
        label=shape_label(c.spec),
        verdict=c.verdict,
        message=c.message or "",
        runs=s.runs if s else None,
        mean_us=_us(s.mean) if s else None,
        stderr_us=_us(s.stderr) if s else None,
        kernel_only_us=_us(extra.get("kernel_only_ns")),
        kernel_only_note=str(extra.get("kernel_only_note") or ""),
        sol_us=_us(sol.time_ns) if sol else None,
        sol_percent=finite(sol.percent) if sol else None,
        sol_note=(sol.note if sol else "") or "",
        timing=timing,
        warnings=list(c.warnings or []),
    )


def _place(row: RunRow, board: Leaderboard | None) -> str:
    for b in board.boards if board else []:
        for e in b.ranked:
            if row.id in e.run_ids:
                pooled = f", one of the {len(e.run_ids)} runs its entry pools" if len(e.run_ids) > 1 else ""
                return f"ranked {e.rank_label} on {b.device}{pooled}"
        for u in b.unranked:
            if u.run_id == row.id:
                return f"not ranked on {b.device}: {u.reason}"
    return (
        "not one of the runs its board entry pools (another mode, or its entry counts only the runs with "
        "independent blocks)"
    )


def _page_notes(result: RunResult | None, cases: list[CaseLine]) -> list[str]:
    notes = []
    if result is None:
        notes.append("this run never stored a result (it was interrupted, or is still running): no cases, no timings")
    if result and not cases:
        notes.append("the stored result has no cases")
    if any(c.kind != "test" and c.verdict == "pass" and c.mean_us is None for c in cases):
        notes.append("some passed benchmark cases have no mean time (missing or NaN in the stored result)")
    return notes


def _run_page(row: RunRow, result: RunResult | None, board: Leaderboard | None, siblings: list[RunRow]) -> RunPage:
    if result is None:
        return _summary_page(row, board, siblings)
    timing = result.timing_method
    cases = [_case_line(c, timing) for c in result.cases]
    page = _summary_page(row, board, siblings)
    page.device = {k: v for k, v in vars(result.device).items() if v is not None}
    page.score_us, page.score_ci_us = finite(result.score_us), result.score_ci_us
    page.timing_method, page.warnings, page.cases = timing, list(result.warnings), cases
    page.notes = _page_notes(result, cases)
    page.interval_method = _interval_method(result)
    page.blocks = [_block_line(b, result) for b in result.blocks]
    return page


def _summary_page(row: RunRow, board: Leaderboard | None, siblings: list[RunRow]) -> RunPage:
    """A run's page from its row alone (what a run without a stored result shows)."""
    return RunPage(
        run_id=row.id,
        task=row.task,
        name=row.display_name,
        path=row.submission_path,
        sha256=row.submission_sha256,
        mode=row.mode,
        verdict=row.verdict,
        complete=row.complete,
        message=row.message,
        started_at=row.started_at,
        finished_at=row.finished_at,
        wall_s=finite(row.wall_s),
        score_us=None,
        score_ci_us=None,
        device={"name": row.device_name, "kind": row.device_kind},
        software=dict(row.software),
        harness_version=row.harness_version,
        git_commit=row.git_commit,
        timing_method="",
        warnings=[],
        cases=[],
        board_anchor=_section_anchor(row.task, row.device_name or UNKNOWN_DEVICE),
        board_place=_place(row, board),
        other_runs=[r for r in siblings if r.id != row.id],
        notes=_page_notes(None, []),
    )


def _interval_method(result: RunResult | None) -> str:
    si = result.score_interval if result else None
    if si is None:
        return "95% interval from one process's samples (bootstrap)" if result and result.score_ci_us else ""
    if si.from_blocks:
        spread = f", blocks spread {100 * si.spread:.2f}%" if si.spread is not None else ""
        df = f"{si.df:.0f}" if si.df is not None else "?"
        return f"95% interval from {si.source_text()} (t, {df} degrees of freedom{spread})"
    return "95% interval from one process's samples (bootstrap): a rerun can differ by more"


def _reading(before: dict[str, Any], after: dict[str, Any], key: str) -> str:
    if key not in before and key not in after:
        return str(before.get("note") or after.get("note") or "not read")
    return f"{before.get(key, '?')} \u2192 {after.get(key, '?')}"


def _block_line(b: BlockRecord, result: RunResult) -> BlockLine:
    specs = [c.spec for c in result.benchmark_cases()]
    order = ", ".join(shape_label(specs[i]) if i < len(specs) else str(i) for i in b.order)
    return BlockLine(
        b.index + 1,
        order,
        finite(b.score_us),
        _reading(b.clocks_before, b.clocks_after, "sm_mhz"),
        _reading(b.clocks_before, b.clocks_after, "temp_c"),
        ", ".join(b.throttled),
        finite(b.wall_s),
    )


def _stored_result(st: Store, run_id: int, warnings: list[str]) -> RunResult | None:
    try:
        return st.result(run_id)
    except (ValueError, TypeError, KeyError) as exc:  # another schema version, or a damaged row
        warnings.append(
            f"warning: run {run_id}: cannot read its stored result ({exc}); its page shows the run's summary only"
        )
        return None


def build_model(
    st: Store,
    tasks: list[str],
    *,
    results_dir: str | None = None,
    device: str | None = None,
    rule: str | None = None,
    mode: str | None = None,
) -> SiteModel:
    """The site's pages for ``tasks`` from the store ``st`` (opened on ``results_dir``)."""
    task_sections, pages, warnings = [], [], []
    for task in tasks:
        board, board_warnings = load_board(task, device=device, results_dir=results_dir, rule=rule, mode=mode)
        warnings += board_warnings
        runs = [
            r
            for r in st.runs(task=board.task)
            if (device is None or r.device_name == device) and (mode is None or r.mode == mode)
        ]
        cases = st.cases(r.id for r in runs)
        results = {r.id: _stored_result(st, r.id, warnings) for r in runs}
        sections = [_board_section(board.task, board.rule, b, runs, cases, results, board.margin) for b in board.boards]
        task_sections.append(TaskSection(board.task, slug(board.task), sections, board_warnings))
        for r in runs:
            siblings = [o for o in runs if o.display_name == r.display_name and o.device_name == r.device_name]
            pages.append(_run_page(r, results.get(r.id), board, siblings))
    return SiteModel(tasks=task_sections, runs=pages, warnings=warnings)
