"""One run of one submission on one task, in one mode: the verdict-deciding side.

The parent generates every input, keeps a private copy, has the worker generate its own, checks what
comes back with the task's ``check_implementation``, and decides each verdict. It never imports the
submission. A bad submission never raises out of :meth:`Run.execute`; the result carries its verdict.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import harness
from harness.analysis.confidence import score_ci_us
from harness.engine import verdicts
from harness.engine.benchmark import BenchmarkLoop
from harness.engine.checks import Checker
from harness.engine.context import RunContext
from harness.engine.device import device_info, select_device
from harness.engine.inputs import Inputs
from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.sandbox import Sandbox, make_undumpable, memory_limit_bytes
from harness.engine.scan import prescan
from harness.engine.session import WorkerSession
from harness.engine.submission import submission_info
from harness.engine.supervisor import WorkerFailure
from harness.messages import Called, Profiled
from harness.requests import Call, Profile
from harness.results import ERROR, FAIL, PASS, REJECTED, CaseResult, RunResult


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class Run:
    def __init__(self, path: Path, task, mode: Mode, options: RunOptions, progress=None):
        device = select_device(options.device)
        self.path = path
        self.ctx = RunContext(
            task,
            Mode(mode),
            options,
            device,
            device_info(device),
            progress or (lambda _msg: None),
            warnings=list(options.extra_warnings),
        )
        self.planned = verdicts.planned_cases(task, self.ctx.mode, self.ctx.ranked)
        self.cases: list[CaseResult] = []
        self.sandbox: Sandbox | None = None
        self.session: WorkerSession | None = None
        self.benchmarks: BenchmarkLoop | None = None

    def execute(self) -> RunResult:
        ctx, t0 = self.ctx, time.monotonic()
        result = RunResult(
            task=ctx.task.name,
            submission=submission_info(self.path),
            mode=ctx.mode.value,
            device=ctx.info,
            verdict=ERROR,
            started_at=_now(),
            harness_version=harness.__version__,
        )
        self._announce()
        if ctx.ranked and ctx.opt.scan_policy != "off" and self._scan_rejects(result):
            return result
        memory_limit = memory_limit_bytes(ctx.opt.memory_limit_gb)
        try:
            self.sandbox = Sandbox(self.path, ctx.task, ctx.device, ctx.info.l2_bytes, ctx.opt, ctx.warnings)
            self.session = WorkerSession(ctx, self.sandbox.config, memory_limit)
            inputs, checker = Inputs(ctx, self.session), Checker(ctx)
            self.benchmarks = BenchmarkLoop(ctx, self.session, inputs, checker)
            deadline = ctx.deadline(verdicts.first_timeout(ctx.task, ctx.mode, ctx.ranked))
            self.session.start(deadline)
            if self._import(result, deadline):
                self._run_cases(inputs, checker, deadline)
                self.session.sync(deadline)
        except WorkerFailure as failure:
            kind, spec = verdicts.running_case(self.planned, self.cases, ctx.case_spec)
            self.cases.append(CaseResult(kind, spec, failure.verdict, failure.message))
        finally:
            self._clean_up(result)
        return self._finish(result, t0)

    def _announce(self) -> None:
        ctx = self.ctx
        if ctx.info.kind == "cpu":
            ctx.warnings.append("CPU results: times are host-clock times on the CPU, not GPU times")
        if ctx.ranked:
            make_undumpable()
        if not ctx.opt.defenses:
            ctx.warnings.append(
                "DEFENSES OFF (--no-defenses): for measuring their cost only; this result is "
                "not a ranked result (fixed inputs, no integrity or background-work checks)"
            )

    def _scan_rejects(self, result: RunResult) -> bool:
        """Static pre-scan (harness.engine.scan); True when the policy rejects the run before any code runs."""
        result.findings, rejection = prescan(self.path, self.ctx.opt.scan_policy, self.ctx.warnings)
        if rejection is None:
            return False
        result.verdict, result.message = REJECTED, rejection
        self.cases.append(CaseResult("scan", {}, REJECTED, rejection))
        result.cases, result.warnings, result.finished_at = self.cases, self.ctx.warnings, _now()
        return True

    def _import(self, result: RunResult, deadline: float) -> bool:
        """Imports the submission in the worker; False (with the import case) when that failed."""
        reply = self.session.load(deadline)
        if reply.ok:
            result.timing_method, self.ctx.gated = reply.timing_method, reply.gated
        reason = self.session.rejection(reply)
        if reason:
            result.message = reason
            self.cases.append(CaseResult("import", {}, REJECTED, result.message))
        elif not reply.ok:
            result.message = reply.error
            self.cases.append(CaseResult("import", {}, ERROR, result.message, extra=verdicts.tracebacks(reply)))
        return not reason and reply.ok

    def _run_cases(self, inputs: Inputs, checker: Checker, deadline: float) -> None:
        mode, task = self.ctx.mode, self.ctx.task
        if mode is Mode.PROFILE:
            return self._profile(inputs, deadline)
        if mode.runs_tests and not self._tests(inputs, checker, deadline):
            if mode.runs_benchmarks:
                self.ctx.warnings.append("benchmarks skipped: a test did not pass")
            return
        if mode.runs_benchmarks:
            if mode.runs_tests and not self.ctx.ranked:
                deadline = self.ctx.deadline(task.benchmark_timeout)
            for i, case in enumerate(task.benchmarks):
                self.cases.append(self.benchmarks.run_case(i, case, deadline))
                if self.cases[-1].verdict == REJECTED:
                    return

    def _tests(self, inputs: Inputs, checker: Checker, deadline: float) -> bool:
        """Runs every test case; True when all passed (a rejection stops at once)."""
        for i in range(len(self.ctx.task.tests)):
            # ranked runs test on secret-derived inputs too: precomputed public outputs cannot pass by replay
            spec, label, data, item = inputs.one("test", i, self.ctx.task.tests, deadline, fresh=self.ctx.ranked)
            reply = self.session.request("call", Call(data=item), deadline, f"running {label}", Called)
            reason = self.session.rejection(reply)
            if reason:
                self.cases.append(CaseResult("test", spec, REJECTED, reason))
                return False
            if not reply.ok:
                self.cases.append(CaseResult("test", spec, ERROR, reply.error, extra=verdicts.tracebacks(reply)))
                continue
            [out] = checker.outputs([reply.output])
            ok, message = checker.check(data, out)
            self.cases.append(CaseResult("test", spec, PASS if ok else FAIL, message))
        return all(c.verdict == PASS for c in self.cases if c.kind == "test")

    def _profile(self, inputs: Inputs, deadline: float) -> None:
        for i in range(len(self.ctx.task.benchmarks)):
            spec, label, _data, item = inputs.one("profile", i, self.ctx.task.benchmarks, deadline)
            reply = self.session.request("profile", Profile(data=item), deadline, f"profiling {label}", Profiled)
            reason = self.session.rejection(reply)
            if not reply.ok or reason:
                self.cases.append(verdicts.end_case(CaseResult("benchmark", spec, PASS), reply, reason))
                continue
            self.cases.append(CaseResult("benchmark", spec, PASS, "profiled", extra={"profile_table": reply.table}))

    def _clean_up(self, result: RunResult) -> None:
        if self.benchmarks is not None:
            self.benchmarks.close()
        if self.session is not None:
            output = self.session.stop()
            if output is not None:
                result.stdout, result.stderr = output
        if self.sandbox is not None:
            self.sandbox.remove()

    def _finish(self, result: RunResult, t0: float) -> RunResult:
        ctx = self.ctx
        self.cases += verdicts.not_run_cases(self.planned, self.cases, ctx.case_spec)
        result.cases, result.verdict = self.cases, verdicts.run_verdict(self.cases)
        result.message = result.message or verdicts.summary(self.cases)
        result.score_us = verdicts.score(ctx.task, self.cases) if ctx.mode.scored else None
        if result.score_us is not None:
            with ctx.phases.measure("bootstrap"):
                result.score_ci_us = score_ci_us(
                    [c.stats.samples_ns for c in result.benchmark_cases()], ctx.task.ranking_by
                )
        result.warnings = ctx.warnings
        result.sandbox = self.session.sandbox if self.session is not None else None
        result.finished_at, result.wall_s = _now(), time.monotonic() - t0
        ctx.phases.seconds["other"] = max(0.0, result.wall_s - sum(ctx.phases.seconds.values()))
        result.phases_s = dict(ctx.phases.seconds)
        return result
