#!/usr/bin/env python
"""The between-run spread that a run's blocks do not show, per device and task, from boards of identical
copies (bench/ranks.py's files): writes harness/data/run_spread.json, which the harness adds to the
interval of every ranked run on such a device and task (harness.analysis.run_spread).

In a board every copy is the same code, so the spread of their log scores is what a rerun shows. Each
copy's own interval came from its blocks (standard error ``half_width / t(blocks - 1)``). Over all boards
of a device and task, the pooled within-board variance of the log scores less the mean of the copies'
own squared standard errors is the between-run variance the blocks missed (0 when negative); its degrees
of freedom are the copies less one per board. It is kept only where an F test finds the reruns' spread
larger than the blocks' at 95% (else 0: a board of copies that all tie shows nothing to add).

Each boards file is one campaign, on the hosts of one or a few device leases, and the spread depends on
the host (on the H200, nvfp4's copies spread 2.3% between runs on one lease and 0.14% on another). So a
row takes the largest significant spread of any one file, not the pool of all of them: the value must
hold on the noisier hosts a device model comes with, and pooling would let quiet campaigns dilute a noisy
one. The pooled figure and each file's are kept beside it. The script also says, per board, whether its
copies tie under the tie rule once that spread is added (the boards themselves may have been ranked
without it).

The estimate assumes normal spreads; a host's spread can have a heavier tail (an H100 board's copies
differed by 15% where the estimate was 2.95%). So where a device and task have at least
``MIN_BOARDS_FOR_FLOOR`` boards and fewer than ``TIE_TARGET`` of them tie with the estimate, the row is
raised to the smallest spread at which that share ties (``sd_log_estimate`` keeps the estimate): the
issue's target for identical files, met on the boards the row came from, never narrower than the test.

Examples:
  python bench/run_spread.py                     # every results/ranks/ranks-*-boards*.json, into the package
  python bench/run_spread.py --boards FILE ... --out ~/.local/share/fp4-harness/run_spread.json
      # an organizer's own boards (bench/ranks.py on their machines): the user's file wins over the package's
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from _common import ROOT, doc_parser, rel, say, utc_now  # _common puts the repository root on sys.path

from harness.analysis.compare import t_quantile
from harness.analysis.peaks import gpu_key
from harness.analysis.run_spread import ALPHA, Rerun, RunSpread, estimate, package_file, widen
from harness.analysis.ties import Spread, rank_groups

VERSION = 3  # 1 - first version; 2 - the largest of the files' spreads, with the pooled one and each file's;
# 3 - raised where fewer than TIE_TARGET of the boards tie with it (sd_log_estimate, tie_floor)
TIE_TARGET = 0.9  # identical files tie in at least 9 boards of 10 (issue #50)
MIN_BOARDS_FOR_FLOOR = 10  # fewer boards say too little about a share


def _copies(board: dict) -> list[tuple[str, float, float, int]]:
    """(name, score, the standard error of its log score from its blocks alone, blocks) of each copy a
    board ranked. The board's lists are in rank order (by score, then name); a board that recorded
    ``se_log`` and the ``between_run_sd`` it added gives the blocks' part directly, an older one (rule 1:
    blocks alone) its half-width over t(blocks - 1)."""
    ranked = sorted(board["scores_us"].items(), key=lambda kv: (kv[1], kv[0]))
    out = []
    for i, (name, score) in enumerate(ranked):
        blocks = board["blocks"][i]
        if "se_log" in board:
            se_total, added = board["se_log"][i], board.get("between_run_sd", 0.0)
            se = math.sqrt(max(0.0, se_total**2 - added**2)) if se_total is not None else None
        else:
            half = board["half_width_rel"][i]
            se = half / t_quantile(0.95, blocks - 1) if half is not None and blocks >= 2 else None
        if score and score > 0 and blocks >= 2 and se is not None:
            out.append((name, float(score), se, int(blocks)))
    return out


def spread_of(boards: list[dict]) -> dict[str, Any] | None:
    """The between-run sd beyond the copies' own standard errors, over ``boards`` (each board's copies are
    reruns of one code: ``harness.analysis.run_spread.estimate``); None without two copies."""
    groups = [[Rerun(math.log(score), se, blocks) for _, score, se, blocks in _copies(board)] for board in boards]
    found = estimate(groups, ALPHA)
    if found is None:
        return None
    row = asdict(found)
    del row["files"]  # the boards, counted by the caller
    return row


def tied_with(board: dict, spread: RunSpread, margin: float) -> bool:
    """Whether every copy of ``board`` ties under the tie rule once ``spread`` is added to each copy's own
    standard error (``harness.analysis.ties.spread_from_blocks`` does the same from the block scores)."""
    spreads = []
    for _, score, se, blocks in sorted(_copies(board), key=lambda c: c[1]):
        var, df = widen(se**2, float(blocks - 1), spread)
        spreads.append(Spread(score, math.sqrt(var), df, "blocks", blocks))
    return all(tied for _, tied in rank_groups(spreads, margin)) if len(spreads) > 1 else True


def device_row(by_file: dict[str, list[dict]], margin: float) -> dict[str, Any] | None:
    """One device and task's row from its boards, by file: the estimate of the file with the largest
    spread beyond the blocks (the first on a tie; the pool of all boards where no file shows any), with
    the pooled estimate and each file's beside it, and how many of all the boards tie once that spread is
    added; None without two copies."""
    boards = [b for bs in by_file.values() for b in bs]
    found = {f: row for f, bs in by_file.items() if (row := spread_of(bs)) is not None}
    pooled = spread_of(boards)
    if not found or pooled is None:
        return None
    source = max(found, key=lambda f: found[f]["sd_log"])
    if found[source]["sd_log"] == 0:  # no file shows a spread: the row is the pool's, from every file
        source = ", ".join(found)
    row = dict(found.get(source, pooled))
    estimate = RunSpread(row["sd_log"], row["df"], source)
    spread, floor = tie_floor(boards, estimate, margin)
    row.update(
        sd_log=spread.sd_log,
        sd_log_estimate=estimate.sd_log,
        tie_floor=floor,
        source=source,
        boards=len(boards),
        boards_all_tied_recorded=sum(bool(b.get("all_tied")) for b in boards),
        boards_all_tied_with_it=sum(tied_with(b, spread, margin) for b in boards),
        pooled=pooled,
        files={f: {"boards": len(by_file[f]), **r} for f, r in found.items()},
    )
    return row


def tie_floor(boards: list[dict], estimate: RunSpread, margin: float) -> tuple[RunSpread, dict[str, Any]]:
    """(the spread to use, how it was chosen): ``estimate``, or with at least ``MIN_BOARDS_FOR_FLOOR``
    boards of which fewer than ``TIE_TARGET`` tie with it, the smallest larger sd (to 0.01%, by bisection)
    at which that share does."""
    needed = math.ceil(TIE_TARGET * len(boards))
    floor: dict[str, Any] = {"target": TIE_TARGET, "boards_needed": needed, "raised": False}

    def ties(sd: float) -> int:
        return sum(tied_with(b, replace(estimate, sd_log=sd), margin) for b in boards)

    if len(boards) < MIN_BOARDS_FOR_FLOOR or ties(estimate.sd_log) >= needed:
        return estimate, floor
    low, high = estimate.sd_log, max(2 * estimate.sd_log, 0.01)
    while ties(high) < needed:
        low, high = high, 2 * high
    while high - low > 1e-4:
        mid = (low + high) / 2
        low, high = (low, mid) if ties(mid) >= needed else (mid, high)
    floor["raised"] = True
    return replace(estimate, sd_log=high), floor


def main(argv: list[str] | None = None) -> int:
    p = doc_parser(__doc__)
    p.add_argument("--boards", nargs="*", help="boards files (default: results/ranks/ranks-*-boards*.json)")
    p.add_argument("--out", default=str(package_file()), help="default: harness/data/run_spread.json")
    p.add_argument("--margin", type=float, default=1.0, help="the tie rule's margin in percent (default 1)")
    args = p.parse_args(argv)
    files = (
        [Path(f) for f in args.boards]
        if args.boards
        else sorted((ROOT / "results" / "ranks").glob("ranks-*-boards*.json"))
    )
    groups: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for path in files:
        doc = json.loads(path.read_text())
        key = gpu_key(str(doc.get("device", "")))
        if key is None:
            say(f"{path}: no known GPU ({doc.get('device')!r}); skipped")
            continue
        for task in doc.get("tasks", []):
            by_file = groups.setdefault((key, task["task"]), {})
            by_file.setdefault(rel(path), []).extend(b for b in task.get("boards", []) if b.get("scores_us"))
    out: dict[str, Any] = {"version": VERSION, "script": "bench/run_spread.py", "date": utc_now(), "devices": {}}
    for (key, task), by_file in sorted(groups.items()):
        row = device_row(by_file, args.margin / 100)
        if row is None:
            continue
        out["devices"].setdefault(key, {})[task] = row
        raised = row["tie_floor"]["raised"]
        say(
            f"{key} {task}: {row['boards']} boards in {len(by_file)} files; the largest spread beyond the blocks "
            f"is {100 * row['sd_log_estimate']:.2f}% ({row['source']}: reruns {100 * row['rerun_sd_log']:.2f}% "
            f"against the blocks' {100 * row['blocks_se_log']:.2f}%, df {row['df']}), pooled "
            f"{100 * row['pooled']['sd_log']:.2f}%"
            + (f"; raised to {100 * row['sd_log']:.2f}% for the boards to tie" if raised else "")
            + f"; all copies tied in {row['boards_all_tied_recorded']} boards as ranked, in "
            f"{row['boards_all_tied_with_it']} with the row"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    say(f"wrote {rel(Path(args.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
