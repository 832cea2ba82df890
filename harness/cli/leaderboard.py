"""``leaderboard``: rank the stored runs of a task, one section per device; or write them as a web site."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.analysis.ranking import RankRule
from harness.cli.options import READ_ONLY_EXIT_CODES, add_results_dir_argument
from harness.engine.preflight import check_output_file, check_store_exists
from harness.errors import UsageError
from harness.optional import require_extra
from harness.report.board import BOARD_FORMATS, add_margin_argument, load_board, margin_fraction, render_board

FORMATS = (*BOARD_FORMATS, "html")
EXIT_CODES = READ_ONLY_EXIT_CODES

EXAMPLES = """  python -m harness leaderboard --task mxfp4_mm
  python -m harness leaderboard --task mxfp4_mm --device "NVIDIA H200" --format markdown
  python -m harness leaderboard --task nvfp4_gemm --format json > board.json
  python -m harness leaderboard --task mxfp4_mm --format html -o site/
  python -m harness leaderboard --all-tasks --format html -o site/     # then open site/index.html

Ranking: every complete, passing run of each submission (same content hash) on each device, pooled
into one entry (not its best run), scored by the task's rule (geom: geometric mean of the per-shape means). Failed, crashed,
timed-out, rejected and interrupted submissions are listed under "not ranked" with the reason.
Identical files (same sha256) are one entry. Ties: an entry the tie rule cannot tell apart from its
group's leader shares the leader's rank, shown as "=2": entries are ranked apart only when the 95%
interval of their score ratio excludes 1 and the difference exceeds the equivalence margin (--margin,
default 1%). A score's interval comes from its run's blocks (a fresh worker and fresh inputs each; a
ranked run has 10 on a GPU), or, for a run of one block, from its samples (marked "1 process").
--format html writes a static site into the folder -o names (index.html, one page per stored run,
and Plotly's JavaScript): it opens from disk or any static host and loads nothing from the network.
With another format, -o writes the text to that file instead of stdout."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--task", help="task name, e.g. mxfp4_mm")
    which.add_argument("--all-tasks", action="store_true", help="every task that has results in the store")
    parser.add_argument("--device", default=None, help="only this device (as shown in the section titles)")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="output format (default: table); html writes a site into -o DIR",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="DIR",
        default=None,
        help="--format html: the site's folder (required); other formats: a file for the text",
    )
    parser.add_argument(
        "--rule", choices=[r.value for r in RankRule], default=None, help="override the task's ranking rule"
    )
    parser.add_argument(
        "--mode",
        choices=("leaderboard", "benchmark", "test+benchmark"),
        default=None,
        help="rank the runs made in this mode (default: leaderboard when there are such runs, else "
        "test+benchmark, else benchmark; the choice is said on stderr)",
    )
    add_margin_argument(parser)
    add_results_dir_argument(parser)


def _tasks(args: argparse.Namespace) -> list[str] | None:
    return None if args.all_tasks else [args.task]


def _write_site(args: argparse.Namespace) -> int:
    if not args.output:
        raise UsageError("--format html writes a folder: pass -o DIR (for example -o site/)")
    require_extra("site")  # Plotly and Jinja2: the 'site' extra, loaded only for the site
    from harness.report.site import build_site

    build = build_site(
        args.output, _tasks(args), results_dir=args.results_dir, device=args.device, rule=args.rule, mode=args.mode
    )
    for w in build.warnings:
        print(w, file=sys.stderr)
    print(f"wrote {build.index} ({len(build.run_pages)} run pages, {build.plots} plots)", file=sys.stderr)
    return 0


def _all_task_names(results_dir: str | None) -> list[str]:
    from harness.store.database import open_store

    with open_store(results_dir) as st:
        return st.tasks()


def run(args: argparse.Namespace) -> int:
    check_store_exists(args.results_dir)  # a read-only command never creates a store
    if args.format == "html":
        return _write_site(args)
    if args.all_tasks and args.format == "json":
        raise UsageError("--format json describes one task; pass --task T (or use --format html/table/markdown/csv)")
    if args.output:
        check_output_file(args.output, "-o/--output")
    tasks = _all_task_names(args.results_dir) if args.all_tasks else [args.task]
    if args.all_tasks and not tasks:
        raise UsageError("no results in the store yet; run 'python -m harness run-all' first")
    parts = [_task_board_text(args, task, first=i == 0) for i, task in enumerate(tasks)]
    _write_output(args, "\n".join(parts) if args.format != "csv" else "".join(parts))
    return 0


def _task_board_text(args: argparse.Namespace, task: str, first: bool) -> str:
    """One task's board in ``args.format`` (its warnings to stderr)."""
    board, warnings = load_board(
        task,
        device=args.device,
        results_dir=args.results_dir,
        rule=args.rule,
        mode=args.mode,
        margin=margin_fraction(args.margin),
    )
    if not board.boards and not args.all_tasks:  # exit 2, as the help says: no matching runs
        raise UsageError(next((w for w in warnings if w.startswith("no results")), f"no stored runs of {task!r}"))
    for w in warnings:
        print(w, file=sys.stderr)
    text = render_board(board, args.format)
    if args.format == "csv" and not first:
        text = text.split("\n", 1)[1]  # one header for every task's rows
    return text


def _write_output(args: argparse.Namespace, text: str) -> None:
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {args.output}: {exc}; choose another -o/--output") from exc
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
