"""The leaderboard of a task, read from the results store and rendered as text, markdown, JSON or CSV."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.analysis.final import undecided_labels
from harness.analysis.ranking import DeviceBoard, Entry, Leaderboard, RankRule, build_leaderboard, tie_rule_text
from harness.analysis.ties import DEFAULT_MARGIN
from harness.errors import UsageError
from harness.report.tables import format_rows, us
from harness.results import PASS
from harness.store.database import RunRow, Store, open_store

BOARD_FORMATS = ("table", "markdown", "json", "csv")


def resolve_task(task: str, override: str | None = None) -> tuple[str, RankRule | None, str | None]:
    """(task name, its ranking rule or the override, why the task could not be loaded or None).

    ``task`` may be a name or a task.yml path (then the name is the task's own).
    """
    try:
        from tasks import load_task

        spec = load_task(task)
    except Exception as exc:
        return task, RankRule(override) if override else None, str(exc)
    return spec.name, RankRule(override or spec.ranking_by), None


def ranking_rule(task: str, override: str | None, known_in_store: bool) -> tuple[str, RankRule, str | None]:
    """(task name, the task's rule or the override, a warning to show when the rule had to be assumed)."""
    name, rule, problem = resolve_task(task, override)
    if rule is not None:
        return name, rule, None
    if not known_in_store:
        raise UsageError(
            f"unknown task {task!r} ({problem}); pass a task that has results in the store or one under tasks/"
        )
    return (
        name,
        RankRule.GEOM,
        (
            f"warning: cannot load task {task!r} ({problem}); ranking by 'geom'; "
            "pass --rule to choose, or pass the task.yml path its runs were made with "
            "as --task"
        ),
    )


def load_board(
    task: str,
    *,
    device: str | None = None,
    results_dir: str | None = None,
    rule: str | None = None,
    mode: str | None = None,
    margin: float = DEFAULT_MARGIN,
) -> tuple[Leaderboard, list[str]]:
    """The leaderboard of a task from the store, plus warnings for stderr."""
    name = resolve_task(task)[0]
    with open_store(results_dir) as st:
        together = ranked_together(st, st.runs(task=name), mode)
        runs = together.runs
        _, rank_rule, warning = ranking_rule(task, rule, bool(runs))
        known_tasks, devices = st.tasks(), st.devices(name)
        if device is not None and device not in devices:
            raise UsageError(
                f"no results for task {name!r} on device {device!r}; choose one of: "
                + (", ".join(repr(d) for d in devices) or "(none yet)")
            )
        cases = st.cases(r.id for r in runs)
        finals = latest_finals(st, name)
    warnings = [w for w in (warning, *together.notes) if w]
    if not runs:
        warnings.append(
            f"no results for task {name!r} in the store yet (tasks with results: "
            f"{', '.join(known_tasks) or 'none'}); run 'python -m harness run-all' first"
        )
    board = build_leaderboard(name, rank_rule, runs, cases, device=device, blocks=together.blocks.scores, margin=margin)
    board.mode = together.mode
    for b in board.boards:
        b.final = finals.get(b.device)
    return board, warnings


def latest_finals(st: Store, task: str) -> dict[str, dict[str, Any]]:
    """The newest finished final scoring of ``task`` per device, as its stored JSON plus id and dates."""
    from harness.store.finals import finals

    out: dict[str, dict[str, Any]] = {}
    for f in finals(st, task):
        if f.device_name not in out and f.result is not None:
            out[f.device_name] = dict(f.result, final_id=f.id, started_at=f.started_at, finished_at=f.finished_at)
    return out


def render_final(final: dict[str, Any], fmt: str) -> str:
    """A final scoring's table (``harness.analysis.final`` JSON)."""
    headers = ["rank", "name", "final score (us)", "rounds", "vs leader (ratio, 95% CI)", "note"]
    rows = []
    for p in final.get("places", []):
        vs = p.get("vs_leader") or {}
        ci = (
            f"{vs['ratio']:.4f} ({vs['low']:.4f}-{vs['high']:.4f}) vs {vs.get('leader')}"
            if vs.get("low") is not None
            else ""
        )
        rows.append(
            [p.get("rank_label"), p.get("name"), us(p.get("score_us")), p.get("rounds"), ci, p.get("failed") or ""]
        )
    title = (
        f"final scoring {final.get('final_id', '')}: {final.get('rounds')} rounds, interleaved; ranked by paired "
        f"per-round differences (margin {100 * float(final.get('margin') or 0):.1f}%)"
    )
    undecided = undecided_labels(final)
    tail = "undecided after the round budget (shown tied): " + ", ".join(undecided) + "\n" if undecided else ""
    head = f"**{title}**\n\n" if fmt == "markdown" else f"{title}\n"
    return head + format_rows(headers, rows, fmt, [0, 2, 3]) + tail


def add_margin_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--margin",
        type=float,
        metavar="PCT",
        default=None,
        help=f"the tie rule's equivalence margin in percent (default {100 * DEFAULT_MARGIN:g}): a smaller "
        "difference is never reported",
    )


def margin_fraction(percent: float | None) -> float:
    """The --margin option (percent) as a fraction; a UsageError for a value that is not 0-50."""
    if percent is None:
        return DEFAULT_MARGIN
    if not (math.isfinite(percent) and 0 <= percent <= 50):
        raise UsageError(f"--margin is a percentage from 0 to 50 (e.g. --margin 1 for 1%); got {percent!r}")
    return percent / 100


def block_scores_of(result: dict[str, Any] | None) -> list[float]:
    """The block scores in a stored RunResult's JSON (schema 2; none in older results). None either for a
    run whose blocks shared one worker (--same-worker): they leave out what differs between processes, so
    on a board such a run's interval is one process's, like a run of a single block."""
    blocks = (result or {}).get("blocks") or []
    if any(isinstance(b, dict) and b.get("fresh_worker") is False for b in blocks):
        return []
    out = []
    for b in blocks:
        value = b.get("score_us") if isinstance(b, dict) else None
        if isinstance(value, (int, float)) and math.isfinite(value) and value > 0:
            out.append(float(value))
    return out


@dataclass(frozen=True)
class Setting:
    """How a run's chunks were warmed: scores measured with different settings are not compared (a first
    timed sample can differ by tens of percent, docs/measurement.md)."""

    warmup_chunks: int = 0  # --warmup-chunks (0 before the option existed)
    lead_in: str = "chunk"  # RunOptions.lead_in (chunk before the setting existed)

    def label(self) -> str:
        return f"--warmup-chunks {self.warmup_chunks}" + (
            "" if self.lead_in == "chunk" else f" and lead-in {self.lead_in}"
        )


@dataclass
class StoredBlocks:
    """What the ranking reads of each complete, passing run's stored result, by run id."""

    scores: dict[int, list[float]]  # its independent block scores (absent: one block, or one worker)
    settings: dict[int, Setting]  # how its chunks were warmed


def stored_blocks(st: Store, runs: Sequence[RunRow]) -> StoredBlocks:
    """Each complete, passing run's block scores and warm-up setting, from its stored result."""
    out = StoredBlocks({}, {})
    for r in runs:
        if r.complete and r.verdict == PASS:
            result = st.result_dict(r.id)
            scores = block_scores_of(result)
            if scores:
                out.scores[r.id] = scores
            out.settings[r.id] = setting_of(result)
    return out


def setting_of(result: dict[str, Any] | None) -> Setting:
    """The warm-up setting a stored RunResult's JSON was measured with (its first block's)."""
    blocks = (result or {}).get("blocks") or []
    first = blocks[0] if blocks and isinstance(blocks[0], dict) else {}
    chunks, lead_in = first.get("warmup_chunks", 0), first.get("lead_in", "chunk")
    return Setting(
        chunks if isinstance(chunks, int) and not isinstance(chunks, bool) else 0,
        lead_in if isinstance(lead_in, str) else "chunk",
    )


def choose_setting(runs: Sequence[RunRow], settings: Mapping[int, Setting]) -> tuple[list[RunRow], str | None]:
    """The runs to rank when passing runs were measured with different warm-up settings: those of the latest
    passing run's setting, and a note for stderr naming what was left out. Runs without a stored setting
    (not passing) all stay."""
    measured = [r for r in runs if r.id in settings]
    if len({settings[r.id] for r in measured}) <= 1:
        return list(runs), None
    keep = settings[max(measured, key=lambda r: (r.started_at, r.id)).id]
    left = [r for r in measured if settings[r.id] != keep]
    gone = {r.id for r in left}
    names = ", ".join(sorted({r.display_name for r in left}))
    note = (
        f"note: ranking the runs measured with {keep.label()} (the latest run's); left out "
        f"{len(left)} run(s) measured with "
        f"{'; '.join(sorted({settings[i].label() for i in gone}))} ({names}): "
        "scores measured with different warm-ups are not compared; rerun them alike"
    )
    return [r for r in runs if r.id not in gone], note


@dataclass
class RankedTogether:
    """The runs a board ranks together, and what decided it."""

    mode: str | None  # the one mode (choose_mode)
    runs: list[RunRow]  # of that mode and one warm-up setting (choose_setting)
    blocks: StoredBlocks  # what the stored results of that mode's runs say
    notes: list[str]  # for stderr: the mode chosen, the runs left out


def ranked_together(st: Store, runs: Sequence[RunRow], mode: str | None = None) -> RankedTogether:
    """Of ``runs``, those a board ranks together: one mode (``mode``, else choose_mode's), one warm-up
    setting. The board and ``compare`` both take their runs from here."""
    mode, note = choose_mode(runs, mode)
    in_mode = [r for r in runs if mode is None or r.mode == mode]
    blocks = stored_blocks(st, in_mode)
    kept, warmup_note = choose_setting(in_mode, blocks.settings)
    return RankedTogether(mode, kept, blocks, [n for n in (note, warmup_note) if n])


# the default mode of a leaderboard: ranked runs first, then the unranked modes that time
MODE_PREFERENCE = ("leaderboard", "test+benchmark", "benchmark")


def choose_mode(runs: Sequence[RunRow], wanted: str | None) -> tuple[str | None, str | None]:
    """(the one mode to rank, a note for stderr when it is not the leaderboard mode by default).
    Runs of different modes are not ranked together: their inputs and timing budgets differ."""
    if wanted is not None:
        return wanted, None
    present = {r.mode for r in runs}
    for m in MODE_PREFERENCE:
        if m in present:
            if m == "leaderboard":
                return m, None
            others = sorted(present & set(MODE_PREFERENCE) - {m})
            return m, (
                f"note: no leaderboard-mode runs yet; ranking the {m!r}-mode runs"
                + (f" (also stored: {', '.join(others)})" if others else "")
                + "; choose one with --mode"
            )
    return None, None


def render_board(board: Leaderboard, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(board.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n"
    if fmt == "csv":
        return _board_csv(board)
    parts = [] if board.boards else [f"No results for {board.task} yet.\n"]
    for b in board.boards:
        parts += _section(board, b, fmt)
    return "\n".join(parts)


def _section(board: Leaderboard, b: DeviceBoard, fmt: str) -> list[str]:
    title = (
        f"{board.task} on {b.device}"
        + (f" ({b.device_kind})" if b.device_kind else "")
        + (f", mode {board.mode}" if board.mode else "")
    )
    rule = f"Ranked by the {board.rule.description} (lower is better); {tie_rule_text(board.margin)}."
    parts = [f"### {title}\n\n{rule}\n" if fmt == "markdown" else f"{title}\n{rule}\n"]
    parts.append(_ranked_table(b, fmt) if b.ranked else "No complete passing run with timings yet.\n")
    notes = interval_notes(b.ranked, b)
    if notes:
        parts.append("".join(f"note: {n}\n" for n in notes))
    if b.final:
        parts.append(render_final(b.final, fmt))
    if b.unranked:
        heading = "**Not ranked**\n\n" if fmt == "markdown" else "not ranked:\n"
        rows = [[u.name, u.verdict, u.reason, u.date] for u in b.unranked]
        parts.append(heading + format_rows(["name", "verdict", "reason", "date"], rows, fmt))
    return parts


def interval_text(e: Entry) -> str:
    """The score's 95% interval as people read it, with where it came from."""
    if e.low_us is None or e.high_us is None:
        return "unknown"
    source = f"{e.blocks} blocks" if e.interval_source == "blocks" else "1 process"
    if len(e.run_ids) > 1:
        source += f" of {len(e.run_ids)} runs"
    return f"{us(e.low_us)}-{us(e.high_us)} ({source})"


def interval_notes(entries: Sequence[Entry], section: DeviceBoard | None = None) -> list[str]:
    """What the board's intervals cannot say (``section``: the device's, whose between-run spread they add)."""
    notes = []
    if section is not None and any(e.interval_source == "blocks" for e in entries):
        note = _between_runs_note(section)
        if note:
            notes.append(note)
    if any(e.interval_source == "samples" for e in entries):
        notes.append(
            "an interval marked '1 process' comes from one process's samples (a run of a single block, or "
            "of blocks sharing one worker): a rerun can differ by more; rerun it ranked (10 blocks on a GPU "
            "by default, each a fresh worker) for one that holds"
        )
    if any(e.interval_source == "none" for e in entries):
        notes.append(
            "an entry with no 95% interval (a shape with a single sample) cannot be told apart from any other: "
            "it ties with the entries around it"
        )
    return notes


def _between_runs_note(section: DeviceBoard) -> str | None:
    """Which between-run spread a section's block intervals add, and where it was measured."""
    gpu = section.device_kind in ("cuda", "rocm")
    if section.run_sd is None:
        return (
            "no between-run spread is measured for this task on this GPU model: the intervals come from "
            "each run's consecutive blocks, which can miss what drifts over minutes (on the H200, nvfp4_gemm's "
            "reruns spread 1.8% more than their blocks); rerun files, or measure it with boards of identical "
            "copies (docs/measurement.md, bench/ranks.py and bench/run_spread.py)"
            if gpu
            else None
        )
    if section.run_sd_from_store:
        if section.run_sd:
            return (
                f"the intervals add the {100 * section.run_sd:.2f}% between-run spread that this store's reruns "
                f"show beyond their blocks ({section.run_sd_source}; docs/measurement.md)"
            )
        return (
            f"this store's reruns spread no more than their blocks ({section.run_sd_source}): the intervals "
            "add nothing between runs (docs/measurement.md)"
            if gpu
            else None
        )
    if section.run_sd and section.run_sd_borrowed_from and gpu:
        return (
            f"no between-run spread is measured for this task on this GPU model: the intervals add the "
            f"{100 * section.run_sd:.2f}% that boards of identical copies measured on the "
            f"{section.run_sd_borrowed_from}, the widest of any model (docs/measurement.md); measure this "
            "model's own with bench/ranks.py and bench/run_spread.py"
        )
    if section.run_sd and gpu:
        return (
            f"the intervals add the {100 * section.run_sd:.2f}% between-run spread that boards of identical "
            "copies measured for this task on this GPU model (docs/measurement.md)"
        )
    return None


def _ranked_table(b: DeviceBoard, fmt: str) -> str:
    headers = ["rank", "name", "score (us)", "95% interval (us)", "gap to leader", *b.shapes, "verdict", "date"]
    rows = []
    for e in b.ranked:
        times = {s.label: s.mean_us for s in e.shapes}
        gap = "leader" if e.gap_us == 0 else f"{e.gap_x:.2f}x slower (+{us(e.gap_us)} us)"
        name = e.name + (f" (also: {', '.join(e.aliases)})" if e.aliases else "")
        rows.append(
            [e.rank_label, name, us(e.score_us), interval_text(e), gap]
            + [us(times.get(label)) for label in b.shapes]
            + [e.verdict, e.date]
        )
    right = [0, 2, 3, *list(range(5, 5 + len(b.shapes)))]
    return format_rows(headers, rows, fmt, right)


def _board_csv(board: Leaderboard) -> str:
    shapes: list[str] = []
    for b in board.boards:
        shapes += [s for s in b.shapes if s not in shapes]
    headers = [
        "task",
        "rule",
        "device",
        "section",
        "rank",
        "tied",
        "name",
        "sha256",
        "score_us",
        "stderr_us",
        "low_us",
        "high_us",
        "interval_source",
        "gap_x",
        "gap_us",
        "verdict",
        "reason",
        "date",
        "run_id",
    ] + [f"mean_us[{s}]" for s in shapes]
    rows = []
    for b in board.boards:
        for e in b.ranked:
            times = {s.label: s.mean_us for s in e.shapes}
            rows.append(
                [
                    board.task,
                    board.rule.value,
                    b.device,
                    "ranked",
                    e.rank,
                    e.tied,
                    e.name,
                    e.sha256,
                    repr(e.score_us),
                    repr(e.stderr_us),
                    "" if e.low_us is None else repr(e.low_us),
                    "" if e.high_us is None else repr(e.high_us),
                    e.interval_source,
                    repr(e.gap_x),
                    repr(e.gap_us),
                    e.verdict,
                    "",
                    e.date,
                    e.run_id,
                ]
                + [repr(times[s]) if s in times else "" for s in shapes]
            )
        for u in b.unranked:
            rows.append(
                [
                    board.task,
                    board.rule.value,
                    b.device,
                    "unranked",
                    "",
                    "",
                    u.name,
                    u.sha256,
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    u.verdict,
                    u.reason,
                    u.date,
                    u.run_id,
                ]
                + [""] * len(shapes)
            )
    return format_rows(headers, rows, "csv")
