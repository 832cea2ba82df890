"""The final scoring of a board's top entries: rounds of one block per entry, interleaved in a fresh random
order each round, on one GPU; ranked by paired per-round differences (``harness.analysis.final``).

Each block is a ranked run of one block (a fresh worker, the task's tests on secret inputs, every timed
output checked) whose inputs derive from the round's secret: the entries of a round time the same
inputs. A block takes one ranked block's share of the stop rule (``StopRule.for_blocks``), so a round
costs about what a tenth of a ranked run does. Every block is stored as soon as it is measured
(``harness.store.finals``): an interrupted final keeps its blocks and a rerun of the same command
continues it (the key is the task, the board's device, the entries' contents and the margin).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.analysis.final import (
    FinalEntry,
    FinalRanking,
    entries_from_blocks,
    needs_more_rounds,
    rank_final,
    take_block,
    undecided_labels,
)
from harness.engine.blocks import (
    FINAL_REMEASURED_SHARE,
    RANKED_CPU_BLOCKS,
    RANKED_GPU_BLOCKS,
    max_remeasured,
    remeasured_blocks,
)
from harness.engine.options import RunOptions
from harness.engine.seeds import derive_seed
from harness.engine.stop_rule import StopRule
from harness.results import PASS, RunResult
from harness.store.database import Store
from harness.store.finals import FinalBlock, FinalRow, add_block, blocks, finish_final, open_final
from tasks.registry import Task

ROUND_ORDER_SEED = 1 << 43


@dataclass(frozen=True)
class FinalPlan:
    task: str  # the task's name
    board_device: str  # the board section the entries come from (and the GPU's name)
    entries: list[tuple[str, str, str]]  # (sha256, name, path), best first on the board
    min_rounds: int = 3
    max_rounds: int = 10
    margin: float = 0.01

    def key(self) -> str:
        shas = sorted(sha for sha, _, _ in self.entries)
        text = json.dumps([self.task, self.board_device, shas, self.margin], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def config(self) -> dict[str, Any]:
        return {
            "entries": [{"sha256": s, "name": n, "path": p} for s, n, p in self.entries],
            "min_rounds": self.min_rounds,
            "max_rounds": self.max_rounds,
            "margin": self.margin,
        }


# (path, round, round secret, how many times its block may be measured again after the escaped-work
# check alone: RunOptions.remeasure_limit) -> a one-block ranked run
BlockRunner = Callable[[str, int, str, int], RunResult]


def block_options(options: RunOptions, gpu: bool) -> RunOptions:
    """One block's options: a single block with one ranked block's share of the stop rule (options the
    caller set explicitly are kept)."""
    rule = StopRule.from_options(options, gpu, True).for_blocks(RANKED_GPU_BLOCKS if gpu else RANKED_CPU_BLOCKS)
    return replace(
        options,
        blocks=1,
        max_repeats=options.max_repeats or rule.max_samples,
        max_time_s=options.max_time_s or rule.max_measured_ns / 1e9,
        wall_cap_s=options.wall_cap_s or rule.wall_cap_s,
        target_rel_err=rule.target_rel_err,
    )


def block_runner(task: Task, options: RunOptions, gpu: bool) -> BlockRunner:
    """The runner of a final's blocks: a one-block ranked run of ``task`` with ``block_options``, the
    round's secret and the entry's remeasure limit."""
    one = block_options(options, gpu)

    def run_block(path: str, _round: int, secret: str, redraws: int) -> RunResult:
        from harness.engine.runner import run_submission  # loads torch: imported when a block runs

        return run_submission(Path(path), task, "leaderboard", replace(one, secret=secret, remeasure_limit=redraws))

    return run_block


def round_order(n: int, round_index: int, secret: str) -> list[int]:
    order = list(range(n))
    random.Random(derive_seed(secret, ROUND_ORDER_SEED, round_index)).shuffle(order)
    return order


def _block_of(result: RunResult, round_index: int, sha: str) -> FinalBlock:
    record = result.blocks[0] if result.blocks else None
    detail: dict[str, Any] = {
        "wall_s": result.wall_s,
        "warnings": result.warnings[:10],
        "measured_again": remeasured_blocks(result.warnings),
    }
    if record is not None:
        detail.update(clocks_before=record.clocks_before, clocks_after=record.clocks_after, throttled=record.throttled)
    score = result.score_us if result.verdict == PASS else None
    return FinalBlock(round_index, sha, result.verdict, score, result.message, detail)


def run_final(
    st: Store,
    plan: FinalPlan,
    secret: str,
    run_block: BlockRunner,
    progress: Callable[[str], None] = lambda _line: None,
) -> tuple[FinalRow, FinalRanking, bool]:
    """Runs (or continues) the final of ``plan``; (its stored row, the ranking, whether it resumed)."""
    final, resumed = open_final(st, plan.task, plan.board_device, plan.key(), plan.config())
    stored = blocks(st, final.id)
    if resumed:
        progress(f"final {final.id}: continuing ({len(stored)} blocks already measured are kept)")
    redraw_limit = max_remeasured(plan.max_rounds, FINAL_REMEASURED_SHARE)  # over an entry's rounds
    entries = entries_from_blocks(plan.entries, [vars(b) for b in stored])
    ranking = rank_final(entries, plan.margin)
    while needs_more_rounds(ranking, plan.min_rounds, plan.max_rounds) and _live(entries):
        r = ranking.rounds
        round_secret = f"{secret}:final-round-{r}"
        live = _live(entries)
        for i in round_order(len(live), r, secret):
            e = live[i]
            if r in e.scores:
                continue  # measured before an interruption
            progress(f"final {final.id}: round {r + 1}, {e.name}")
            left = max(0, redraw_limit - e.measured_again)
            block = _block_of(run_block(e.path, r, round_secret, left), r, e.sha256)
            add_block(st, final.id, block)
            take_block(e, vars(block))
        ranking = rank_final(entries, plan.margin)
        if ranking.undecided:
            progress(f"final {final.id}: after {ranking.rounds} rounds, undecided: {_pairs(ranking)}")
    if ranking.undecided:
        labels = ", ".join(undecided_labels(ranking.to_dict()))
        progress(f"final {final.id}: --max-rounds {plan.max_rounds} reached; undecided (shown tied): {labels}")
    result = dict(ranking.to_dict(), config=plan.config())
    finish_final(st, final.id, result)
    return final, ranking, resumed


def _live(entries: list[FinalEntry]) -> list[FinalEntry]:
    return [e for e in entries if e.failed is None]


def _pairs(ranking: FinalRanking) -> str:
    return ", ".join(f"{a} / {b}" for a, b in ranking.undecided)
