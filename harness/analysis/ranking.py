"""Ranking: turn stored runs into a leaderboard, one section per device. Pure: the store or report layer
feeds it plain rows (anything with the fields of :class:`RunLike` and :class:`CaseLike`) and each run's
block scores; nothing here reads the store.

Rules (``RankRule``, as in GPU MODE's kernelbot): ``geom`` is the geometric mean of the per-shape
benchmark means, ``mean`` their arithmetic mean, ``last`` the mean of the last benchmark shape.
Lower is better.

Which runs count: per device and per submission *content* (the sha256: identical files are one entry,
whatever their names), *every* complete, passing run that has benchmark timings, pooled (:func:`pool_runs`):
not the best one, which would reward resubmitting one file until a lucky draw. The runs whose blocks are
independent (fresh workers) count when there are any, else every such run, each as one block. An entry's
per-shape times are the pooled samples of its runs, its score the rule over them, and its interval comes
from all their blocks together, so a rerun narrows an entry's interval and never moves it by selection. A
submission with no such run is not ranked; it is listed with the verdict and reason of its latest run
(failed, error, timeout, rejected, incomplete, or "no timings" when it only ran tests). Runs on different
devices are never ranked together.

Ties (:mod:`harness.analysis.ties`, one rule for the board, the site, ``compare`` and the JSON): each
entry's score has a standard error of its log, from its runs' block scores (sd / sqrt(B), B - 1 degrees
of freedom) or, for a single run of a single block, from its samples (``score``: propagated from the
per-shape standard errors; one process only, so much narrower than a rerun's spread). Entries are sorted by score;
the best entry not yet placed leads a group, and every later entry the rule calls ``tied`` with the leader
(not both a significant difference and one beyond the equivalence margin) shares its rank, shown as
"=2". Ties are not chained. Entries with blocks add the between-run spread their blocks cannot show
(:func:`between_runs`): the wider of the device and task's measured row and what the store's own reruns
of identical files show beyond their blocks.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Protocol

from harness.analysis import run_spread
from harness.analysis.blocks import combine, log_spread
from harness.analysis.run_spread import Rerun, RunSpread
from harness.analysis.ties import DEFAULT_MARGIN, TIE_RULE_VERSION, Decision, Spread, rank_groups, welch
from harness.results import PASS, Stats, shape_label

Z_95 = 1.959963984540054
# 1 - first version: task, rule, devices[{device, ranked, unranked, shapes}]
# 2 - tie_rule is an object (version, margin, confidence, text); entries carry interval_source, blocks,
#     low_us/high_us, vs_leader (the tie rule's decision against the group's leader) and aliases; identical
#     content (sha256) is one entry
# 3 - an entry pools every counted run of its content (run_ids, oldest first; run_id is the latest), not
#     its best run
# 4 - each device section's run_sd: the between-run sd its intervals add (harness.analysis.run_spread)
# 5 - run_sd may come from the store's own reruns: run_sd_source and run_sd_from_store say where it was measured
# 6 - run_sd_borrowed_from: the GPU model whose row a section without one of its own adds
LEADERBOARD_JSON_VERSION = 6
INCOMPLETE = "incomplete"  # the store's verdict of a run that began and never finished
UNKNOWN_DEVICE = "(unknown device)"
BENCHMARK_KINDS = ("benchmark", "leaderboard")


class RunLike(Protocol):
    """What the ranking reads of a stored run (``harness.store.rows.RunRow`` has it)."""

    id: int
    task: str
    mode: str
    submission_path: str
    submission_sha256: str
    display_name: str
    device_name: str | None
    device_kind: str | None
    started_at: str
    finished_at: str | None
    verdict: str
    message: str
    complete: bool


class CaseLike(Protocol):
    """What the ranking reads of a stored case (``harness.store.rows.CaseRow`` has it)."""

    kind: str
    spec: dict[str, Any]
    verdict: str
    stats: Stats | None


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
    low_us: float | None = None  # the score's 95% interval (None when unknown)
    high_us: float | None = None
    interval_source: str = "none"  # "blocks", "samples" (one process: too narrow for a rerun) or "none"
    blocks: int = 0
    vs_leader: dict[str, Any] | None = None  # the tie rule's decision against the group's leader
    aliases: list[str] = field(default_factory=list)  # other names the same content was submitted under
    run_ids: list[int] = field(default_factory=list)  # every run pooled into this entry, oldest first

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
    final: dict[str, Any] | None = None  # the latest final scoring of this section (harness.analysis.final JSON)
    run_sd: float | None = None  # the between-run sd its intervals add (harness.analysis.run_spread); None: no row
    run_sd_source: str | None = None  # where it was measured: boards of copies (a file) or this store's reruns
    run_sd_from_store: bool = False  # measured by this store's reruns (wider than the device's row, if any)
    run_sd_borrowed_from: str | None = None  # the GPU model whose row it is (this model has none of its own)


@dataclass
class Leaderboard:
    task: str
    rule: RankRule
    boards: list[DeviceBoard]
    mode: str | None = None  # the one mode whose runs are ranked (None: every mode, as asked)
    margin: float = DEFAULT_MARGIN  # the tie rule's equivalence margin

    def to_dict(self) -> dict[str, Any]:
        def clean(x: Any) -> Any:
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
                "tie_rule": {
                    "version": TIE_RULE_VERSION,
                    "margin": self.margin,
                    "confidence": 0.95,
                    "text": tie_rule_text(self.margin),
                },
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


def tie_rule_text(margin: float) -> str:
    return (
        f"'=' marks entries the tie rule cannot tell apart: tied unless the 95% interval of the ratio excludes 1 "
        f"and the difference exceeds the {margin:.1%} equivalence margin (rule version {TIE_RULE_VERSION})"
    )


def entry_spread(
    value: Score, block_scores: Sequence[float], between_runs: RunSpread | None = None, runs: int = 1
) -> Spread:
    """An entry's spread: from its block scores (with the device and task's measured between-run sd over
    its ``runs`` runs, where there is one), else from its samples (one process), else unknown."""
    from harness.analysis.ties import spread_from_blocks

    spread = spread_from_blocks(value.value_us, block_scores, between_runs, runs)
    if spread is not None:
        return spread
    if math.isfinite(value.stderr_us) and value.value_us > 0:
        return Spread(value.value_us, value.stderr_us / value.value_us, math.inf, "samples")
    return Spread(value.value_us, math.nan, math.nan, "none")


def interval_of(spread: Spread) -> tuple[float | None, float | None]:
    """The 95% interval of an entry's score from its spread (None, None when unknown)."""
    from harness.analysis.compare import t_quantile

    if not math.isfinite(spread.se_log):
        return None, None
    half = t_quantile(0.95, spread.df) * spread.se_log if spread.se_log > 0 else 0.0
    return spread.score_us * math.exp(-half), spread.score_us * math.exp(half)


def shape_times(cases: Sequence[CaseLike]) -> list[ShapeTime] | None:
    """Per-shape times of a run's benchmark cases; None unless every one passed with timings."""
    bench = [c for c in cases if c.kind in BENCHMARK_KINDS]
    if not bench or any(c.verdict != PASS or c.stats is None for c in bench):
        return None
    return [ShapeTime(shape_label(c.spec), c.stats.mean / 1e3, c.stats.stderr / 1e3) for c in bench if c.stats]


def _reason(run: RunLike, has_pass: bool) -> str:
    if run.verdict == INCOMPLETE or not run.complete:
        return run.message or (
            "the run has not finished: still running, or interrupted (killed, crashed harness, "
            "machine lost) before it could store a result"
        )
    if run.verdict == PASS or has_pass:
        return "no benchmark timings yet: only test runs passed; run it in benchmark or leaderboard mode"
    return run.message or f"verdict {run.verdict}"


def _date(run: RunLike) -> str:
    stamp = run.finished_at or run.started_at or ""
    return stamp[:16].replace("T", " ")


def run_score(
    run: RunLike, cases: Mapping[int, Sequence[CaseLike]], rule: RankRule
) -> tuple[Score, list[ShapeTime]] | None:
    """A complete, passing run's score and per-shape times (None without timings, or with a zero time:
    a broken timer, not a score)."""
    shapes = shape_times(cases.get(run.id, [])) if run.complete and run.verdict == PASS else None
    if not shapes or not all(s.mean_us > 0 for s in shapes):  # also a NaN
        return None
    return score(shapes, rule), shapes


@dataclass
class Pooled:
    """The runs of one content on one device that count, taken together (see the module docstring)."""

    score: Score
    shapes: list[ShapeTime]
    stats: dict[str, Stats]  # per shape label, the pooled samples
    runs: list[RunLike]  # oldest first
    block_scores: list[float]  # the interval's blocks: every run's blocks, or each run's score as one
    blocks_are_runs: bool = False  # each run's score as one block: their spread is already a rerun's

    @property
    def latest(self) -> RunLike:
        return self.runs[-1]

    def spread(self, between_runs: RunSpread | None = None) -> Spread:
        """Its spread (``entry_spread``), with the device and task's measured between-run sd over its runs
        where its blocks are consecutive blocks of runs (not when they are the runs' own scores)."""
        return entry_spread(
            self.score, self.block_scores, None if self.blocks_are_runs else between_runs, len(self.runs)
        )


def pool_runs(
    runs: Sequence[RunLike],
    cases: Mapping[int, Sequence[CaseLike]],
    rule: RankRule,
    blocks: Mapping[int, Sequence[float]] | None = None,
) -> Pooled | None:
    """Every complete, passing run with timings among ``runs`` (one content, one device), pooled; None if
    there is none. ``blocks``: each run's independent block scores by run id (absent: one block)."""
    blocks = blocks or {}
    counted = _counted_runs(runs, cases, rule, blocks)
    if not counted:
        return None
    stats = {r.id: _shape_stats(cases[r.id]) for r in counted}
    pooled = _pooled_stats([stats[r.id] for r in counted])
    if pooled is None:  # a run stored without its samples: the latest run alone
        counted, pooled = counted[-1:], stats[counted[-1].id]
    shapes = [ShapeTime(label, st.mean / 1e3, st.stderr / 1e3) for label, st in pooled.items()]
    block_scores = _pooled_blocks(counted, cases, rule, blocks)
    as_runs = len(counted) >= 2 and not any(len(blocks.get(r.id, ())) >= 2 for r in counted)
    return Pooled(score(shapes, rule), shapes, pooled, counted, block_scores, as_runs)


def _counted_runs(
    runs: Sequence[RunLike],
    cases: Mapping[int, Sequence[CaseLike]],
    rule: RankRule,
    blocks: Mapping[int, Sequence[float]],
) -> list[RunLike]:
    """The runs that count, oldest first: those with a score; of them, those with independent blocks when
    there are any; of those, the ones of the latest one's shapes (a task whose shapes changed starts anew)."""
    scored = sorted((r for r in runs if run_score(r, cases, rule) is not None), key=lambda r: (r.started_at, r.id))
    counted = [r for r in scored if len(blocks.get(r.id, ())) >= 2] or scored
    if not counted:
        return []
    labels = list(_shape_stats(cases[counted[-1].id]))
    return [r for r in counted if list(_shape_stats(cases[r.id])) == labels]


def _pooled_blocks(
    counted: Sequence[RunLike],
    cases: Mapping[int, Sequence[CaseLike]],
    rule: RankRule,
    blocks: Mapping[int, Sequence[float]],
) -> list[float]:
    """The interval's blocks: every run's independent blocks; else, with several runs of one process each,
    each run's score as one block; else none (one process: the samples' spread)."""
    if any(len(blocks.get(r.id, ())) >= 2 for r in counted):
        return [b for r in counted for b in blocks[r.id]]
    if len(counted) >= 2:
        return [scored[0].value_us for r in counted if (scored := run_score(r, cases, rule)) is not None]
    return []


def _shape_stats(cases: Sequence[CaseLike]) -> dict[str, Stats]:
    return {shape_label(c.spec): c.stats for c in cases if c.kind in BENCHMARK_KINDS and c.stats is not None}


def _pooled_stats(per_run: list[dict[str, Stats]]) -> dict[str, Stats] | None:
    """Per shape, the samples of every run together (None when a run's samples are not stored)."""
    if len(per_run) == 1:
        return per_run[0]
    if any(not st.samples_ns for run in per_run for st in run.values()):
        return None
    return {label: Stats.from_samples([x for run in per_run for x in run[label].samples_ns]) for label in per_run[0]}


def build_leaderboard(
    task: str,
    rule: RankRule,
    runs: Sequence[RunLike],
    cases: Mapping[int, Sequence[CaseLike]],
    device: str | None = None,
    blocks: Mapping[int, Sequence[float]] | None = None,
    margin: float = DEFAULT_MARGIN,
) -> Leaderboard:
    """Rank ``runs`` (of one task) per device; ``blocks``: each run's block scores by run id (absent: the
    run had one block). See the module docstring for every rule."""
    by_device: dict[str, list[RunLike]] = {}
    for r in runs:
        if r.task == task and (device is None or r.device_name == device):
            by_device.setdefault(r.device_name or UNKNOWN_DEVICE, []).append(r)
    boards = [
        _board(dev, task, dev_runs, cases, rule, blocks or {}, margin) for dev, dev_runs in sorted(by_device.items())
    ]
    return Leaderboard(task=task, rule=rule, boards=boards, margin=margin)


def _unranked(sub_runs: Sequence[RunLike]) -> Unranked:
    latest = max(sub_runs, key=lambda r: (r.started_at, r.id))
    has_pass = any(r.verdict == PASS for r in sub_runs)
    verdict = INCOMPLETE if not latest.complete else latest.verdict
    return Unranked(
        latest.display_name,
        latest.submission_sha256,
        latest.submission_path,
        verdict,
        _reason(latest, has_pass),
        _date(latest),
        latest.id,
    )


def _entry(pooled: Pooled, spread: Spread, leader: float, aliases: list[str]) -> Entry:
    s, r = pooled.score, pooled.latest
    low, high = interval_of(spread)
    return Entry(
        rank=0,
        tied=False,
        name=r.display_name,
        sha256=r.submission_sha256,
        path=r.submission_path,
        score_us=s.value_us,
        stderr_us=s.stderr_us if spread.source != "blocks" else spread.se_log * s.value_us,
        gap_x=s.value_us / leader,
        gap_us=s.value_us - leader,
        shapes=pooled.shapes,
        verdict=r.verdict,
        mode=r.mode,
        date=_date(r),
        run_id=r.id,
        low_us=low,
        high_us=high,
        interval_source=spread.source,
        blocks=spread.blocks,
        aliases=[a for a in aliases if a != r.display_name],
        run_ids=[x.id for x in pooled.runs],
    )


def _pooled_per_content(
    runs: Sequence[RunLike],
    cases: Mapping[int, Sequence[CaseLike]],
    rule: RankRule,
    blocks: Mapping[int, Sequence[float]],
) -> tuple[list[Pooled], dict[str, list[str]], list[Unranked]]:
    """Per content hash: its pooled runs (or, with none that count, an unranked line) and every name it
    ran under."""
    by_sub: dict[str, list[RunLike]] = {}
    for r in runs:
        by_sub.setdefault(r.submission_sha256, []).append(r)
    ranked: list[Pooled] = []
    aliases: dict[str, list[str]] = {}
    unranked: list[Unranked] = []
    for sha, sub_runs in by_sub.items():
        pooled = pool_runs(sub_runs, cases, rule, blocks)
        if pooled is None:
            unranked.append(_unranked(sub_runs))
            continue
        ranked.append(pooled)
        aliases[sha] = sorted({r.display_name for r in sub_runs})
    return ranked, aliases, unranked


def between_runs(
    dev: str,
    task: str,
    runs: Sequence[RunLike],
    cases: Mapping[int, Sequence[CaseLike]],
    rule: RankRule,
    blocks: Mapping[int, Sequence[float]],
) -> RunSpread | None:
    """The between-run spread a board of ``runs`` (one device) adds to its intervals: the wider of the
    device and task's measured row (``harness.analysis.run_spread.lookup``) and what the reruns among
    ``runs`` show (:func:`store_reruns`). ``compare`` uses it as the board does."""
    return _between(dev, task, _pooled_per_content(runs, cases, rule, blocks)[0], blocks)


def _between(dev: str, task: str, pooled: Sequence[Pooled], blocks: Mapping[int, Sequence[float]]) -> RunSpread | None:
    return run_spread.wider(run_spread.lookup(dev, task), store_reruns(pooled, blocks))


def store_reruns(pooled: Sequence[Pooled], blocks: Mapping[int, Sequence[float]]) -> RunSpread | None:
    """The between-run spread beyond their blocks' that the entries run more than once show (each run
    with blocks of its own; ``harness.analysis.run_spread.estimate``), leaving out an entry whose reruns
    spread far more than the others' (``run_spread.outliers``: a submission cannot widen everyone's
    intervals by running differently each time); None with fewer than ``run_spread.MIN_FILES`` entries of
    two such runs or more (none could be judged)."""
    groups = []
    for p in pooled:
        reruns = [rerun_from_blocks(blocks.get(r.id, ())) for r in p.runs]
        groups.append([x for x in reruns if x is not None])
    if sum(len(g) >= 2 for g in groups) < run_spread.MIN_FILES:
        return None
    left_out = run_spread.outliers(groups)
    found = run_spread.estimate(g for i, g in enumerate(groups) if i not in left_out)
    if found is None:
        return None
    source = f"{found.runs} runs of {found.files} files run more than once in this store"
    if left_out:
        names = ", ".join(sorted(pooled[i].latest.display_name for i in left_out))
        source += f"; left out, its reruns spreading far more than the others': {names}"
    return found.spread(source, from_store=True)


def rerun_from_blocks(block_scores: Sequence[float]) -> Rerun | None:
    """A run as one rerun of its code: the log of its blocks' geometric mean and that mean's standard error
    (``harness.analysis.blocks``); None with fewer than two blocks."""
    scores = [b for b in block_scores if b > 0]
    if len(scores) < 2:
        return None
    return Rerun(math.log(combine(scores, "geom")), log_spread(scores) / math.sqrt(len(scores)), len(scores))


def _tell_shared_names_apart(entries: list[Entry]) -> None:
    """Entries of one board that share a display name (two versions of a file, or two competitors who
    chose one name) get the first 7 hex digits of their content's sha256 after it: 'name #1a2b3c4'."""
    counts = Counter(e.name for e in entries)
    for e in entries:
        if counts[e.name] > 1:
            e.name = f"{e.name} #{e.sha256[:7]}"


def _board(
    dev: str,
    task: str,
    runs: Sequence[RunLike],
    cases: Mapping[int, Sequence[CaseLike]],
    rule: RankRule,
    blocks: Mapping[int, Sequence[float]],
    margin: float,
) -> DeviceBoard:
    pooled, aliases, unranked = _pooled_per_content(runs, cases, rule, blocks)
    pooled.sort(key=lambda p: (p.score.value_us, p.latest.display_name))
    between = _between(dev, task, pooled, blocks)
    spreads = [p.spread(between) for p in pooled]
    leader = pooled[0].score.value_us if pooled else math.nan
    entries = [_entry(p, sp, leader, aliases[p.latest.submission_sha256]) for p, sp in zip(pooled, spreads)]
    _tell_shared_names_apart(entries)
    for e, (rank, tied) in zip(entries, rank_groups(spreads, margin)):
        e.rank, e.tied = rank, tied
    leader_at = 0
    for i, e in enumerate(entries[1:], start=1):  # each against the leader the rule compared it with
        decision: Decision = welch(spreads[i], spreads[leader_at], margin)
        e.vs_leader = dict(decision.to_dict(), leader=entries[leader_at].name)
        if e.rank == i + 1:  # a new group's leader
            leader_at = i
    labels: list[str] = []
    for e in entries:
        labels += [s.label for s in e.shapes if s.label not in labels]
    unranked.sort(key=lambda u: u.name)
    kind = next((r.device_kind for r in runs if r.device_kind), None)
    return DeviceBoard(
        device=dev,
        device_kind=kind,
        shapes=labels,
        ranked=entries,
        unranked=unranked,
        **_run_sd_fields(between),
    )


def _run_sd_fields(between: RunSpread | None) -> dict[str, Any]:
    """A section's ``run_sd*`` fields from the between-run spread its intervals add (None: none)."""
    if between is None:
        return {}
    return {
        "run_sd": between.sd_log,
        "run_sd_source": between.source,
        "run_sd_from_store": between.from_store,
        "run_sd_borrowed_from": between.borrowed_from,
    }
