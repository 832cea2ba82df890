"""The between-run spread that a run's blocks cannot show, measured per device and task.

A ranked run's blocks are consecutive: whatever drifts over minutes (the host's load, and with it the
launch time that a batched protocol counts; the GPU's thermal state) is the same for all of them, so
their spread can be smaller than what a rerun shows. Boards of byte-identical copies measure it
(``bench/ranks.py``): the spread of the copies' log scores within a board is the rerun spread, and what
it holds beyond each run's own standard error is this term, ``sd_log``. ``bench/run_spread.py`` computes
it from the boards in ``results/ranks/`` and writes ``harness/data/run_spread.json``, shipped with the
package; the interval of a run on such a device and task adds it (``harness.analysis.blocks``).

Two files, as for the device peaks (``harness.analysis.peaks``), the later one winning for the rows it
holds: the package's (the rows this project measured) and ``run_spread.json`` in the user's data folder
(on Linux ``~/.local/share/fp4-harness``), where organizers who ran boards on their own machines write
theirs (``bench/run_spread.py --out``). A device or task with no row adds nothing: its interval is its
blocks'.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from harness.analysis.compare import welch_df
from harness.analysis.peaks import gpu_key, user_data_file

FILE_NAME = "run_spread.json"


@dataclass(frozen=True)
class RunSpread:
    """The between-run sd of log scores beyond a run's own standard error, with its degrees of freedom
    (the boards' copies less one per board) and where it was measured."""

    sd_log: float
    df: float
    source: str


def widen(var_log: float, df: float, between_runs: RunSpread | None, runs: int = 1) -> tuple[float, float]:
    """(variance, degrees of freedom) of a log score whose own are ``var_log`` and ``df``, with
    ``between_runs``'s variance over its ``runs`` runs added (Welch-Satterthwaite); unchanged without it."""
    if between_runs is None or not between_runs.sd_log > 0:
        return var_log, df
    extra = between_runs.sd_log**2 / max(1, runs)
    return var_log + extra, welch_df(var_log, df, extra, between_runs.df)


def package_file() -> Path:
    return Path(str(resources.files("harness") / "data" / FILE_NAME))


def user_file() -> Path:
    return user_data_file(FILE_NAME)


def lookup(device_name: str, task: str, path: Path | None = None) -> RunSpread | None:
    """The row for ``device_name`` (matched like the device peaks: "NVIDIA H200" is H200) and ``task``,
    from ``path``, else from the user's file or the package's (the user's first); None where there is
    none. A broken file is warned about on stderr and read as empty."""
    key = gpu_key(device_name)
    if key is None:
        return None
    for candidate in [path] if path is not None else [user_file(), package_file()]:
        row = _row(candidate, key, task)
        if row is not None:
            return row
    return None


def _row(path: Path, key: str, task: str) -> RunSpread | None:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        _ignored(path, f"it is unreadable ({exc})")
        return None
    rows = doc.get("devices") if isinstance(doc, dict) else None
    row = rows.get(key, {}).get(task) if isinstance(rows, dict) and isinstance(rows.get(key, {}), dict) else None
    if row is None:
        return None
    try:
        spread = RunSpread(float(row["sd_log"]), float(row["df"]), str(row["source"]))
    except (KeyError, TypeError, ValueError) as exc:
        _ignored(path, f"its row for {key} {task} is malformed ({exc!r})")
        return None
    if not (spread.sd_log >= 0 and spread.df > 0):
        _ignored(path, f"its row for {key} {task} has sd_log {spread.sd_log} and df {spread.df}")
        return None
    return spread


def _ignored(path: Path, why: str) -> None:
    print(f"warning: {path}: {why}; no between-run spread added (rerun bench/run_spread.py)", file=sys.stderr)
