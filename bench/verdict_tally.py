"""The verdicts of many whole-process runs in one file, grouped, so
that a device session's scattered outputs become one record. Each input is GROUP=PATH, where PATH is
a ``bench/verdict_time.py`` results file (one row per verdict, its cache state from the file), a
``harness run --json`` file (one row; GROUP says how it was run), a ``bench/wall_gap.py`` output (one
row per run, with the largest excess of wall over event time beyond the calibrated gap, in us), or a
``bench/lab/process_phases.py`` output (one row per line; the run's JSON is not kept there, so only its
exit status). Per row: the verdict and its message, the warnings that say a block was measured again,
the whole-process and the run's wall time, ``worker_stop`` and ``worker_start``; per group, the verdicts
counted and the runs in which a block was measured again.

  python bench/verdict_tally.py --out tally.json before=old1.json after=new1.json \
      empty-cache=e1.json default-cache=lb1.json phases=process_phases.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from _common import utc_now

from harness.engine.blocks import REMEASURED  # after _common, which puts the root on sys.path

EXIT_VERDICTS = {"exit status 5": "rejected"}  # process_phases.py keeps only the exit status of a failed run


def _row(group: str, source: str, doc: dict[str, Any], cache: str | None, outer_wall: float | None) -> dict[str, Any]:
    phases = doc.get("phases_s") or {}
    run_wall = doc.get("run_wall_s", doc.get("wall_s"))
    return {
        "group": group,
        "file": source,
        "cache": cache,
        "verdict": doc.get("verdict"),
        "message": (doc.get("message") or "")[:300],
        "wall_s": outer_wall,
        "run_wall_s": run_wall,
        "outside_run_s": outer_wall - run_wall if outer_wall is not None and run_wall is not None else None,
        "worker_stop_s": phases.get("worker_stop"),
        "worker_start_s": phases.get("worker_start"),
        "measured_again": [w[:300] for w in doc.get("warnings") or [] if REMEASURED in w],
    }


def _wall_gap_rows(group: str, path: Path, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A ``bench/wall_gap.py`` output (or several joined, each from its machine line): one row per run, its
    verdict the run's own (``run_result``), or in files written before it the first case's that did not pass
    (else pass), and the largest median beyond the block's calibrated gap of what the escaped-work check
    reads: a sample's tail (end event seen complete -> device idle), or in files written before the tail,
    its host wall time minus its event time."""
    parts: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for line in lines:
        if "machine" in line:
            parts.append((line["machine"], []))
        else:
            parts[-1][1].append(line)
    rows = []
    for machine, part in parts:
        ends = {line["run"]: line["run_result"] for line in part if "run_result" in line}
        for run in dict.fromkeys(line["run"] for line in part):
            cases = [c for c in part if c["run"] == run and "run_result" not in c]
            bad = [c for c in cases if c["verdict"] != "pass"]
            row = _row(group, path.name, ends.get(run) or (bad[0] if bad else {"verdict": "pass"}), None, None)
            excess = [
                (c.get("median_tail_ns", c.get("median_wall_minus_event_ns", 0.0)) - c["gap_ns"]) / 1e3
                for c in cases
                if c.get("gap_ns") is not None
            ]
            row["beyond_gap_us_max"] = max(excess, default=None)
            rows.append(dict(row, device=machine.get("device"), date=machine.get("date")))
    return rows


def rows_of(group: str, path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        if lines and "machine" in lines[0]:
            return _wall_gap_rows(group, path, lines)
        rows = []
        for doc in lines:
            error = doc.get("error")
            verdict = EXIT_VERDICTS.get(error, error) if error else "pass"
            rows.append(dict(_row(group, path.name, {"verdict": verdict}, None, None), device=None, date=None))
        return rows
    doc = json.loads(path.read_text())
    if "verdicts" in doc:  # bench/verdict_time.py
        env = doc.get("environment") or {}
        rows = [
            _row(group, path.name, v, v.get("cache"), v.get("wall_s"))
            for runs in doc["verdicts"].values()
            for v in runs
        ]
        return [dict(r, device=env.get("device"), date=env.get("date")) for r in rows]
    row = _row(group, path.name, doc, None, None)  # harness run --json: GROUP says how; the wall outside is unknown
    return [dict(row, device=(doc.get("device") or {}).get("name"), date=doc.get("started_at"))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    p.add_argument("inputs", nargs="+", metavar="GROUP=PATH")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    rows = []
    for item in args.inputs:
        group, sep, path = item.partition("=")
        if not sep or not Path(path).is_file():
            p.error(f"{item!r}: give GROUP=PATH with an existing file")
        rows += rows_of(group, Path(path))
    groups = {}
    for g in dict.fromkeys(r["group"] for r in rows):
        mine = [r for r in rows if r["group"] == g]
        groups[g] = {
            **Counter(r["verdict"] for r in mine),
            "measured_again": sum(bool(r["measured_again"]) for r in mine),
        }
    Path(args.out).write_text(
        json.dumps({"script": "bench/verdict_tally.py", "date": utc_now(), "groups": groups, "rows": rows}, indent=1)
        + "\n"
    )
    print(json.dumps(groups), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
