"""``leaderboard``: rank the stored runs of a task, one section per device."""
from __future__ import annotations

import sys

from harness.analysis.ranking import RankRule
from harness.cli.options import READ_ONLY_EXIT_CODES, add_results_dir_argument
from harness.engine.preflight import check_store_exists
from harness.report.board import BOARD_FORMATS, load_board, render_board

EXIT_CODES = READ_ONLY_EXIT_CODES
EXAMPLES = """  python -m harness leaderboard --task mxfp4_mm
  python -m harness leaderboard --task mxfp4_mm --device "NVIDIA H200" --format markdown
  python -m harness leaderboard --task nvfp4_gemm --format json > board.json

Ranking: the best complete, passing run of each submission (same content hash and name) on each
device, scored by the task's rule (geom: geometric mean of the per-shape means). Failed, crashed,
timed-out, rejected and interrupted submissions are listed under "not ranked" with the reason.
Ties: an entry whose 95% interval (score +- 1.96 standard errors, propagated from the per-shape
standard errors) overlaps its group leader's shares the leader's rank, shown as "=2"."""


def add_arguments(parser) -> None:
    parser.add_argument("--task", required=True, help="task name, e.g. mxfp4_mm")
    parser.add_argument("--device", default=None, help="only this device (as shown in the section titles)")
    parser.add_argument("--format", choices=BOARD_FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("--rule", choices=[r.value for r in RankRule], default=None,
                        help="override the task's ranking rule")
    parser.add_argument("--mode", choices=("leaderboard", "benchmark", "test+benchmark"), default=None,
                        help="rank the runs made in this mode (default: leaderboard when there are such runs, else "
                             "test+benchmark, else benchmark; the choice is said on stderr)")
    add_results_dir_argument(parser)


def run(args) -> int:
    check_store_exists(args.results_dir)
    board, warnings = load_board(args.task, device=args.device, results_dir=args.results_dir,
                                 rule=args.rule, mode=args.mode)
    for w in warnings:
        print(w, file=sys.stderr)
    sys.stdout.write(render_board(board, args.format))
    return 0
