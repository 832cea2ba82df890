"""Options that several commands share."""
from __future__ import annotations


def add_results_dir_argument(parser) -> None:
    """``--store URL`` and its older name ``--results-dir DIR`` (one option, any store location)."""
    parser.add_argument("--store", "--results-dir", dest="results_dir", metavar="URL", default=None,
                        help="results store: an SQLite folder or .sqlite file, or a postgresql://user:pw@host/db "
                             "URL (default: $HARNESS_STORE, else $HARNESS_RESULTS_DIR, else ./harness-results)")
