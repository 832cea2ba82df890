"""Ranking: turn stored runs into a leaderboard, one section per device.

Rules (``RankRule``, as in GPU MODE's kernelbot): ``geom`` is the geometric mean of the per-shape
benchmark means, ``mean`` their arithmetic mean, ``last`` the mean of the last benchmark shape.
Lower is better.

Which run counts: per device and per submission (same content hash and display name), the best
complete, passing run that has benchmark timings. A submission with no such run is not ranked; it is
listed with the verdict and reason of its latest run (failed, error, timeout, rejected, incomplete, or
"no timings" when it only ran tests). Runs on different devices are never ranked together.

Ties: each score carries a standard error propagated from the per-shape standard errors
(``geom``: var(log G) = sum((se_i / m_i)^2) / n^2, so se(G) = G * sqrt(that); ``mean``:
se = sqrt(sum se_i^2) / n; ``last``: se of the last shape). Its 95% interval is score +- 1.96 se.
Entries are sorted by score; the best entry not yet placed starts a group, and every later entry whose
interval overlaps the group leader's interval joins it and shares the leader's rank, shown as "=2".
Ties are not chained: every tied entry is within error of its group's best. A score without a standard
error (a single sample) ties only with an equal score.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from harness.results import PASS, shape_label
from harness.store.database import INCOMPLETE, CaseRow, RunRow

Z_95 = 1.959963984540054
LEADERBOARD_JSON_VERSION = 1  # 1 - first version: task, rule, devices[{device, ranked, unranked, shapes}]
UNKNOWN_DEVICE = "(unknown device)"
BENCHMARK_KINDS = ("benchmark", "leaderboard")


class RankRule(str, Enum):
    GEOM = "geom"
    MEAN = "mean"
    LAST = "last"

    @property
    def description(self) -> str:
        return {
            "geom": "geometric mean of the per-shape benchmark means",
            "mean": "arithmetic mean of the per-shape benchmark means",
            "last": "mean time of the last benchmark shape",
        }[self.value]


@dataclass
class Score:
    value_us: float
    stderr_us: float  # nan when it cannot be computed (a shape with a single sample)

    def interval(self, z: float = Z_95) -> tuple[float, float]:
        return self.value_us - z * self.stderr_us, self.value_us + z * self.stderr_us


@dataclass
class ShapeTime:
    label: str
    mean_us: float
    stderr_us: float


@dataclass
class Entry:
    """One ranked submission on one device."""

    rank: int
    tied: bool
    name: str
    sha256: str
    path: str
    score_us: float
    stderr_us: float
    gap_x: float  # score / leader's score
    gap_us: float  # score - leader's score
    shapes: list[ShapeTime]
    verdict: str
    mode: str
    date: str
    run_id: int

    @property
    def rank_label(self) -> str:
        return f"={self.rank}" if self.tied else str(self.rank)


@dataclass
class Unranked:
    name: str
    sha256: str
    path: str
    verdict: str
    reason: str
    date: str
    run_id: int


@dataclass
class DeviceBoard:
    device: str
    device_kind: str | None
    shapes: list[str]
    ranked: list[Entry] = field(default_factory=list)
    unranked: list[Unranked] = field(default_factory=list)


@dataclass
class Leaderboard:
    task: str
    rule: RankRule
    boards: list[DeviceBoard]
    mode: str | None = None  # the one mode whose runs are ranked (None: every mode, as asked)

    def to_dict(self) -> dict[str, Any]:
        def clean(x):
            if isinstance(x, float):
                return x if math.isfinite(x) else None
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, list):
                return [clean(v) for v in x]
            return x

        devices = []
        for b in self.boards:
            d = asdict(b)
            for e, ed in zip(b.ranked, d["ranked"]):
                ed["rank_label"] = e.rank_label
            devices.append(d)
        return clean(
            {
                "version": LEADERBOARD_JSON_VERSION,
                "task": self.task,
                "rule": self.rule.value,
                "mode": self.mode,
                "tie_rule": "95% intervals overlap the group leader's",
                "devices": devices,
            }
        )


def score(shapes: list[ShapeTime], rule: RankRule) -> Score:
    """The score of a run under a rule, with its standard error propagated from the shapes'."""
    if not shapes:
        raise ValueError("a score needs at least one benchmark shape")
    n = len(shapes)
    if rule is RankRule.LAST:
        return Score(shapes[-1].mean_us, shapes[-1].stderr_us)
    if rule is RankRule.MEAN:
        return Score(math.fsum(s.mean_us for s in shapes) / n, math.sqrt(math.fsum(s.stderr_us**2 for s in shapes)) / n)
    if any(s.mean_us <= 0 for s in shapes):
        raise ValueError("a geometric mean needs positive times")
    log_g = math.fsum(math.log(s.mean_us) for s in shapes) / n
    var_log = math.fsum((s.stderr_us / s.mean_us) ** 2 for s in shapes) / n**2
    g = math.exp(log_g)
    return Score(g, g * math.sqrt(var_log))


def overlaps(a: Score, b: Score, z: float = Z_95) -> bool:
    if a.value_us == b.value_us:
        return True
    if math.isnan(a.stderr_us) or math.isnan(b.stderr_us):
        return False
    return abs(a.value_us - b.value_us) <= z * (a.stderr_us + b.stderr_us)


def assign_ranks(scores: list[Score], z: float = Z_95) -> list[tuple[int, bool]]:
    """(rank, tied) for scores already sorted best first; see the module docstring for the rule."""
    out: list[tuple[int, bool]] = []
    leader = 0
    for i, s in enumerate(scores):
        if i > 0 and overlaps(scores[leader], s, z):
            out.append((leader + 1, True))
            if not out[leader][1]:
                out[leader] = (leader + 1, True)
        else:
            leader = i
            out.append((i + 1, False))
    return out


def shape_times(cases: list[CaseRow]) -> list[ShapeTime] | None:
    """Per-shape times of a run's benchmark cases; None unless every one passed with timings."""
    bench = [c for c in cases if c.kind in BENCHMARK_KINDS]
    if not bench or any(c.verdict != PASS or c.stats is None for c in bench):
        return None
    return [ShapeTime(shape_label(c.spec), c.stats.mean / 1e3, c.stats.stderr / 1e3) for c in bench]


def _reason(run: RunRow, has_pass: bool) -> str:
    if run.verdict == INCOMPLETE or not run.complete:
        return run.message or (
            "the run has not finished: still running, or interrupted (killed, crashed harness, "
            "machine lost) before it could store a result"
        )
    if run.verdict == PASS or has_pass:
        return "no benchmark timings yet: only test runs passed; run it in benchmark or leaderboard mode"
    return run.message or f"verdict {run.verdict}"


def _date(run: RunRow) -> str:
    stamp = run.finished_at or run.started_at or ""
    return stamp[:16].replace("T", " ")


def best_run(
    runs: list[RunRow], cases: dict[int, list[CaseRow]], rule: RankRule
) -> tuple[Score, RunRow, list[ShapeTime]] | None:
    """The best-scoring complete, passing run with timings among ``runs`` (None if there is none)."""
    scored = []
    for r in runs:
        shapes = shape_times(cases.get(r.id, [])) if r.complete and r.verdict == PASS else None
        if shapes and all(s.mean_us > 0 for s in shapes):  # a zero time is a broken timer, not a score
            scored.append((score(shapes, rule), r, shapes))
    return min(scored, key=lambda t: (t[0].value_us, t[1].id)) if scored else None


def build_leaderboard(
    task: str,
    rule: RankRule,
    runs: list[RunRow],
    cases: dict[int, list[CaseRow]],
    device: str | None = None,
    z: float = Z_95,
) -> Leaderboard:
    """Rank ``runs`` (of one task) per device; see the module docstring for every rule."""
    by_device: dict[str, list[RunRow]] = {}
    for r in runs:
        if r.task == task and (device is None or r.device_name == device):
            by_device.setdefault(r.device_name or UNKNOWN_DEVICE, []).append(r)
    boards = [_board(dev, dev_runs, cases, rule, z) for dev, dev_runs in sorted(by_device.items())]
    return Leaderboard(task=task, rule=rule, boards=boards)


def _board(dev: str, runs: list[RunRow], cases: dict[int, list[CaseRow]], rule: RankRule, z: float) -> DeviceBoard:
    by_sub: dict[tuple[str, str], list[RunRow]] = {}
    for r in runs:
        by_sub.setdefault((r.submission_sha256, r.display_name), []).append(r)
    best: list[tuple[Score, RunRow, list[ShapeTime]]] = []
    unranked: list[Unranked] = []
    for sub_runs in by_sub.values():
        top = best_run(sub_runs, cases, rule)
        if top is not None:
            best.append(top)
            continue
        latest = max(sub_runs, key=lambda r: (r.started_at, r.id))
        has_pass = any(r.verdict == PASS for r in sub_runs)
        verdict = INCOMPLETE if not latest.complete else latest.verdict
        unranked.append(
            Unranked(
                latest.display_name,
                latest.submission_sha256,
                latest.submission_path,
                verdict,
                _reason(latest, has_pass),
                _date(latest),
                latest.id,
            )
        )
    best.sort(key=lambda t: (t[0].value_us, t[1].display_name))
    ranks = assign_ranks([t[0] for t in best], z)
    leader = best[0][0].value_us if best else math.nan
    entries = [
        Entry(
            rank=rk,
            tied=tied,
            name=r.display_name,
            sha256=r.submission_sha256,
            path=r.submission_path,
            score_us=s.value_us,
            stderr_us=s.stderr_us,
            gap_x=s.value_us / leader,
            gap_us=s.value_us - leader,
            shapes=shapes,
            verdict=r.verdict,
            mode=r.mode,
            date=_date(r),
            run_id=r.id,
        )
        for (s, r, shapes), (rk, tied) in zip(best, ranks)
    ]
    labels: list[str] = []
    for e in entries:
        labels += [s.label for s in e.shapes if s.label not in labels]
    unranked.sort(key=lambda u: u.name)
    kind = next((r.device_kind for r in runs if r.device_kind), None)
    return DeviceBoard(device=dev, device_kind=kind, shapes=labels, ranked=entries, unranked=unranked)
