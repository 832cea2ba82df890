"""Options that several commands share."""

from __future__ import annotations

import argparse


def add_results_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--store URL`` and its older name ``--results-dir DIR`` (one option, any store location)."""
    parser.add_argument(
        "--store",
        "--results-dir",
        dest="results_dir",
        metavar="URL",
        default=None,
        help="results store: an SQLite folder or .sqlite file, or a postgresql://user:pw@host/db "
        "URL (default: $HARNESS_STORE, else $HARNESS_RESULTS_DIR, else ./harness-results)",
    )


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """How a run measures (``run`` and ``run-all``): samples and seconds per case, blocks, warm-up
    chunks and the lead-in."""
    parser.add_argument("--max-repeats", type=int, help="most samples per benchmark case (default 100 GPU, 10 CPU)")
    parser.add_argument("--max-time", type=float, metavar="S", help="measured seconds per case before stopping")
    parser.add_argument(
        "--blocks",
        type=int,
        metavar="B",
        help="timed blocks, each a fresh worker with fresh inputs and its own shape order; the score's interval "
        "comes from their spread (default: leaderboard 10 on a GPU, 3 on the CPU; other modes 1)",
    )
    add_warmup_chunks_argument(parser)
    add_lead_in_argument(parser)
    add_start_ahead_argument(parser)


def add_start_ahead_argument(parser: argparse.ArgumentParser) -> None:
    from harness.engine.options import START_AHEAD

    parser.add_argument(
        "--start-ahead",
        choices=START_AHEAD,
        default="auto",
        help="blocks: start each block's fresh worker (its sandbox, CUDA context and the harness's own kernels) "
        "while the last block is measured; it launches nothing on the GPU until the last block's worker is "
        "reaped (auto, the default: on a GPU; on: also on the CPU; off: each worker starts once the last "
        "block is done)",
    )


def add_lead_in_argument(parser: argparse.ArgumentParser) -> None:
    from harness.engine.options import LEAD_INS, RunOptions, lead_in_ms

    parser.add_argument(
        "--lead-in",
        choices=LEAD_INS,
        default=RunOptions.lead_in,
        help="GPU: the lead-in before chunks of timed calls (the submission's warm-up calls, then the harness's "
        f"heat): short, {lead_in_ms('short')} ms of each before every chunk (the default); chunk, "
        f"{lead_in_ms('chunk')} ms of each (the default before 2026-12-06: a board ranks runs of one setting "
        "only); case, each case's first chunk; block, the block's first chunk",
    )


def positive(text: str) -> int:
    """An argparse type: a whole number of 1 or more (argparse reports anything else as invalid)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


# the exit codes of the commands that only read (see harness.cli.main.exit_codes_help)
READ_ONLY_EXIT_CODES = {
    0: "done: the output was written",
    2: "usage error: bad arguments, unknown task, no results store, no matching runs",
    70: "internal error in the harness (please report it)",
    141: "the output pipe closed early (e.g. '| head'): the rest was dropped, quietly",
}


def add_warmup_chunks_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--warmup-chunks",
        type=int,
        default=0,
        metavar="N",
        help="ranked: N untimed chunks of fresh inputs before each case's timed ones, in every block, so "
        "that what makes a fresh worker's first timed chunks of a shape slower is not timed (default 0)",
    )
