"""Interleaved on/off runs, shared by the overhead scripts (defense_overhead.py, sandbox_overhead.py):
on, off, on, off, ... so that drift hits both equally, then the ratio of the median scores."""

from __future__ import annotations

import statistics

LABELS = ("on", "off")


def add_arguments(parser, default_n: int, each: str = "each way") -> None:
    """The options both scripts take."""
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("-n", type=int, default=default_n, help=f"runs {each} (default {default_n}; --quick: 1)")
    parser.add_argument("--quick", action="store_true", help="CPU smoke test: small task, torch example, 1 run each")
    parser.add_argument("--max-repeats", type=int, help="per case (default: the harness's)")


def interleaved(n: int, run) -> dict[str, list]:
    """{"on": [...], "off": [...]}: what ``run(label, i)`` returned, for i < n, on before off each time."""
    results: dict[str, list] = {label: [] for label in LABELS}
    for i in range(n):
        for label in LABELS:
            results[label].append(run(label, i))
    return results


def median_ratio(scores: dict[str, list]) -> float | None:
    """median(on) / median(off), or None where a run has no score."""
    if any(s is None for label in LABELS for s in scores[label]):
        return None
    return statistics.median(scores["on"]) / statistics.median(scores["off"])
