"""``final``: the final scoring of a board's top entries on this GPU, interleaved in rounds, stored, resumable."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli.options import add_lead_in_argument, add_results_dir_argument, add_warmup_chunks_argument, positive
from harness.errors import UsageError
from harness.report.board import add_margin_argument, margin_fraction

if TYPE_CHECKING:
    from harness.analysis.final import BoardPlace

EXIT_CODES = {
    0: "the final scoring finished and was stored (whatever the verdicts of its blocks)",
    2: "usage error: bad arguments, unknown task, fewer than two ranked entries, a file gone or changed",
    70: "internal error in the harness (please report it)",
    141: "the output pipe closed early: the rest of the output was dropped, quietly",
}
EXAMPLES = """  python -m harness final --task mxfp4_mm --top 3
  python -m harness final --task mxfp4_mm --top 5 --max-rounds 20 --secret-file secret.txt
  python -m harness leaderboard --task mxfp4_mm          # shows the latest final under the board

The top N entries of the task's leaderboard-mode board for this GPU (its device name, or --board-device)
run again in rounds: each round runs one block of each entry (a fresh worker; the round's secret inputs,
the same for every entry) in a fresh random order. An entry's final score is the geometric mean of its
block scores; entries are ranked apart only when the 95% interval of their paired per-round ratio
excludes 1 and the difference exceeds the margin (--margin, 1%). After --min-rounds rounds, rounds are
added while a pair of neighbours is undecided, up to --max-rounds; before the first round the command
says about how many rounds each pair's gap and spread on the board would need. A block that does not
pass takes its entry out of the final. Every block is stored when measured; rerunning the same command
after an interruption continues the final (its measured blocks are kept)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, help="task name or task.yml path")
    parser.add_argument("--top", type=positive, required=True, metavar="N", help="how many of the board's best")
    parser.add_argument("--device", default=None, help="where to run: auto (default), cpu, or cuda[:N]")
    parser.add_argument(
        "--board-device", default=None, metavar="NAME", help="the board section to take the entries from "
        "(default: the name of the device the final runs on)"
    )  # fmt: skip
    parser.add_argument("--min-rounds", type=positive, default=3, metavar="R", help="rounds at least (default 3)")
    parser.add_argument(
        "--max-rounds", type=positive, default=10, metavar="R", help="rounds at most, while a pair is undecided (10)"
    )
    parser.add_argument("--max-repeats", type=int, default=None, help="most samples per case in one block")
    parser.add_argument("--max-time", type=float, default=None, metavar="S", help="measured seconds per case a block")
    add_warmup_chunks_argument(parser)
    add_lead_in_argument(parser)
    parser.add_argument(
        "--secret-file", metavar="FILE", help="the secret seed (else $HARNESS_SECRET_SEED, else random)"
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    add_margin_argument(parser)
    add_results_dir_argument(parser)


def _entries(
    task: str, board_device: str, top: int, results_dir: str | None
) -> tuple[list[tuple[str, str, str]], list[BoardPlace]]:
    """(sha256, name, path) of the board's top ``top`` entries, each file still holding that content, and
    their places on the board (for the final's outlook)."""
    from harness.analysis.final import BoardPlace
    from harness.report.board import load_board

    board, _warnings = load_board(task, device=board_device, results_dir=results_dir, mode="leaderboard")
    ranked = board.boards[0].ranked if board.boards else []
    if len(ranked) < 2:
        raise UsageError(
            f"the leaderboard-mode board of {task!r} on {board_device!r} has {len(ranked)} ranked entr"
            f"{'y' if len(ranked) == 1 else 'ies'}; a final scoring needs two or more: run "
            "'python -m harness run-all DIR --task " + task + "' first, or pick another --board-device"
        )
    out = []
    for e in ranked[:top]:
        path = Path(e.path)
        sha = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        if sha != e.sha256:
            why = "is gone" if sha is None else "has changed since it was ranked"
            raise UsageError(
                f"entry {e.name!r}: its file {e.path} {why}; restore it (sha256 {e.sha256[:12]}...), or run "
                "run-all on the current files first so that the board ranks them"
            )
        out.append((e.sha256, e.name, str(path)))
    return out, [BoardPlace(e.name, e.score_us, e.stderr_us, e.interval_source, e.blocks) for e in ranked[:top]]


def run(args: argparse.Namespace) -> int:
    if args.max_rounds < args.min_rounds:
        raise UsageError(f"--max-rounds ({args.max_rounds}) must be at least --min-rounds ({args.min_rounds})")
    margin = margin_fraction(args.margin)
    from harness.engine.pool import warm_shared_pool

    warm_shared_pool(args.device)  # the warm-worker server imports torch while this process does
    from harness.analysis.final import outlook
    from harness.engine.device import device_info, select_device
    from harness.engine.final import FinalPlan, block_runner, run_final
    from harness.engine.options import RunOptions
    from harness.engine.preflight import check_store_writable
    from harness.engine.seeds import take_secret
    from harness.store.database import open_store
    from tasks import load_task

    try:
        task = load_task(args.task)
    except Exception as exc:
        raise UsageError(f"unknown task {args.task!r} ({exc}); see 'python -m harness tasks'") from exc
    options = RunOptions(
        device=args.device,
        max_repeats=args.max_repeats,
        max_time_s=args.max_time,
        warmup_chunks=args.warmup_chunks,
        lead_in=args.lead_in,
    ).validate()
    check_store_writable(args.results_dir)
    device = select_device(args.device)
    board_device = args.board_device or device_info(device).name
    entries, places = _entries(task.name, board_device, args.top, args.results_dir)
    secret, source = take_secret(args.secret_file)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    say(f"final scoring of {len(entries)} entries of {task.name} on {board_device} (secret: {source})")
    say(
        f"what the board says (this final runs {args.min_rounds} rounds at least, --max-rounds {args.max_rounds} at most):"
    )
    for line in outlook(places, margin):
        say(f"  {line}")

    run_block = block_runner(task, options, device.type == "cuda")
    plan = FinalPlan(task.name, board_device, entries, args.min_rounds, args.max_rounds, margin)
    with open_store(args.results_dir) as st:
        final, ranking, _resumed = run_final(st, plan, secret, run_block, say)
    if args.format == "json":
        sys.stdout.write(json.dumps(dict(ranking.to_dict(), final_id=final.id), indent=2, sort_keys=True) + "\n")
    else:
        from harness.report.board import render_final

        sys.stdout.write(render_final(dict(ranking.to_dict(), final_id=final.id), "table"))
    return 0
