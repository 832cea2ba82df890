"""Options that several commands share."""
from __future__ import annotations


def add_results_dir_argument(parser) -> None:
    parser.add_argument("--results-dir", metavar="DIR", default=None,
                        help="results folder or .sqlite file (default: $HARNESS_RESULTS_DIR or ./harness-results)")
