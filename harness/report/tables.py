"""Tables for people (aligned text, GitHub markdown) and for spreadsheets (CSV), and the rounding of times.

Text and markdown come from ``tabulate``; CSV from the standard library. Times are rounded here, when
formatting, never when stored.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from typing import Any

from tabulate import tabulate

FORMATS = ("table", "markdown", "csv")


def us(x: float | None) -> str:
    """A time in microseconds, rounded for people."""
    if x is None or not math.isfinite(x):
        return "-"
    if abs(x) >= 100:
        return f"{x:.1f}"
    if abs(x) >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def us_from_ns(ns: float | None, digits: int = 3) -> str:
    return "-" if ns is None else f"{ns / 1e3:.{digits}f}"


def format_rows(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = "table", right: Sequence[int] = ()
) -> str:
    """``rows`` as an aligned text table, a GitHub markdown table or CSV; columns in ``right`` are
    right-aligned (numbers)."""
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(headers)
        writer.writerows(["" if v is None else v for v in row] for row in rows)
        return buf.getvalue()
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    if fmt == "markdown":
        cells = [[c.replace("|", "\\|").replace("\n", " ") for c in row] for row in cells]
        headers = [h.replace("|", "\\|") for h in headers]
    align = ["right" if i in right else "left" for i in range(len(headers))]
    text = tabulate(
        cells,
        headers=list(headers),
        tablefmt="github" if fmt == "markdown" else "simple",
        colalign=align,
        disable_numparse=True,
    )
    return text + "\n"
