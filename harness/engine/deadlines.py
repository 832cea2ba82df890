"""A hang ended in seconds: the limit of each request that runs the submission's code, derived from the
calls already seen, inside the task's own timeout (which stays the outer bound).

- The first request on a shape not seen before may compile (Triton, torch.compile, a cache miss): it
  gets ``FIRST_CALL_S`` on a GPU (a file that compiles for longer can compile at import, which has
  only the task's timeout); on the CPU, where one call of a real task's shape can take a minute
  (Triton's interpreter), a third of the task's timeout when that is more (:func:`first_call_budget`).
- Later requests get ``FACTOR`` times the slowest time per call seen so far (on requests that were not
  a shape's first) times the calls the request makes, and at least ``FLOOR_S``.
All three scale with ``--timeout-scale``. A request that runs past its limit ends the worker (killed,
its GPU freed) with the verdict ``timeout`` and a message naming the limit and how to raise it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

FIRST_CALL_S = 20.0  # the first request on a new shape (compilation included)
FLOOR_S = 5.0  # no derived limit is shorter (host hiccups, a loaded machine)
FACTOR = 10.0  # times the slowest time per call seen so far
# the requests that run the submission's code; profile and kernel_only (graph capture, the profiler)
# come after the same calls passed and keep the task's timeout alone, so no slow capture is cut short
LIMITED_OPS = ("call", "warmup", "time")


@dataclass(frozen=True)
class CallLimit:
    """A request's limit: ``seconds`` from when it is sent, and why that much (for the message)."""

    seconds: float
    reason: str

    def message(self, what: str) -> str:
        return (
            f"timed out while {what}: the request ran past its per-call limit of {self.seconds:.1f} s "
            f"({self.reason}); a submission that is only slow can raise every limit with --timeout-scale "
            "(the task's own timeout stays the outer bound)"
        )


def calls_in(msg: dict[str, Any]) -> int:
    """How many calls of the submission a request makes, at least (its limit scales with it)."""
    op = msg.get("op")
    if op == "time":
        return max(1, len(msg.get("inputs", ())))
    if op == "warmup":
        return max(1, int(msg.get("min_calls", 1)))
    return 1


def _fixed_seconds(msg: dict[str, Any]) -> float:
    """Time a request takes whatever the calls cost (a warm-up's minimum, the sampler's heating)."""
    return (float(msg.get("min_ms", 0)) + float(msg.get("heat_ms", 0))) / 1000


def shape_key(spec: dict[str, Any]) -> str:
    """A case's shape: its spec without the seed."""
    return json.dumps({k: v for k, v in spec.items() if k != "seed"}, sort_keys=True, default=str)


def first_call_budget(gpu: bool, task_timeout_s: float) -> float:
    """Seconds (before --timeout-scale) for the first request on a shape."""
    return FIRST_CALL_S if gpu else max(FIRST_CALL_S, task_timeout_s / 3)


class CallDeadlines:
    """Per-request limits for one worker session; :meth:`note_inputs` on every generate request,
    :meth:`limit` before and :meth:`record` after each request."""

    def __init__(self, scale: float = 1.0, first_call_s: float = FIRST_CALL_S):
        self.scale, self.first_call_s = scale, first_call_s
        self.per_call_s: float | None = None  # slowest seconds per call on a request that was not a first
        self.shapes: set[str] = set()
        self.new_shape = True  # the next limited request is the first on a shape (or after a new worker)

    def note_inputs(self, specs: list[dict[str, Any]]) -> None:
        keys = {shape_key(s) for s in specs}
        if keys - self.shapes:
            self.new_shape = True
            self.shapes |= keys

    def restart(self) -> None:
        """A new worker: its first request imports and may compile again."""
        self.new_shape = True

    def limit(self, msg: dict[str, Any]) -> CallLimit | None:
        if msg.get("op") not in LIMITED_OPS:
            return None
        fixed = _fixed_seconds(msg)
        if self.new_shape or self.per_call_s is None:
            first = self.first_call_s * self.scale
            return CallLimit(
                first + fixed,
                f"the first call on a shape may take {first:.0f} s, compilation included; a file that "
                "compiles for longer can compile when it is imported",
            )
        derived = FACTOR * self.per_call_s * calls_in(msg) * self.scale
        floor = FLOOR_S * self.scale
        return CallLimit(
            max(floor, derived) + fixed,
            f"{FACTOR:.0f}x the slowest call so far ({self.per_call_s * 1e3:.1f} ms a call, "
            f"{calls_in(msg)} call(s)), at least {floor:.0f} s",
        )

    def record(self, msg: dict[str, Any], seconds: float, calls: int | None = None) -> None:
        """A request that finished in ``seconds`` (``calls``: how many it really made, when it says)."""
        if msg.get("op") not in LIMITED_OPS:
            return
        if self.new_shape:  # it may have compiled: not a measure of what a call costs
            self.new_shape = False
            return
        per_call = max(0.0, seconds - _fixed_seconds(msg)) / max(1, calls or calls_in(msg))
        self.per_call_s = per_call if self.per_call_s is None else max(self.per_call_s, per_call)
