"""The run's worker: one :class:`Supervisor` at a time, started, asked, checked for tampering on every
reply, replaced after it broke its CUDA context, and stopped."""
from __future__ import annotations

import math

from harness.engine.context import RunContext
from harness.engine.supervisor import Supervisor, WorkerFailure
from harness.results import ERROR, REJECTED
from harness.worker.main import WorkerConfig


class WorkerSession:
    def __init__(self, ctx: RunContext, config: WorkerConfig, memory_limit: int):
        self.ctx, self.config, self.memory_limit = ctx, config, memory_limit
        self.sup: Supervisor | None = None
        self.gap_ns, self.window_gap_ns = 0.0, {}   # the worker's calibration (see start)
        self.baseline_threads = None        # ranked: the worker's thread count after the first warm-up

    def start(self, deadline: float) -> None:
        """Starts a worker and keeps its calibration, sent before the submission is imported."""
        self.sup = Supervisor(self.config, self.memory_limit)
        with self.ctx.phases.measure("worker_start"):
            ready = self.sup.start(deadline) or {}
        self.gap_ns = _finite(ready.get("gap_ns")) or 0.0
        window_gap = ready.get("window_gap_ns") if isinstance(ready.get("window_gap_ns"), dict) else {}
        self.window_gap_ns = {regime: _finite(window_gap.get(regime)) for regime in ("held", "opened")}

    def request(self, phase: str, msg: dict, deadline: float, what: str):
        """(header, payloads) of the worker's reply to ``msg``; raises WorkerFailure."""
        with self.ctx.phases.measure(phase):
            return self.sup.request(msg, deadline, what)

    def load(self, deadline: float, what: str = "importing the submission") -> dict:
        header, _ = self.request("import", {"op": "load"}, deadline, what)
        return header

    def replace(self, deadline: float) -> None:
        """A new worker (re-imports the submission) so that the remaining cases still run."""
        self.sup.stop()
        self.start(deadline)
        header = self.load(deadline, "re-importing the submission")
        if not header.get("ok"):
            raise WorkerFailure(ERROR, f"the submission could not be re-imported: {header.get('error', '?')}")
        self.baseline_threads = None

    def rejection(self, header: dict) -> str | None:
        """A reason to reject, from the worker's own integrity report and the parent's process count."""
        if not self.ctx.opt.defenses:
            return None
        if header.get("tampered"):
            return ("the submission replaced harness or torch objects it must leave alone: "
                    + ", ".join(header["tampered"]))
        if self.ctx.ranked and self.baseline_threads is not None:
            if header.get("threads", 0) > self.baseline_threads:
                return (f"the submission leaves {header['threads'] - self.baseline_threads} Python thread(s) "
                        "running during timed calls; ranked runs allow no background work")
            children = len(self.sup.strays()) if self.sup else 0   # counted here: the worker could lie
            if children > 0:
                return (f"the submission leaves {children} child process(es) running during timed "
                        "calls; ranked runs allow no background work")
        return None

    def generate(self, specs: list, deadline: float, keep: int = 0) -> list:
        """Has the worker generate the inputs of ``specs`` (keeping its first ``keep`` slots) and returns
        their fingerprints; a rejection or an error ends the case."""
        header, _ = self.request("worker_generate", {"op": "generate", "specs": specs, "keep": keep}, deadline,
                                 "generating inputs in the worker")
        reason = self.rejection(header)
        if reason:
            raise WorkerFailure(REJECTED, reason)
        if not header.get("ok"):
            raise WorkerFailure(ERROR, f"could not generate the inputs in the worker: {header.get('error')}")
        return header.get("fingerprints")

    def sync(self, deadline: float) -> None:
        """One last exchange: a reply the submission forged earlier leaves the real one queued, and it
        arrives here out of sequence (Supervisor.request rejects)."""
        if self.generate([], deadline) != []:
            raise WorkerFailure(ERROR, _DIFFERENT_INPUTS)

    def stop(self) -> tuple[str, str] | None:
        """Stops the worker; its captured (stdout, stderr), or None when none was started."""
        if self.sup is None:
            return None
        with self.ctx.phases.measure("worker_stop"):
            self.sup.stop()
        return self.sup.captured_output()


_DIFFERENT_INPUTS = ("the inputs the worker generated differ from the harness's own for the same seeds: the "
                     "task's generate_input must depend only on its seed (draw from a torch.Generator seeded "
                     "with it), or the submission changed them")


def _finite(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None
