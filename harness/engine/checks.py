"""Checking what the worker sends back: outputs rebuilt from their decoded reply (``harness.messages``)
and judged by the task's ``check_implementation``."""

from __future__ import annotations

from typing import Any

import torch

from harness.engine.context import RunContext
from harness.engine.supervisor import WorkerFailure
from harness.messages import Output
from harness.protocol import ProtocolError, rebuild_tensor
from harness.results import REJECTED


class Unusable:
    """An output the harness cannot check as a tensor; ``what`` describes it."""

    def __init__(self, what: str):
        self.what = what

    def verdict(self) -> tuple[bool, str]:
        """Its check's verdict: failed, with what it was."""
        return False, f"custom_kernel returned {self.what}"


class Checker:
    def __init__(self, ctx: RunContext):
        self.ctx = ctx

    def outputs(self, outputs: list[Output]) -> list[Any]:
        """The outputs rebuilt here: a tensor, or an :class:`Unusable` (a wrong output) for an object or
        a tensor of a dtype no task uses."""
        with self.ctx.phases.measure("receive"):
            return [self._rebuild(out) for out in outputs]

    def _rebuild(self, out: Output) -> torch.Tensor | Unusable:
        if out.kind != "tensor":
            return Unusable(f"a {out.type}, not a torch.Tensor")
        if not out.usable or out.raw is None:
            return Unusable(f"a torch.Tensor of dtype {out.dtype}, which is no task's output dtype")
        try:
            return rebuild_tensor(out.dtype, out.shape, out.raw, out.device, self.ctx.device)
        except ProtocolError as exc:
            raise WorkerFailure(
                REJECTED,
                f"a malformed output in the worker's reply ({exc}): the submission wrote into the harness's channel",
            ) from exc

    def check(self, data: Any, out: Any, phase: str = "check") -> tuple[bool, str]:
        """The task's verdict on ``out``, its time counted as ``phase`` (a deferred check's is a part of
        the request it overlaps: ``warmup.check``, ``worker_generate.check``)."""
        if isinstance(out, Unusable):
            return out.verdict()
        with self.ctx.phases.measure(phase):
            return self.ctx.task.check(data, out)

    def check_all(self, pairs: list[tuple[Any, Any]], phase: str = "check") -> list[tuple[bool, str]]:
        """:meth:`check` of each (data, output) pair, the task's checks read back together
        (``tasks.registry.Task.check_all``)."""
        with self.ctx.phases.measure(phase):
            verdicts = iter(self.ctx.task.check_all([(d, o) for d, o in pairs if not isinstance(o, Unusable)]))
        return [o.verdict() if isinstance(o, Unusable) else next(verdicts) for _, o in pairs]

    def check_fixed(self, data: Any, out: Any, passed: list[torch.Tensor]) -> tuple[bool, str]:
        """Benchmark mode re-checks the same fixed input every chunk: an output bit-identical to one
        that already passed on that input passes without recomputing the reference."""
        if (
            passed
            and isinstance(out, torch.Tensor)
            and out.dtype == passed[0].dtype
            and out.shape == passed[0].shape
            and torch.equal(out, passed[0])
        ):
            return True, ""
        ok, message = self.check(data, out)
        if ok and isinstance(out, torch.Tensor):
            passed[:] = [out]
        return ok, message
