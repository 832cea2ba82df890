"""The run's inputs: seeds (the public seed, or in ranked runs derived from the secret), the parent's
own copy of each input, and the worker's copy, generated in the worker from the same seed and proved
equal by fingerprints."""

from __future__ import annotations

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

    def generate(
        self, spec: dict[str, Any], index: int, count: int, fresh: bool | None = None
    ) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
        """``count`` inputs from index ``index`` on, as (their specs with seeds, the inputs): seeds derived
        from the secret in ranked runs (``fresh``), else from the public seed (index 0: the case's own)."""
        specs = self.specs(spec, index, count, fresh)
        with self.ctx.phases.measure("generate"):
            return specs, [self.ctx.task.generate_input(s, self.ctx.device) for s in specs]

    def specs(self, spec: dict[str, Any], index: int, count: int, fresh: bool | None = None) -> list[dict[str, Any]]:
        """The specs with seeds of ``count`` inputs from index ``index`` on (see :meth:`generate`), without
        generating them here."""
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

    def place(self, specs: list[dict[str, Any]], privates: list[Any], deadline: float, keep: int = 0) -> list[int]:
        """Has the worker generate its own copies of ``privates`` from their ``specs`` (the parent keeps
        the originals for checking) and returns the slot numbers that later messages name them by; the
        worker's first ``keep`` slots stay. The copies must match the originals' fingerprints."""
        theirs = self.session.generate(specs, deadline, keep)
        with self.ctx.phases.measure("generate"):
            mine = [protocol.input_fingerprint(d) for d in privates]
        if theirs != mine:
            raise WorkerFailure(ERROR, DIFFERENT_INPUTS)
        return list(range(keep, keep + len(privates)))

    def one(
        self, what: str, i: int, cases: list[dict[str, Any]], deadline: float, fresh: bool = False
    ) -> tuple[dict[str, Any], str, Any, int]:
        """Case ``i`` of ``cases``: its spec, a progress label, the parent's input and the worker's slot.
        ``fresh``: the input's seed derives from the secret (ranked tests), else the case's public seed."""
        spec = self.ctx.case_spec(cases[i])
        label = f"{what} {i + 1}/{len(cases)} {fmt_spec(spec)}"
        self.ctx.progress(label)
        [spec], [data] = self.generate(spec, TEST_INDEX if fresh else 0, 1, fresh=fresh)
        [item] = self.place([spec], [data], deadline)
        return spec, label, data, item
