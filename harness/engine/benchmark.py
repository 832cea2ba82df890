"""One benchmark case: warm-up, chunks of timed calls until the :class:`StopRule` is met (every timed
output checked), then the timing checks, the clocks and the kernel-only figure.

In ranked runs the check of a chunk waits for the next untimed request the worker is busy with, and
runs meanwhile (nothing is timed then): the next chunk's lead-in warm-up calls (``warmup.check``), else
its input generation (``worker_generate.check``); the check of a case's last chunk waits for the next
case's first chunk the same way (``run_case(defer_check=True)``, in blocks). Either way it runs before
the next timed call, and no untimed call sees the inputs that call times (those reach the worker after
the lead-in). A check that then fails ends the case, or the block, as it would have at once: no timed
call follows it, the failed case's result is the one an immediate check would have made (returned, or
from ``settle``), and a next case that was starting takes no part (:class:`EarlierCaseFailed`)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness import protocol
from harness.analysis import plausibility
from harness.engine.checks import Checker
from harness.engine.clocks import ClockReader, clock_warnings
from harness.engine.context import RunContext, fmt_spec
from harness.engine.inputs import WARMUP_INDEX, Inputs
from harness.engine.kernel_only import KernelOnly
from harness.engine.options import lead_in_ms
from harness.engine.session import WorkerSession
from harness.engine.stop_rule import StopRule
from harness.engine.timing_checks import TimingJudge
from harness.engine.verdicts import end_case
from harness.extras import Clocks
from harness.messages import Timed, WarmedUp
from harness.requests import Time, Warmup
from harness.results import FAIL, PASS, CaseResult

PER_CALL_CHUNK = 10  # GPU, per-call protocol: timed calls per chunk (one request, one reply, one check)
BLOCK_WARMUP_MS = 100  # GPU: the submission's warm-up calls before a block's first case (later cases: 3 calls)
GATE_MISSED = (
    "the launch gate could not close for some samples (the GPU was busy); those samples include the host's launch time"
)


BLOCK_STRIDE = 1 << 32  # block b's inputs use seed indices from b * BLOCK_STRIDE on (below WARMUP_INDEX)


def lead_in_due(policy: str, first_chunk: bool, first_case: bool) -> bool:
    """Whether a chunk of timed calls on a GPU gets the lead-in (the submission's own warm-up calls, then
    the harness's heat, ``harness.engine.options.lead_in_ms`` each) under ``RunOptions.lead_in``: "short" (the default)
    and "chunk" before every chunk, 5 and 20 ms of each; "case" before each case's first chunk; "block"
    before the first chunk of a block's first case. The others are measured against "chunk" by
    ``bench/lead_in.py``: what the lead-in buys is a clock and cache state that a gap between chunks (the
    parent's checks and the next inputs) might have lost; "chunk" costs 40 ms a chunk (10 s of a ranked
    triton_nvfp4 verdict), "short" a quarter of that, and neither moved a score measurably (docs/measurement.md)."""
    if policy in ("chunk", "short"):
        return True
    return first_chunk and (policy == "case" or first_case)


class EarlierCaseFailed(Exception):
    """The deferred check of the case before failed while this one prepared its timed inputs: this one
    stops before its timed calls (``BenchmarkLoop.settle`` has the failed case)."""


@dataclass
class _Deferred:
    """A case's last chunk whose check waits for the next case's first timed inputs."""

    index: int
    check: Callable[[str], str | None]  # the check (timed as the phase given): the failure's message, or None
    as_failed: Callable[[str], CaseResult]  # the case's result had that check failed at once


@dataclass
class _Case:
    """What one benchmark case of one block needs while it is timed."""

    index: int
    spec: dict
    label: str
    per_call: bool
    batch: int
    result: CaseResult
    offset: int  # the block's first seed index
    fixed: list | None = None  # unranked: the one input reused for every sample (parent's copy)
    fixed_items: list | None = None  # and its worker slots


class BenchmarkLoop:
    def __init__(self, ctx: RunContext, session: WorkerSession, inputs: Inputs, checker: Checker) -> None:
        self.ctx, self.session, self.inputs, self.checker = ctx, session, inputs, checker
        self.stop_rule = StopRule.from_options(ctx.opt, ctx.gpu, ctx.ranked)
        self.judge = TimingJudge(ctx, session)
        self.kernel_only = KernelOnly(ctx, session)
        self.clocks = ClockReader(ctx.device) if ctx.gpu else None
        self.deferred: _Deferred | None = None
        self._failed: tuple[int, CaseResult] | None = None  # a deferred check that failed

    def close(self) -> None:
        if self.clocks is not None:
            self.clocks.close()

    def use_blocks(self, blocks: int) -> None:
        """Each case of each of ``blocks`` blocks takes its share of the stop rule (see StopRule.for_blocks)."""
        self.stop_rule = StopRule.from_options(self.ctx.opt, self.ctx.gpu, self.ctx.ranked).for_blocks(blocks)
        self.judge.noise_per_case = blocks == 1

    def run_case(
        self,
        i: int,
        case: dict,
        deadline: float,
        block: int = 0,
        kernel_only: bool = True,
        first: bool = True,
        defer_check: bool = False,
    ) -> CaseResult:
        """Benchmark case ``i`` in block ``block`` (its inputs' seeds start at ``block * BLOCK_STRIDE``);
        ``kernel_only``: also measure the kernel-only figure (the last block does); ``first``: the block's
        first case, whose warm-up brings the clocks up (later cases follow busy ones); ``defer_check``
        (ranked): the last chunk's check waits for the next case (module docstring), and the caller
        calls :meth:`settle` before it uses the result. Raises :class:`EarlierCaseFailed`."""
        c = self._plan(i, case, block)
        ended = self._warm_up(c, deadline, BLOCK_WARMUP_MS if first and self.ctx.gpu else 0)
        if ended is not None:
            return ended
        return self._time(c, deadline, kernel_only, defer_check and self.ctx.ranked, first)

    def settle(self) -> tuple[int, CaseResult] | None:
        """Runs the deferred check, if any; (the case's index, its failed result) when a deferred check
        failed, else None."""
        self._run_deferred("check")
        failed, self._failed = self._failed, None
        return failed

    def _run_deferred(self, phase: str) -> None:
        deferred, self.deferred = self.deferred, None
        if deferred is None:
            return
        message = deferred.check(phase)
        if message is not None:
            self._failed = (deferred.index, deferred.as_failed(message))

    def _plan(self, i: int, case: dict, block: int) -> _Case:
        ctx, task = self.ctx, self.ctx.task
        spec = ctx.case_spec(case)
        label = f"benchmark {i + 1}/{len(task.benchmarks)} {fmt_spec(spec)}"
        if block:
            label += f" (block {block + 1})"
        ctx.progress(label)
        per_call = task.timing_protocol == "per_call"
        result = CaseResult(ctx.timed_kind, spec, PASS, baseline_us=task.baseline_for(case))
        batch = 1 if per_call else task.inputs_per_measurement
        if not ctx.gpu and batch > ctx.opt.cpu_inputs_per_measurement:
            batch = ctx.opt.cpu_inputs_per_measurement
            result.warnings.append(
                f"CPU run: {batch} inputs per measurement instead of the task's {task.inputs_per_measurement}"
            )
        return _Case(i, spec, label, per_call, batch, result, block * BLOCK_STRIDE)

    def _warm_up(self, c: _Case, deadline: float, min_ms: int) -> CaseResult | None:
        """Warm-up calls (at least 3 on a GPU, and ``min_ms``) compile the shape's kernels and bring the
        clocks up before the timed calls; the ended case when the reply ends it. In ranked runs they use
        an input of their own (slot 0), never one that is timed afterwards; unranked runs reuse one fixed
        set of inputs for every sample of the case."""
        ranked = self.ctx.ranked
        if ranked:
            _, [data] = self.inputs.make(self.inputs.specs(c.spec, WARMUP_INDEX + c.offset, 1), deadline)
        else:
            c.fixed, c.fixed_items = self.inputs.make(self.inputs.specs(c.spec, c.offset, c.batch), deadline)
            data = 0
        with self.ctx.phases.measure("timing.warm_up_calls"):  # a fresh worker's first calls of the shape among them
            reply = self.session.request(
                "timing",
                Warmup(data=data, min_calls=3 if self.ctx.gpu else 1, min_ms=min_ms),
                deadline,
                f"warming up {c.label}",
                WarmedUp,
            )
        if ranked and self.session.baseline_threads is None:
            self.session.baseline_threads = reply.integrity.threads
        reason = self.session.rejection(reply)
        return end_case(c.result, reply, reason) if not reply.ok or reason else None

    def _chunk_inputs(self, c: _Case, index: int, deadline: float) -> tuple[list, list, list[int]]:
        """(the parent's inputs of the next chunk of timed calls, the worker's items that name them, which
        outputs come back): ranked, fresh ones that both sides generate (the worker's in the slots after
        0, the warm-up input's); unranked, the case's fixed ones again (only the last output comes back)."""
        k = self._chunk_size(c, index)
        if self.ctx.ranked:
            specs = self.inputs.specs(c.spec, c.offset + index, k)
            also = (lambda: self._run_deferred("worker_generate.check")) if self.deferred else None
            privates, items = self.inputs.make(specs, deadline, keep=1, also=also)
            return privates, items, list(range(k))
        repeat = k // len(c.fixed or [None])  # per call: the one fixed input k times; batched: the batch once
        return (c.fixed or []) * repeat, (c.fixed_items or []) * repeat, [k - 1]

    def _lead_in_due(self, first_chunk: bool, first_case: bool) -> bool:
        """Whether the next chunk gets the lead-in: on a GPU, as ``RunOptions.lead_in`` says."""
        return self.ctx.gpu and lead_in_due(self.ctx.opt.lead_in, first_chunk, first_case)

    def _chunk_warm_up(self, c: _Case, deadline: float, samples: list) -> CaseResult | None:
        """Before each chunk that gets the lead-in (:func:`lead_in_due`), in both modes alike (so ranked
        and unranked times compare): the submission's own warm-up calls on an input that is not timed
        next (ranked: before the timed inputs reach the worker, so untimed code never sees them)."""
        reply = self.session.request(
            "warmup",
            Warmup(data=0, min_calls=1, min_ms=lead_in_ms(self.ctx.opt.lead_in)),
            deadline,
            f"warming up {c.label}",
            WarmedUp,
            meanwhile=(lambda: self._run_deferred("warmup.check")) if self.deferred else None,
        )
        reason = self.session.rejection(reply)
        return end_case(c.result, reply, reason, samples) if not reply.ok or reason else None

    def _deferred_failure(self, c: _Case) -> CaseResult | None:
        """After a request during which a deferred check may have run: this case's result when the check
        of one of its own chunks failed (the one an immediate check would have made); raises
        :class:`EarlierCaseFailed` when the check of the case before failed."""
        if self._failed is None:
            return None
        index, result = self._failed
        if index != c.index:
            raise EarlierCaseFailed()
        self._failed = None
        return result

    def _time(
        self, c: _Case, deadline: float, kernel_only: bool, defer: bool = False, first_case: bool = True
    ) -> CaseResult:
        series: dict[str, list] = {k: [] for k in protocol.TIMING_SERIES}
        samples, started, index = series["samples_ns"], time.monotonic(), 0
        passed_fixed: list = []
        clocks = Clocks(before=self._read_clocks())
        c.result.record(clocks)
        items: list = []
        ended = self._warm_up_chunks(c, deadline)
        if ended is not None:
            return ended
        while True:
            lead_in = self._lead_in_due(index == 0, first_case)
            prepared = self._prepare_chunk(c, index, deadline, samples, lead_in)
            if isinstance(prepared, CaseResult):
                return prepared
            privates, items, returned = prepared
            index += len(privates)
            reply = self._timed_chunk(c, items, returned, deadline, heat=lead_in)
            reason = self.session.rejection(reply)
            if not reply.ok or reason:
                return end_case(c.result, reply, reason, samples)
            outputs = self.checker.outputs(reply.outputs)
            stop = self.stop_rule.should_stop(samples + reply.samples_ns, time.monotonic() - started)
            check = self._checker(privates, outputs, returned, len(samples), passed_fixed)
            if self.ctx.ranked and (defer or not stop):  # checked during the next untimed request
                self.deferred = self._defer(c, check, samples + reply.samples_ns, series)
            elif self._failed_now(c, check):
                return self.judge.finish(c.result, samples + reply.samples_ns, series, c.batch)
            for key, values in series.items():
                values += getattr(reply, key)
            self._note_gate_misses(reply)
            if stop:
                break
        clocks.after = self._read_clocks()
        c.result.record(clocks)
        kernel_items = [0] if c.per_call else items
        return self._after_timing(c.result, samples, series, c.batch, kernel_items if kernel_only else None, deadline)

    def _prepare_chunk(
        self, c: _Case, index: int, deadline: float, samples: list, lead_in: bool
    ) -> tuple[list, list, list[int]] | CaseResult:
        """The lead-in (when due), then the next chunk's inputs (``_chunk_inputs``); the ended case when
        the lead-in ended it, or when the deferred check of the chunk before, run meanwhile, failed (that
        outranks what the lead-in did)."""
        ended = self._chunk_warm_up(c, deadline, samples) if lead_in else None
        failed = self._deferred_failure(c)
        if failed is not None:
            return failed
        if ended is not None:
            return ended
        chunk = self._chunk_inputs(c, index, deadline)
        failed = self._deferred_failure(c)
        return chunk if failed is None else failed

    def _warm_up_chunks(self, c: _Case, deadline: float) -> CaseResult | None:
        """Ranked, with --warmup-chunks N: N chunks timed exactly like the first timed one but on fresh
        inputs of their own (warm-up seeds, generated by the worker alone: nothing of them is checked or
        kept), so that whatever makes a fresh worker's first timed chunks of a shape slower (bench/noise.py's
        first_sample_excess) happens before the timed chunks of every block, not in them; the ended case
        when a reply ends it."""
        if not self.ctx.ranked:
            return None
        k = self._chunk_size(c, 0)
        for j in range(self.ctx.opt.warmup_chunks):
            specs = self.inputs.specs(c.spec, WARMUP_INDEX + c.offset + 1 + j * k, k)
            self.session.generate(specs, deadline, keep=1)  # slot 0 stays: the warm-up input
            reply = self._timed_chunk(c, list(range(1, k + 1)), [], deadline, phase="warmup")
            reason = self.session.rejection(reply)
            if not reply.ok or reason:
                return end_case(c.result, reply, reason)
        return None

    def _chunk_size(self, c: _Case, index: int) -> int:
        """How many inputs the chunk of timed calls from sample ``index`` on takes."""
        return min(PER_CALL_CHUNK if self.ctx.gpu else 1, self.stop_rule.max_samples - index) if c.per_call else c.batch

    def _timed_chunk(
        self, c: _Case, items: list, returned: list[int], deadline: float, phase: str = "timing", heat: bool = True
    ) -> Any:
        """Right before timing, the worker runs the harness's own GPU work to hold the clocks up (``heat``,
        on a GPU) and reads each timed input (see worker.sampler); then the timed calls. Where the worker
        says its time went becomes sub-phases of ``phase`` (``timing.calls``, ...)."""
        reply = self.session.request(
            phase,
            Time(
                protocol=self.ctx.task.timing_protocol,
                inputs=items,
                returned=returned,
                heat_ms=lead_in_ms(self.ctx.opt.lead_in) if self.ctx.gpu and heat else 0,
                touch=self.ctx.gpu,
            ),
            deadline,
            f"timing {c.label}",
            Timed,
            n_samples=len(items) if c.per_call else 1,
            n_outputs=len(returned),
        )
        for step, seconds in getattr(reply, "steps_s", {}).items():
            self.ctx.phases.add(f"{phase}.{step}", seconds)
        return reply

    def _checker(
        self, privates: list, outputs: list, returned: list[int], before: int, passed_fixed: list
    ) -> Callable[[str], str | None]:
        """The check of a chunk's returned ``outputs`` (``before``: the case's samples before the chunk),
        its time counted as the phase it is given: the message of the first wrong one, or None."""

        def check(phase: str) -> str | None:
            if self.ctx.ranked:  # fresh inputs: every output against its own reference, read back together
                verdicts = self.checker.check_all([(privates[idx], out) for idx, out in zip(returned, outputs)], phase)
            else:
                verdicts = [
                    self.checker.check_fixed(privates[idx], out, passed_fixed) for idx, out in zip(returned, outputs)
                ]
            for idx, (ok, message) in zip(returned, verdicts):
                if not ok:
                    return f"timed call {before + 1 + idx}: {message}"
            return None

        return check

    @staticmethod
    def _failed_now(c: _Case, check: Callable[[str], str | None]) -> bool:
        """Checks a chunk now; True (the case failed, its message set) at the first wrong output."""
        message = check("check")
        if message is not None:
            c.result.verdict, c.result.message = FAIL, message
        return message is not None

    def _note_gate_misses(self, reply: Any) -> None:
        if reply.gate_misses and GATE_MISSED not in self.ctx.warnings:
            self.ctx.warnings.append(GATE_MISSED)

    def _defer(self, c: _Case, check: Callable[[str], str | None], samples: list, series: dict) -> _Deferred:
        """The case's last chunk, checked later; what the case would have been, had that check failed
        now: its result as it stands (before the chunk is judged), failed, judged on every sample and
        on the series before the chunk, as the immediate check's failure does."""
        before = copy.deepcopy(c.result)
        series_before = {k: list(v) for k, v in series.items()}

        def as_failed(message: str) -> CaseResult:
            before.verdict, before.message = FAIL, message
            return self.judge.finish(before, samples, series_before, c.batch)

        return _Deferred(c.index, check, as_failed)

    def _after_timing(
        self, result: CaseResult, samples: list, series: dict, batch: int, kernel_items: list | None, deadline: float
    ) -> CaseResult:
        result = self.judge.finish(result, samples, series, batch)
        if result.verdict == PASS:
            clocks = result.clocks
            if clocks is not None:
                result.warnings += clock_warnings(clocks.before, clocks.after or {})
            if kernel_items is None:
                return result
            figures, check = self.kernel_only.measure(result, kernel_items, deadline)
            figures.unhidden_host_ns = plausibility.median_measured(series["unhidden_host_ns"])
            result.record(figures, *([check] if check else []))
            result.warnings += plausibility.host_bound_warnings(figures.unhidden_host_ns, figures.ns)
        return result

    def read_clocks(self) -> dict:
        return self._read_clocks()

    def _read_clocks(self) -> dict:
        if self.clocks is None:
            return {"note": "not available on CPU"}
        with self.ctx.phases.measure("clocks"):
            return self.clocks.read()
