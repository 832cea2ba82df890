"""One benchmark case: warm-up, chunks of timed calls until the :class:`StopRule` is met (every timed
output checked), then the timing checks, the clocks and the kernel-only figure."""

from __future__ import annotations

import time

from harness import protocol
from harness.analysis import plausibility
from harness.engine.checks import Checker
from harness.engine.clocks import ClockReader, clock_warnings
from harness.engine.context import RunContext, fmt_spec
from harness.engine.inputs import WARMUP_INDEX, Inputs
from harness.engine.kernel_only import KernelOnly
from harness.engine.session import WorkerSession
from harness.engine.stop_rule import StopRule
from harness.engine.timing_checks import TimingJudge
from harness.engine.verdicts import end_case
from harness.extras import Clocks
from harness.messages import Timed, WarmedUp
from harness.requests import Time, Warmup
from harness.results import FAIL, PASS, CaseResult

GATE_MISSED = (
    "the launch gate could not close for some samples (the GPU was busy); those samples include the host's launch time"
)


class BenchmarkLoop:
    def __init__(self, ctx: RunContext, session: WorkerSession, inputs: Inputs, checker: Checker):
        self.ctx, self.session, self.inputs, self.checker = ctx, session, inputs, checker
        self.stop_rule = StopRule.from_options(ctx.opt, ctx.gpu, ctx.ranked)
        self.judge = TimingJudge(ctx, session)
        self.kernel_only = KernelOnly(ctx, session)
        self.clocks = ClockReader(ctx.device) if ctx.gpu else None

    def close(self) -> None:
        if self.clocks is not None:
            self.clocks.close()

    def run_case(self, i: int, case: dict, deadline: float) -> CaseResult:
        ctx, task, ranked = self.ctx, self.ctx.task, self.ctx.ranked
        spec = ctx.case_spec(case)
        label = f"benchmark {i + 1}/{len(task.benchmarks)} {fmt_spec(spec)}"
        ctx.progress(label)
        per_call = task.timing_protocol == "per_call"
        result = CaseResult(ctx.timed_kind, spec, PASS, baseline_us=task.baseline_for(case))
        batch = 1 if per_call else task.inputs_per_measurement
        if not ctx.gpu and batch > ctx.opt.cpu_inputs_per_measurement:
            batch = ctx.opt.cpu_inputs_per_measurement
            result.warnings.append(
                f"CPU run: {batch} inputs per measurement instead of the task's {task.inputs_per_measurement}"
            )

        # Warm-up calls bring the clocks up before every chunk of timed calls. In ranked runs they use
        # an input of their own (slot 0), never one that is timed afterwards.
        warm = self.inputs.generate(spec, WARMUP_INDEX, 1) if ranked else ([], [])
        # unranked runs reuse one fixed set of inputs for every sample of the case
        fixed_specs, fixed = ([], None) if ranked else self.inputs.generate(spec, 0, batch)
        fixed_items = None if ranked else self.inputs.place(fixed_specs, fixed, deadline)
        reply = self.session.request(
            "timing",
            Warmup(
                data=0 if fixed_items else self.inputs.place(*warm, deadline)[0],
                min_calls=3 if ctx.gpu else 1,
                min_ms=100 if ctx.gpu else 0,
            ),
            deadline,
            f"warming up {label}",
            WarmedUp,
        )
        if ranked and self.session.baseline_threads is None:
            self.session.baseline_threads = reply.integrity.threads
        reason = self.session.rejection(reply)
        if not reply.ok or reason:
            return end_case(result, reply, reason)

        series, started, index = {k: [] for k in protocol.TIMING_SERIES}, time.monotonic(), 0
        samples = series["samples_ns"]
        chunk_warmup_ms = 20 if ctx.gpu else 0
        passed_fixed = []
        clocks = Clocks(before=self._read_clocks())
        result.record(clocks)
        while True:
            if per_call:
                k = min(10 if ctx.gpu else 1, self.stop_rule.max_samples - len(samples))
                specs, privates = self.inputs.generate(spec, index, k) if ranked else ([], fixed * k)
                returned = list(range(k)) if ranked else [k - 1]
            else:
                specs, privates = self.inputs.generate(spec, index, batch) if ranked else ([], fixed)
                returned = list(range(batch)) if ranked else [batch - 1]
            # Every chunk, in both modes alike (so ranked and unranked times compare): the submission's
            # own warm-up calls on an input that is not timed next (ranked: before the timed inputs reach
            # the worker, so untimed code never sees them), then, right before timing, the harness's
            # own GPU work to hold the clocks up and a read of each timed input (see worker.sampler).
            if chunk_warmup_ms:
                reply = self.session.request(
                    "warmup",
                    Warmup(data=0, min_calls=1, min_ms=chunk_warmup_ms),
                    deadline,
                    f"warming up {label}",
                    WarmedUp,
                )
                reason = self.session.rejection(reply)
                if not reply.ok or reason:
                    return end_case(result, reply, reason, samples)
            if ranked:
                items = self.inputs.place(specs, privates, deadline, keep=1)  # slot 0: the warm-up input
            else:
                items = fixed_items * k if per_call else fixed_items
            index += len(privates)
            reply = self.session.request(
                "timing",
                Time(
                    protocol=task.timing_protocol,
                    inputs=items,
                    returned=returned,
                    heat_ms=chunk_warmup_ms,
                    touch=ctx.gpu,
                ),
                deadline,
                f"timing {label}",
                Timed,
                n_samples=len(items) if per_call else 1,
                n_outputs=len(returned),
            )
            reason = self.session.rejection(reply)
            if not reply.ok or reason:
                return end_case(result, reply, reason, samples)
            for idx, out in zip(returned, self.checker.outputs(reply.outputs)):
                ok, message = (
                    self.checker.check(privates[idx], out)
                    if ranked
                    else self.checker.check_fixed(privates[idx], out, passed_fixed)
                )
                if not ok:
                    result.verdict, result.message = FAIL, f"timed call {len(samples) + 1 + idx}: {message}"
                    return self.judge.finish(result, samples + reply.samples_ns, series, batch)
            for key, values in series.items():
                values += getattr(reply, key)
            if reply.gate_misses and GATE_MISSED not in ctx.warnings:
                ctx.warnings.append(GATE_MISSED)
            if self.stop_rule.should_stop(samples, time.monotonic() - started):
                break
        clocks.after = self._read_clocks()
        result.record(clocks)
        return self._after_timing(result, samples, series, batch, [0] if per_call else items, deadline)

    def _after_timing(self, result, samples, series, batch, kernel_items, deadline) -> CaseResult:
        result = self.judge.finish(result, samples, series, batch)
        if result.verdict == PASS:
            clocks = result.clocks
            result.warnings += clock_warnings(clocks.before, clocks.after)
            figures, check = self.kernel_only.measure(result, kernel_items, deadline)
            figures.unhidden_host_ns = plausibility.unhidden_host_ns(series["unhidden_host_ns"])
            result.record(figures, *([check] if check else []))
            result.warnings += plausibility.host_bound_warnings(figures.unhidden_host_ns, figures.ns)
        return result

    def _read_clocks(self) -> dict:
        if self.clocks is None:
            return {"note": "not available on CPU"}
        with self.ctx.phases.measure("clocks"):
            return self.clocks.read()
