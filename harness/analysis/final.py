"""The final scoring's ranking: pure functions on each entry's block score per round.

In every round each entry runs one block (a fresh worker, the round's inputs: the same for every entry
of the round) in a fresh random order, so what changes between rounds (the GPU's state, the inputs) is
shared by the entries of a round and cancels in their per-round differences. An entry's score is the
geometric mean of its block scores over the rounds every entry completed. Entries are sorted by score;
the best entry not yet placed leads a group, and every later entry that the tie rule, on the paired
per-round differences with the leader (``harness.analysis.ties.paired``), calls tied joins it. A pair of
neighbours whose decision is not settled asks for another round, up to the budget.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.analysis.blocks import log_spread
from harness.analysis.compare import t_quantile
from harness.analysis.ties import CONFIDENCE, DEFAULT_MARGIN, TIE_RULE_VERSION, Call, paired

FINAL_JSON_VERSION = 2  # 1 - first version: rounds, margin, places[{rank, tied, name, sha256, score_us, ...}]
# 2 - rounds_to_settle beside undecided


@dataclass
class FinalEntry:
    sha256: str
    name: str
    path: str
    scores: dict[int, float] = field(default_factory=dict)  # round -> block score (us)
    failed: str | None = None  # why the entry left the final (a block did not pass)
    measured_again: int = 0  # its blocks measured again after the escaped-work check alone, so far


@dataclass
class FinalPlace:
    rank: int
    tied: bool
    name: str
    sha256: str
    score_us: float | None
    rounds: int
    vs_leader: dict[str, Any] | None = None  # the paired decision against the leader it was compared with
    failed: str | None = None

    @property
    def rank_label(self) -> str:
        if self.failed:
            return "-"
        return f"={self.rank}" if self.tied else str(self.rank)


@dataclass
class FinalRanking:
    places: list[FinalPlace]
    rounds: int  # the rounds every remaining entry completed
    undecided: list[tuple[str, str]]  # neighbours (by name) whose decision is not settled yet
    margin: float = DEFAULT_MARGIN
    rounds_to_settle: list[int | None] = field(default_factory=list)  # per undecided pair (rounds_to_settle)
    rule_version: int = TIE_RULE_VERSION

    def to_dict(self) -> dict[str, Any]:
        places = []
        for p in self.places:
            d = asdict(p)
            d["rank_label"] = p.rank_label
            places.append(d)
        return _finite(
            {
                "version": FINAL_JSON_VERSION,
                "rounds": self.rounds,
                "margin": self.margin,
                "tie_rule_version": self.rule_version,
                "undecided": [list(u) for u in self.undecided],
                "rounds_to_settle": self.rounds_to_settle,
                "places": places,
            }
        )


def _finite(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def _geomean(xs: Sequence[float]) -> float:
    return math.exp(math.fsum(math.log(x) for x in xs) / len(xs))


def common_rounds(entries: Sequence[FinalEntry]) -> list[int]:
    """The rounds in which every entry still in the final has a block score."""
    live = [e for e in entries if e.failed is None]
    if not live:
        return []
    rounds = set(live[0].scores)
    for e in live[1:]:
        rounds &= set(e.scores)
    return sorted(rounds)


def rank_final(entries: Sequence[FinalEntry], margin: float = DEFAULT_MARGIN) -> FinalRanking:
    """The final ranking of ``entries`` from their complete rounds (see the module docstring)."""
    rounds = common_rounds(entries)
    live = [e for e in entries if e.failed is None and rounds]
    live.sort(key=lambda e: (_geomean([e.scores[r] for r in rounds]), e.name))
    places: list[FinalPlace] = []
    leader = 0
    for i, e in enumerate(live):
        series = [e.scores[r] for r in rounds]
        place = FinalPlace(i + 1, False, e.name, e.sha256, _geomean(series), len(rounds))
        if i > 0:
            lead = live[leader]
            decision = paired(series, [lead.scores[r] for r in rounds], margin)
            place.vs_leader = dict(decision.to_dict(), leader=lead.name)
            if decision.call is Call.TIED:
                place.rank, place.tied = leader + 1, True
                places[leader].tied = True
            else:
                leader = i
        places.append(place)
    undecided = _undecided(live, rounds, margin)
    by_name = {e.name: e for e in live}
    to_settle = [rounds_to_settle(by_name[a], by_name[b], margin) for a, b in undecided]
    for e in entries:
        if e.failed is not None:
            places.append(FinalPlace(0, False, e.name, e.sha256, None, len(e.scores), failed=e.failed))
    return FinalRanking(places, len(rounds), undecided, margin, rounds_to_settle=to_settle)


def _undecided(live: Sequence[FinalEntry], rounds: Sequence[int], margin: float) -> list[tuple[str, str]]:
    """Neighbours in the ranking whose paired decision is not settled."""
    out = []
    for a, b in itertools.pairwise(live):
        if not paired([a.scores[r] for r in rounds], [b.scores[r] for r in rounds], margin).settled:
            out.append((a.name, b.name))
    return out


def rounds_to_settle(a: FinalEntry, b: FinalEntry, margin: float = DEFAULT_MARGIN, most: int = 10_000) -> int | None:
    """About how many rounds would settle A against B if their per-round log differences kept the mean and
    spread they have now: a difference once its interval excludes 0 (beyond the margin), an equivalence
    once its interval fits inside the margin; None where it would take more than ``most`` (a mean on the
    margin itself), or where fewer than two common rounds give no spread."""
    ratios = [a.scores[r] / b.scores[r] for r in sorted(set(a.scores) & set(b.scores))]
    if len(ratios) < 2:
        return None
    mean, sd = math.log(_geomean(ratios)), log_spread(ratios)  # of the per-round log differences
    room = abs(mean) if abs(mean) > math.log1p(margin) else math.log1p(margin) - abs(mean)
    return _rounds_within(room, sd, len(ratios), most)


def _rounds_within(room: float, sd: float, start: int, most: int = 10_000) -> int | None:
    """The fewest rounds from ``start`` on whose interval half-width (t with rounds - 1 degrees of freedom
    times ``sd`` / sqrt(rounds)) is below ``room``, a log ratio; None beyond ``most``."""
    if sd == 0:
        return start
    if room <= 0 or (sd / room) ** 2 * 3.8 > most:  # t >= 1.96: never within ``most`` rounds
        return None
    n = start
    while t_quantile(CONFIDENCE, n - 1) * sd / math.sqrt(n) >= room:
        n += max(1, n // 20)
    return n


@dataclass(frozen=True)
class BoardPlace:
    """What a final's outlook reads of one board entry (``harness.analysis.ranking.Entry`` has these
    fields): its score, its standard error, where that came from ("blocks", "samples" or "none") and
    from how many blocks."""

    name: str
    score_us: float
    stderr_us: float
    interval_source: str
    blocks: int


def outlook(places: Sequence[BoardPlace], margin: float = DEFAULT_MARGIN) -> list[str]:
    """Before a final: for each pair of neighbours on the board (best first), about how many rounds would
    tell them apart if their blocks spread in the final as on the board and the board's gap held (the
    spread of one round's difference taken as the two entries' block spreads combined: likely more than
    the final sees, since a round's shared inputs and GPU state cancel in it). A gap within the margin
    ends tied unless the final finds more; an entry whose interval does not come from blocks gives no
    estimate."""
    lines = []
    for a, b in itertools.pairwise(places):
        gap = b.score_us / a.score_us - 1
        head = f"{a.name} / {b.name}: {gap:.1%} apart on the board"
        sds = [_block_sd(p) for p in (a, b)]
        if abs(math.log1p(gap)) <= math.log1p(margin):
            lines.append(f"{head}, within the {margin:.1%} margin: the final ties them unless it finds more")
        elif None in sds:
            lines.append(f"{head}; no spread between blocks to estimate the rounds from")
        else:
            sd = math.hypot(*(x for x in sds if x is not None))
            n = _rounds_within(abs(math.log1p(gap)), sd, 2)
            about = f"about {n} rounds" if n is not None else "more rounds than a final runs"
            lines.append(f"{head}, a round's difference spreading about {sd:.1%}: {about} would tell them apart")
    return lines


def _block_sd(p: BoardPlace) -> float | None:
    """The sd of one block's log score: the standard error of the entry's log score (what the board's
    tie rule uses) times sqrt(blocks); None where the board's spread does not come from two or more blocks."""
    if p.interval_source != "blocks" or p.blocks < 2 or not (math.isfinite(p.stderr_us) and p.score_us > 0):
        return None
    return p.stderr_us / p.score_us * math.sqrt(p.blocks)


def undecided_labels(final: Mapping[str, Any]) -> list[str]:
    """The undecided pairs of a final's JSON as "a / b", with the rounds that would settle each where the
    JSON has them (version 2 on)."""
    settle = list(final.get("rounds_to_settle") or [])
    labels = []
    for i, pair in enumerate(final.get("undecided") or []):
        n = settle[i] if i < len(settle) else None
        labels.append(" / ".join(pair) + (f" (about {n} rounds in all would settle it)" if n else ""))
    return labels


def needs_more_rounds(ranking: FinalRanking, min_rounds: int, max_rounds: int) -> bool:
    """Another round is due: fewer than ``min_rounds``, or a neighbouring pair still undecided and the
    budget of ``max_rounds`` not spent."""
    if ranking.rounds < min_rounds:
        return True
    return bool(ranking.undecided) and ranking.rounds < max_rounds


def entries_from_blocks(
    entries: Sequence[tuple[str, str, str]], blocks: Sequence[Mapping[str, Any]]
) -> list[FinalEntry]:
    """``entries``: (sha256, name, path) in board order; ``blocks``: stored blocks with round, sha256,
    verdict, score_us, message and detail, each taken as :func:`take_block` does."""
    out = {sha: FinalEntry(sha, name, path) for sha, name, path in entries}
    for b in blocks:
        e = out.get(b["sha256"])
        if e is not None:
            take_block(e, b)
    return list(out.values())


def take_block(e: FinalEntry, block: Mapping[str, Any]) -> None:
    """Adds one of ``e``'s blocks (round, verdict, score_us, message, and in ``detail`` how many times it
    was measured again after the escaped-work check alone, which ``harness.engine.final`` bounds over
    the whole final): its score, or why ``e`` leaves the final (a block that did not pass)."""
    e.measured_again += int((block.get("detail") or {}).get("measured_again", 0))
    score = block.get("score_us")
    if block["verdict"] == "pass" and isinstance(score, (int, float)) and score > 0:
        e.scores[int(block["round"])] = float(score)
    elif e.failed is None:
        e.failed = f"round {block['round'] + 1}: {block['verdict']}: {block.get('message') or 'no score'}"
