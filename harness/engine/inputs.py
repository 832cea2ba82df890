"""The run's inputs: seeds (the public seed, or in ranked runs derived from the secret), the parent's
own copy of each input, and the worker's copy, generated in the worker from the same seed while the
parent generates its own (nothing is timed meanwhile), and proved equal by fingerprints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness import protocol
from harness.engine.context import RunContext, fmt_spec
from harness.engine.seeds import derive_seed
from harness.engine.session import DIFFERENT_INPUTS, WorkerSession
from harness.engine.supervisor import WorkerFailure
from harness.results import ERROR

WARMUP_INDEX = 1 << 40  # leaderboard warm-up inputs use seeds no timed input uses
TEST_INDEX = 1 << 41  # and leaderboard tests seeds of their own


class Inputs:
    def __init__(self, ctx: RunContext, session: WorkerSession):
        self.ctx, self.session = ctx, session

    def specs(self, spec: dict[str, Any], index: int, count: int, fresh: bool | None = None) -> list[dict[str, Any]]:
        """The specs of ``count`` inputs from index ``index`` on, with their seeds: derived from the secret in
        ranked runs (``fresh``), else from the public seed (index 0: the case's own)."""
        fresh = self.ctx.ranked if fresh is None else fresh
        return [
            dict(
                spec,
                seed=derive_seed(str(self.ctx.opt.secret), spec["seed"], index + j)
                if fresh
                else spec["seed"] + 42 * (index + j),
            )
            for j in range(count)
        ]

    def make(
        self, specs: list[dict[str, Any]], deadline: float, keep: int = 0, also: Callable[[], None] | None = None
    ) -> tuple[list[Any], list[int]]:
        """(the parent's copies of the inputs of ``specs``, the worker's slots for its own, after its
        first ``keep``): the parent generates its copies while the worker generates its own (nothing is
        timed meanwhile), and the two must have the same fingerprints. ``also``: more of the parent's
        own work for that time (a deferred check, ``harness.engine.benchmark``), done first."""
        mine: dict[str, list[Any]] = {}

        def generate_here() -> None:
            if also is not None:
                also()
            with self.ctx.phases.measure("worker_generate.parent"):
                mine["inputs"] = [self.ctx.task.generate_input(s, self.ctx.device) for s in specs]
                mine["fingerprints"] = protocol.input_fingerprints(mine["inputs"])

        theirs = self.session.generate(specs, deadline, keep, meanwhile=generate_here)
        if theirs != mine["fingerprints"]:
            raise WorkerFailure(ERROR, DIFFERENT_INPUTS)
        return mine["inputs"], list(range(keep, keep + len(specs)))

    def one(
        self, what: str, i: int, cases: list[dict[str, Any]], deadline: float, fresh: bool = False
    ) -> tuple[dict[str, Any], str, Any, int]:
        """Case ``i`` of ``cases``: its spec, a progress label, the parent's input and the worker's slot.
        ``fresh``: the input's seed derives from the secret (ranked tests), else the case's public seed."""
        spec = self.ctx.case_spec(cases[i])
        label = f"{what} {i + 1}/{len(cases)} {fmt_spec(spec)}"
        self.ctx.progress(label)
        [spec] = self.specs(spec, TEST_INDEX if fresh else 0, 1, fresh=fresh)
        [data], [item] = self.make([spec], deadline)
        return spec, label, data, item
