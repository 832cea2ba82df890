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
theirs (``bench/run_spread.py --out``). A GPU model with no row for a task borrows the task's widest row
of another model (the spread follows the host more than the model), and says so; with none to borrow, or
on a CPU, nothing is added: the interval is the blocks'.

A results store measures it too: every file run more than once is a set of reruns of identical code
(:func:`estimate`, the same test as the boards'). The leaderboard and ``compare`` take the wider of the
file's row and what the store's reruns show (``harness.analysis.ranking.between_runs``), so a machine
that drifts more than the one the row was measured on widens its own intervals.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from harness.analysis.compare import betainc, welch_df
from harness.analysis.peaks import gpu_key, user_data_file

FILE_NAME = "run_spread.json"
ALPHA = 0.05  # the spread beyond the blocks' counts only where it is significant (an F test); else 0
OUTLIER_P = 0.001  # a store's file whose reruns spread this improbably more than the others' is left out
MIN_FILES = 3  # a store's reruns count with this many files run twice or more: each is judged by the others


@dataclass(frozen=True)
class RunSpread:
    """The between-run sd of log scores beyond a run's own standard error, with its degrees of freedom
    (the reruns less one per file) and where it was measured (``from_store``: a store's own reruns, not
    boards of copies; ``borrowed_from``: the GPU model whose row it is, where the run's own model has none)."""

    sd_log: float
    df: float
    source: str
    from_store: bool = False
    borrowed_from: str | None = None


@dataclass(frozen=True)
class Rerun:
    """One run of code that ran more than once: its log score and that score's standard error from its
    own blocks."""

    log_score: float
    se_log: float
    blocks: int


@dataclass(frozen=True)
class Estimate:
    """What reruns of identical code show: their log scores' pooled sd (``rerun_sd_log``), the root mean
    of their own squared standard errors (``blocks_se_log``), the F test's p-value, and the sd beyond the
    blocks' (``sd_log``: 0 unless significant at ``ALPHA``), with ``df`` (the reruns less one per file)."""

    sd_log: float
    df: int
    rerun_sd_log: float
    blocks_se_log: float
    p_value: float
    runs: int
    files: int

    def spread(self, source: str, from_store: bool = False) -> RunSpread:
        return RunSpread(self.sd_log, float(self.df), source, from_store)


def estimate(groups: Iterable[Sequence[Rerun]], alpha: float = ALPHA) -> Estimate | None:
    """The between-run sd beyond the reruns' own standard errors, over ``groups`` (each: the runs of one
    identical code; those of fewer than two runs are skipped); None without any. The pooled within-group
    variance of the log scores, less the mean of the runs' own squared standard errors (0 when negative),
    kept where an F test finds the first larger than the second."""
    squares, df, own, own_df, files = 0.0, 0, list[float](), 0, 0
    for runs in groups:
        if len(runs) < 2:
            continue
        squares += _squares(runs)
        df += len(runs) - 1
        own += [r.se_log**2 for r in runs]
        own_df += sum(r.blocks - 1 for r in runs)
        files += 1
    if df == 0:
        return None
    pooled, mean_own = squares / df, math.fsum(own) / len(own)
    p = f_upper_p(pooled / mean_own, df, own_df) if mean_own > 0 else 0.0
    extra = math.sqrt(max(0.0, pooled - mean_own)) if p < alpha else 0.0
    return Estimate(extra, df, math.sqrt(pooled), math.sqrt(mean_own), p, len(own), files)


def outliers(groups: Sequence[Sequence[Rerun]], p_max: float = OUTLIER_P) -> list[int]:
    """The indices of the groups whose reruns spread far more, against their own blocks, than the other
    groups' do (one-sided F test of each group against the rest pooled, p below ``p_max``); none with
    fewer than ``MIN_FILES`` groups of two runs or more. A file made to run differently from run to run would
    otherwise widen every entry's interval on its board; its own interval still shows its spread."""
    usable = [i for i, g in enumerate(groups) if len(g) >= 2]
    if len(usable) < MIN_FILES:
        return []
    ratio = {i: _spread_ratio(groups[i]) for i in usable}
    df = {i: len(groups[i]) - 1 for i in usable}
    out = []
    for i in usable:
        rest_df = sum(df[j] for j in usable if j != i)
        rest = math.fsum(ratio[j] * df[j] for j in usable if j != i) / rest_df
        if rest > 0 and f_upper_p(ratio[i] / rest, df[i], rest_df) < p_max:
            out.append(i)
    return out


def _spread_ratio(runs: Sequence[Rerun]) -> float:
    """The variance of the runs' log scores over the mean of their own squared standard errors."""
    spread = _squares(runs) / (len(runs) - 1)
    own = math.fsum(r.se_log**2 for r in runs) / len(runs)
    return spread / own if own > 0 else math.inf


def _squares(runs: Sequence[Rerun]) -> float:
    """The sum of the squared deviations of the runs' log scores from their mean."""
    mean = math.fsum(r.log_score for r in runs) / len(runs)
    return math.fsum((r.log_score - mean) ** 2 for r in runs)


def f_upper_p(f: float, d1: float, d2: float) -> float:
    """P(F > f) for F with (d1, d2) degrees of freedom: do the reruns spread more than their blocks say?"""
    return betainc(d2 / 2, d1 / 2, d2 / (d2 + d1 * f)) if f > 0 else 1.0


def wider(a: RunSpread | None, b: RunSpread | None) -> RunSpread | None:
    """Of two measurements of the same spread, the larger (``a`` on a tie); None only when both are."""
    if a is None or b is None:
        return a if b is None else b
    return b if b.sd_log > a.sd_log else a


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
    from ``path``, else from the user's file or the package's (the user's first). A GPU model with no row
    of its own borrows the task's largest nonzero row of any other model (:func:`_borrowed`); None where
    there is none. A broken file is warned about on stderr and read as empty."""
    key = gpu_key(device_name)
    if key is None:
        return None
    tables = []  # each file read once, and the package's only where the user's has no row
    for candidate in [path] if path is not None else [user_file(), package_file()]:
        devices = _devices(candidate)
        row = _row(candidate, devices, key, task)
        if row is not None:
            return row
        tables.append((candidate, devices))
    return _borrowed(tables, key, task)


def _borrowed(tables: Sequence[tuple[Path, dict]], key: str, task: str) -> RunSpread | None:
    """The task's largest nonzero row of another GPU model, marked as borrowed. The spread follows the host
    and the task's protocol more than the GPU model (boards of nvfp4 copies spread 2.3% beyond their blocks
    on one H200 lease, nothing on another, 2.7-3.4% on an H100), so an unmeasured model takes the widest one
    measured: its identical files tie until boards on it measure its own. A zero row is not borrowed (an
    unmeasured model is not known to add nothing)."""
    found = [
        (spread, other)
        for candidate, devices in tables
        for other in sorted(devices)
        if other != key and (spread := _row(candidate, devices, other, task)) is not None and spread.sd_log > 0
    ]
    if not found:
        return None
    spread, other = max(found, key=lambda f: f[0].sd_log)
    return replace(spread, borrowed_from=other)


def borrowed_warning(spread: RunSpread | None, task: str) -> str | None:
    """What a run's warnings say when its interval adds a row borrowed from another GPU model."""
    if spread is None or not spread.borrowed_from:
        return None
    return (
        f"no between-run spread is measured for {task} on this GPU model: the interval adds the "
        f"{100 * spread.sd_log:.2f}% measured on the {spread.borrowed_from} (docs/measurement.md; "
        "bench/ranks.py and bench/run_spread.py measure this model's own)"
    )


def _devices(path: Path) -> dict:
    """The rows of ``path`` by GPU model (empty where it is missing; warned about where unreadable)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _ignored(path, f"it is unreadable ({exc})")
        return {}
    rows = doc.get("devices") if isinstance(doc, dict) else None
    return rows if isinstance(rows, dict) else {}


def _row(path: Path, devices: dict, key: str, task: str) -> RunSpread | None:
    """``devices``' row for ``key`` and ``task`` (read from ``path``), None where it is absent or malformed."""
    row = devices.get(key, {}).get(task) if isinstance(devices.get(key, {}), dict) else None
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
