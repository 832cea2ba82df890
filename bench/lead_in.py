"""Lead-in A/B: what giving the lead-in (the submission's 20 ms of warm-up calls, then the harness's 20 ms of
heat) to fewer chunks of timed calls, or a shorter one to every chunk, does to a ranked verdict's score
and wall time.

Per task, ``--rounds`` rounds of whole ranked runs of the task's Triton example, one run per setting of
``RunOptions.lead_in`` (harness.engine.benchmark.lead_in_due: ``chunk`` every chunk, the default until
2026-12-06 and the reference here; ``short`` every chunk, 5 ms of each, the default since; ``case`` each
case's first chunk; ``block`` the block's first chunk), the settings in a rotated order each round
and sharing the round's fresh secret, so a round's runs time the same inputs in the same shape orders and
differ only in the lead-in. Per setting: the scores, wall times and the phases the lead-in costs
(``warmup``, ``timing.heat``); against ``chunk``: the median score ratio and the paired log difference
with its 95% t interval over rounds, beside the ``chunk`` runs' own between-run sd. A setting whose
interval holds 0 and whose median ratio is within that sd has not moved the score in these rounds.

GPU (the lead's command):  python bench/lead_in.py --rounds 3 --budget-s 560 --out results/h200_verdicts/lead_in.json
CPU (plumbing only):       python bench/lead_in.py --quick --out /tmp/lead_in.json

Examples:
  python bench/lead_in.py --rounds 3 --budget-s 560 --out results/h200_verdicts/lead_in.json
  python bench/lead_in.py --task nvfp4_gemm --settings chunk,case --rounds 4 --out /tmp/lead_in_nvfp4.json
  python bench/lead_in.py --quick --out /tmp/lead_in.json
"""

from __future__ import annotations

import math
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import GPU_FILES, QUICK_FILES, ROOT, ResultsFile, doc_parser, machine, median, paired_log_diff, rel, say

from harness.engine.options import LEAD_INS  # after _common, which puts the root on sys.path

VERSION = 1  # 1 - first version
PHASES = ("warmup", "timing", "timing.heat", "worker_generate", "check")


def _run_row(r: Any, wall_s: float) -> dict[str, Any]:
    return {
        "verdict": r.verdict,
        "score_us": r.score_us,
        "score_ci_us": r.score_ci_us,
        "block_scores_us": [b.score_us for b in r.blocks],
        "wall_s": wall_s,
        "phases_s": {k: v for k, v in (r.phases_s or {}).items() if k in PHASES},
    }


def summarize(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per setting: the median score and wall, the lead-in's phases; against "chunk": the ratio of the
    median scores and the paired log difference; and the "chunk" runs' between-run sd."""
    scores = {s: [row["score_us"] for row in rs] for s, rs in rows.items()}
    base = scores.get("chunk", [])
    logs = [math.log(x) for x in base if x]
    out: dict[str, Any] = {"between_run_sd_chunk": statistics.stdev(logs) if len(logs) > 1 else None}
    for setting, rs in rows.items():
        entry: dict[str, Any] = {
            "median_score_us": median(scores[setting]),
            "median_wall_s": median([row["wall_s"] for row in rs]),
            "median_phases_s": {p: median([row["phases_s"].get(p) for row in rs]) for p in PHASES},
        }
        if setting != "chunk" and base:
            b, o = median(base), median(scores[setting])
            entry["median_ratio_to_chunk"] = o / b if b and o else None
            entry["paired_to_chunk"] = paired_log_diff(base, scores[setting])
        out[setting] = entry
    return out


def measure(task: str, path: Path, settings: list[str], args: Any, rf: ResultsFile, entry: dict[str, Any]) -> None:
    from harness.api import RunOptions, run_submission

    rows: dict[str, list[dict[str, Any]]] = {s: [] for s in settings}
    entry.update(task=task, file=rel(path), settings=settings, runs=rows)
    for k in range(args.rounds):
        secret = secrets.token_hex(16)
        turn = k % len(settings)
        for setting in settings[turn:] + settings[:turn]:
            if not rf.allows(f"{task} round {k + 1} {setting}", "run"):
                return
            t0 = time.monotonic()
            options = RunOptions(
                device=args.device, secret=secret, lead_in=setting, blocks=args.blocks, max_repeats=args.max_repeats
            )
            r = run_submission(str(path), task, "leaderboard", options)
            wall = time.monotonic() - t0
            say(f"{task} round {k + 1}/{args.rounds} lead-in {setting}: {r.verdict} {r.score_us} us ({wall:.1f} s)")
            rows[setting].append(_run_row(r, wall))
            entry["summary"] = summarize({s: rs for s, rs in rows.items() if rs})
            rf.done("run", wall)


def main(argv: list[str] | None = None) -> int:
    p = doc_parser(__doc__)
    p.add_argument("--task", action="append", help="task name (repeatable; default: both GPU tasks)")
    p.add_argument("--settings", default=",".join(LEAD_INS), help=f"lead-in settings (default {','.join(LEAD_INS)})")
    p.add_argument("--rounds", type=int, default=3, help="rounds of one run per setting (default 3)")
    p.add_argument("--blocks", type=int, default=None, help="blocks per run (default: the harness's)")
    p.add_argument("--max-repeats", type=int, default=None)
    p.add_argument("--device", default=None)
    p.add_argument("--quick", action="store_true", help="CPU, the fixture task, 1 round of 2 blocks: plumbing only")
    p.add_argument("--out", required=True, help="results file")
    p.add_argument("--budget-s", type=float, default=None, help="start no run that would end past this many seconds")
    args = p.parse_args(argv)
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    bad = [s for s in settings if s not in LEAD_INS]
    if bad or "chunk" not in settings:
        p.error(f"--settings {args.settings}: give 'chunk' (the baseline) and any of {', '.join(LEAD_INS)}")
    if args.quick:
        args.device, args.rounds, args.blocks, args.max_repeats = "cpu", 1, args.blocks or 2, args.max_repeats or 3
        files = dict(QUICK_FILES)
    else:
        files = {t: GPU_FILES[t] for t in (args.task or GPU_FILES)}
    facts = machine(args.device)
    tasks: list[dict[str, Any]] = []
    doc = {"script": "bench/lead_in.py", "version": VERSION, "argv": sys.argv[1:] if argv is None else argv}
    rf = ResultsFile(Path(args.out), {**doc, **facts, "tasks": tasks}, args.budget_s)
    for task, f in files.items():
        if rf.doc["stopped"] is not None:
            break
        tasks.append({})
        measure(task, ROOT / f, settings, args, rf, tasks[-1])
    rf.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
