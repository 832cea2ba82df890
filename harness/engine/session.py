"""The run's worker: one :class:`Supervisor` at a time (and the next one, held before its first GPU work,
while it is replaced), started, asked, checked for tampering on every reply, replaced after it broke its
CUDA context or for a new block, and stopped."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness import protocol
from harness.engine import verdicts
from harness.engine.context import RunContext
from harness.engine.deadlines import CallDeadlines, first_call_budget
from harness.engine.pool import WorkerPool, shared_pool
from harness.engine.sandbox import report_warning
from harness.engine.supervisor import Siblings, Supervisor, WorkerFailure
from harness.messages import Failed, Generated, Loaded, OutputsShared, Ready, decode_reply
from harness.protocol import ProtocolError
from harness.requests import HELD_STEP, Generate, Load, Request, ShareOutputs
from harness.results import ERROR, REJECTED, TIMEOUT
from harness.shared_outputs import SharedOutputs
from harness.worker import persisting_l2
from harness.worker.config import WorkerConfig

if TYPE_CHECKING:
    import torch

MIB = 1 << 20
SHARED_MIN_BYTES = 16 * MIB  # a worker's output region at first (a ranked mxfp4_mm chunk's 10 outputs: 16 MB)
SHARED_MAX_BYTES = 256 * MIB  # and at most (a batched nvfp4_gemm reply: 92 MB); more comes as frames
HELD_WAIT_S = 24 * 3600.0  # a held worker waits this long at most (HeldStart.finish bounds the wait)
HELD_STOP_GRACE_S = 10.0  # how long a cancelled start's thread gets to see its worker killed


class WorkerSession:
    def __init__(self, ctx: RunContext, config: WorkerConfig, memory_limit: int):
        self.ctx, self.config, self.memory_limit = ctx, config, memory_limit
        self.sup: Supervisor | None = None
        self._retiring: Supervisor | None = None  # the worker renew() replaces, until it is stopped
        self.gap_ns, self.window_gap_ns = 0.0, dict[str, float]()  # the worker's calibration (see start)
        self.baseline_threads: int | None = None  # ranked: the worker's thread count after the first warm-up
        self.sandbox: dict[str, Any] | None = None  # what confined the worker (RunResult.sandbox)
        self.reply_bytes = 0  # the most output bytes one reply carried so far (sizes the next worker's region)
        self.siblings: Siblings | None = None  # workers that start beside this one (harness.engine.compile_ahead)
        self._next: HeldStart | None = None  # the next worker, started and held (start_next_ahead, renew)
        # per-call limits inside the task's timeout
        outer = verdicts.first_timeout(ctx.task, ctx.mode, ctx.ranked)
        self.deadlines = CallDeadlines(ctx.opt.timeout_scale, first_call_budget(ctx.gpu, outer))

    @property
    def starts_ahead(self) -> bool:
        """Whether each block's fresh worker starts ahead (``RunOptions.start_ahead``: auto is on a GPU)."""
        policy = self.ctx.opt.start_ahead
        return policy == "on" or (policy == "auto" and self.ctx.gpu)

    def start(self, deadline: float) -> None:
        """Starts a worker and keeps its calibration, sent before the submission is imported."""
        self.sup = Supervisor(
            self.config, self.memory_limit, frames_device=self.ctx.device, siblings=self.siblings or Siblings()
        )
        self.deadlines.restart()
        with self.ctx.phases.measure("worker_start"):
            header, payloads = self.sup.start(deadline, shared_pool(interpret=not self.ctx.gpu))
        self._started(header, payloads, deadline)

    def start_next_ahead(self) -> None:
        """Starts the worker that the next :meth:`renew` will put in place of this one, now, in a thread of
        its own (:class:`HeldStart`): it is forked and confined and makes its CUDA context while this one
        goes on (times, with ``--start-ahead``), then waits; :meth:`renew` lets it launch its first GPU work
        (the launch gate, the calibration) only once this one is reaped. Does nothing when one is ahead
        already."""
        if self._next is None:
            self._next = self._held_start(during_block=True)

    def _held_start(self, during_block: bool) -> HeldStart:
        """The next worker, started now in a thread of its own; it holds before its first GPU work."""
        siblings = self._supervisor().siblings  # the current worker must not take the next for its stray
        config = dataclasses.replace(self.config, hold=True)
        sup = Supervisor(config, self.memory_limit, frames_device=self.ctx.device, siblings=siblings)
        return HeldStart(sup, shared_pool(interpret=not self.ctx.gpu), during_block)

    def _started(
        self, header: dict[str, Any], payloads: list[torch.Tensor], deadline: float, ahead: bool = False
    ) -> None:
        """Takes the new worker's first message: its calibration, the parts of its start, its sandbox.
        ``ahead``: it was started during the block before, and held; what it did before it held was then
        not on the run's path (``worker_ahead.*``)."""
        sup = self._supervisor()
        if sup.pool_warning and sup.pool_warning not in self.ctx.warnings:
            self.ctx.warnings.append(sup.pool_warning)
        ready = self._decode(header, payloads, Ready, "starting the worker", expect={}, plain=True)
        self.gap_ns, self.window_gap_ns = ready.gap_ns, dict(ready.window_gap_ns)
        steps = list(ready.startup_s.items())  # parts of worker_start, as the worker timed them, in order
        held = next((i for i, (step, _) in enumerate(steps) if step == HELD_STEP), None)
        for i, (step, seconds) in enumerate(steps):
            if step != HELD_STEP:
                ahead_step = ahead and held is not None and i < held  # done beside the last block's work
                self.ctx.phases.add(f"worker_{'ahead' if ahead_step else 'start'}.{step}", seconds)
        if sup.pool_ready_wait_s:  # a process's first worker: the pool's server was still importing
            self.ctx.phases.add("worker_start.pool_ready", sup.pool_ready_wait_s)
        # sent before the import, like the calibration: the submission cannot shape it
        self.sandbox = (
            ready.sandbox if ready.sandbox is not None else {"landlock_error": "the worker sent no sandbox report"}
        )
        self.sandbox["started_by"] = sup.started_by  # the parent's own fact, not the worker's report
        warning = report_warning(self.sandbox)
        if warning and warning not in self.ctx.warnings:
            self.ctx.warnings.append(warning)
        self._share_outputs(deadline)

    def _share_outputs(self, deadline: float) -> None:
        """Gives the new worker a region for its replies' outputs (``harness.shared_outputs``), sized to the
        largest reply so far, before any submission code runs; where none can be made or the worker cannot
        map it, the outputs come through the channel as before."""
        sup = self._supervisor()
        nbytes = min(SHARED_MAX_BYTES, -(-max(SHARED_MIN_BYTES, self.reply_bytes) // MIB) * MIB)
        region = SharedOutputs.create(nbytes, self.ctx.device)
        if region is None or region.fd is None:
            return
        fd = region.fd
        try:
            reply = self.request(
                "worker_start",
                ShareOutputs(nbytes=nbytes),
                deadline,
                "giving the worker its output region",
                OutputsShared,
                meanwhile=lambda: sup.give_descriptor(fd),
            )
        except BaseException:
            region.close()
            raise
        if reply.ok and reply.used:
            sup.use_shared(region)
        else:
            region.close()

    def request(
        self,
        phase: str,
        msg: Request,
        deadline: float,
        what: str,
        reply: type,
        meanwhile: Callable[[], None] | None = None,
        **expect: Any,
    ) -> Any:
        """The worker's reply to ``msg``, decoded as ``reply`` (a class of ``harness.messages``) or as
        :class:`Failed`; ``expect``: what the decoder checks the reply against. A malformed reply is a
        rejection; a dead or late worker a WorkerFailure too. ``meanwhile``: the parent's own work, done
        while the worker works on ``msg`` (never while it times: only for requests that time nothing)."""
        sup = self._supervisor()
        wire = msg.encode()  # what the per-call limits read (harness.engine.deadlines)
        limit = self.deadlines.limit(wire)
        own = limit is not None and time.monotonic() + limit.seconds < deadline
        t0 = time.monotonic()
        with self.ctx.phases.measure(phase):
            header, payloads = sup.request(
                msg,
                time.monotonic() + limit.seconds if own and limit else deadline,
                what,
                limit.message(what) if own and limit else None,
                meanwhile,
            )
            decoded = self._decode(header, payloads, reply, what, expect)
        self.reply_bytes = max(self.reply_bytes, sum(p.numel() for p in payloads))
        self.deadlines.record(wire, time.monotonic() - t0, getattr(decoded, "calls", None))
        return decoded

    def _supervisor(self) -> Supervisor:
        if self.sup is None:
            raise RuntimeError("WorkerSession.start() first")
        return self.sup

    @staticmethod
    def _decode(
        header: dict[str, Any],
        payloads: list[torch.Tensor],
        reply: Any,
        what: str,
        expect: dict[str, Any],
        plain: bool = False,
    ) -> Any:
        try:
            return (
                reply.decode(header, payloads, **expect) if plain else decode_reply(header, payloads, reply, **expect)
            )
        except ProtocolError as exc:
            raise WorkerFailure(
                REJECTED,
                f"a malformed reply from the worker while {what} ({exc}): the "
                "submission wrote into the harness's channel",
            ) from exc

    def load(self, deadline: float, what: str = "importing the submission") -> Loaded | Failed:
        return self.request("import", Load(), deadline, what, Loaded)

    def renew(self, deadline: float) -> None:
        """A fresh worker in place of the current one. The next one was started ahead during the block
        (:meth:`start_next_ahead`), or starts now: fork, sandbox, CUDA context, while the current one is
        asked to exit. The current one is then reaped and everything it started killed, the next one
        spared; only after that does the next one launch its first GPU work (the launch gate's check, the
        calibration), so nothing the last worker left running can skew its calibration, and none of it
        runs when the next one imports the submission (after this returns)."""
        retiring = self._retiring = self._supervisor()
        if self._next is None:
            self._next = self._held_start(during_block=False)
        retiring.retire()
        spare = (self._next.sup.pid,) if self._next.sup.pid else ()  # not yet forked: a sibling once it is
        with self.ctx.phases.measure("worker_stop"):
            retiring.stop(spare=spare)
        self._retiring = None  # only once that stop is done: a Ctrl-C inside it leaves the worker to stop()
        if retiring.siblings is not None:
            with retiring.siblings.lock:  # reaped: a later process with its id is nobody's sibling
                retiring.siblings.pids.discard(retiring.pid)
        self._take_next(deadline)
        self._supervisor().forget_gone()

    def _take_next(self, deadline: float) -> None:
        """The held worker takes the place of the one just reaped: it goes on with its start (its first
        GPU work), and its first message is taken as :meth:`start` does."""
        held, self._next = self._next, None
        assert held is not None
        self.sup = held.sup
        self.deadlines.restart()
        with self.ctx.phases.measure("worker_start"):
            header, payloads = held.finish(deadline)
        self._started(header, payloads, deadline, ahead=held.during_block)

    def replace(self, deadline: float) -> None:
        """A new worker (re-imports the submission) so that the remaining cases still run."""
        self.renew(deadline)
        reply = self.load(deadline, "re-importing the submission")
        if isinstance(reply, Failed):
            raise WorkerFailure(ERROR, f"the submission could not be re-imported: {reply.error}")
        self.baseline_threads = None

    def rejection(self, reply: Any) -> str | None:
        """A reason to reject, from the worker's own integrity report and the parent's process count."""
        if not self.ctx.opt.defenses:
            return None
        tampered, threads = reply.integrity.tampered, reply.integrity.threads
        if tampered:
            return "the submission replaced harness or torch objects it must leave alone: " + ", ".join(tampered)
        l2 = persisting_l2.reserved(reply.integrity.l2_persisting)
        if l2:
            l2 = (
                f"the submission {l2}: persisting L2 lines survive the L2 flush, so later samples read "
                "warm data (the harness resets them before every sample)"
            )
            if self.ctx.ranked:
                return l2 + "; ranked runs reject it"
            if l2 not in self.ctx.warnings:
                self.ctx.warnings.append(l2)
        if self.ctx.ranked and self.baseline_threads is not None:
            if (threads or 0) > self.baseline_threads:
                return (
                    f"the submission leaves {threads - self.baseline_threads} Python thread(s) "
                    "running during timed calls; ranked runs allow no background work"
                )
            children = len(self.sup.strays()) if self.sup else 0  # counted here: the worker could lie
            if children > 0:
                return (
                    f"the submission leaves {children} child process(es) running during timed "
                    "calls; ranked runs allow no background work"
                )
        return None

    def generate(
        self,
        specs: list[dict[str, Any]],
        deadline: float,
        keep: int = 0,
        meanwhile: Callable[[], None] | None = None,
    ) -> list[Any]:
        """Has the worker generate the inputs of ``specs`` (keeping its first ``keep`` slots) and returns
        their fingerprints; a rejection or an error ends the case. ``meanwhile``: the parent's own work
        while the worker generates (the parent's copies of the same inputs)."""
        self.deadlines.note_inputs(specs)
        reply = self.request(
            "worker_generate",
            Generate(specs=specs, keep=keep),
            deadline,
            "generating inputs in the worker",
            Generated,
            meanwhile,
            n_inputs=len(specs),
        )
        reason = self.rejection(reply)
        if reason:
            raise WorkerFailure(REJECTED, reason)
        if not reply.ok:
            raise WorkerFailure(ERROR, f"could not generate the inputs in the worker: {reply.error}")
        return reply.fingerprints

    def sync(self, deadline: float) -> None:
        """One last exchange: a reply the submission forged earlier leaves the real one queued, and it
        arrives here out of sequence (Supervisor.request rejects)."""
        if self.generate([], deadline) != []:
            raise WorkerFailure(ERROR, DIFFERENT_INPUTS)

    def output_cut_bytes(self) -> tuple[int, int]:
        """How much of the worker's (stdout, stderr) the capture left out."""
        return self._supervisor().output_cut_bytes()

    def stop(self) -> tuple[str, str] | None:
        """Stops the worker; its captured (stdout, stderr), or None when none was started."""
        if self.sup is None:
            return None
        with self.ctx.phases.measure("worker_stop"):
            if self._retiring is not None:  # a renewal cut short: the worker it was replacing
                self._retiring.stop()
                self._retiring = None
            if self._next is not None:  # started for a block that did not come, or a renewal cut short
                self._next.cancel()
                self._next = None
            self.sup.stop()
        return self.sup.captured_output()


class HeldStart:
    """A worker's :meth:`Supervisor.start` in a thread of its own, for a worker configured to hold
    (``WorkerConfig.hold``): it waits there, its CUDA context made, until :meth:`finish`.
    ``during_block``: started while the block before it was measured (``--start-ahead``)."""

    def __init__(self, sup: Supervisor, pool: WorkerPool | None, during_block: bool):
        self.sup, self.during_block = sup, during_block
        self._first: protocol.Message | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._start, args=(pool,), name="worker-held", daemon=True)
        self._thread.start()

    def _start(self, pool: WorkerPool | None) -> None:
        try:
            self._first = self.sup.start(time.monotonic() + HELD_WAIT_S, pool)
        except BaseException as exc:  # taken up by finish()
            self._failure = exc

    def finish(self, deadline: float) -> protocol.Message:
        """Lets the worker go on and returns its first message; the start's failure, or a timeout at
        ``deadline`` (the worker then killed), as :meth:`Supervisor.start` would raise them."""
        self.sup.proceed()
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self.cancel()
            raise WorkerFailure(
                TIMEOUT,
                "timed out while starting the worker: the task's time limit for this mode ran out",
            )
        if self._failure is not None:
            raise self._failure
        assert self._first is not None
        return self._first

    def cancel(self) -> None:
        """Stops the worker (and the start's thread, which then sees it gone)."""
        self.sup.stop()
        self._thread.join(HELD_STOP_GRACE_S)
        self.sup.stop()  # a start that was forking above has its worker now


DIFFERENT_INPUTS = (
    "the inputs the worker generated differ from the harness's own for the same seeds: the "
    "task's generate_input must depend only on its seed (draw from a torch.Generator seeded "
    "with it), or the submission changed them"
)
