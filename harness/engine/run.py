"""One run of one submission on one task, in one mode: the verdict-deciding side.

The parent generates every input, keeps a private copy, has the worker generate its own, checks what
comes back with the task's ``check_implementation``, and decides each verdict. It never imports the
submission. A bad submission never raises out of :meth:`Run.execute`; the result carries its verdict.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
from harness.analysis import run_spread
from harness.analysis.blocks import interval_from_blocks, spread_warning
from harness.analysis.confidence import score_ci_us
from harness.engine import compile_ahead, verdicts
from harness.engine.benchmark import BenchmarkLoop
from harness.engine.blocks import TimedBlocks, default_blocks, renew_worker
from harness.engine.checks import Checker
from harness.engine.compile_ahead import CompileAhead
from harness.engine.context import RunContext
from harness.engine.device import device_info, select_device
from harness.engine.inputs import Inputs
from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.pool import warm_shared_pool
from harness.engine.sandbox import Sandbox, make_undumpable, memory_limit_bytes
from harness.engine.scan import BackgroundPrescan
from harness.engine.session import WorkerSession
from harness.engine.submission import submission_info
from harness.engine.supervisor import WorkerFailure
from harness.errors import RunInterrupted
from harness.messages import Called, Failed, Loaded, Profiled
from harness.requests import Call, Profile
from harness.results import ERROR, FAIL, PASS, REJECTED, TIMEOUT, CaseResult, RunResult, ScoreInterval

ONE_PROCESS_NOTE = (
    "one block: the ± covers this process's samples only, and a rerun can differ by more; "
    "give --blocks N (a fresh worker and fresh inputs each) for an interval that holds across reruns"
)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class Run:
    def __init__(
        self, path: Path, task: Any, mode: Mode, options: RunOptions, progress: Callable[[str], None] | None = None
    ) -> None:
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
        self.blocks: TimedBlocks | None = None
        self.ahead: CompileAhead | None = None

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
        warm_shared_pool(str(ctx.device))  # the pool's server imports torch while we scan and prepare
        scan = (
            BackgroundPrescan(self.path, ctx.opt.scan_policy) if ctx.ranked and ctx.opt.scan_policy != "off" else None
        )
        memory_limit = memory_limit_bytes(ctx.opt.memory_limit_gb)
        interrupted = False
        try:
            with ctx.phases.measure("prepare"):  # the run folder, the compile cache's entry, NVML
                self.sandbox = Sandbox(
                    self.path, ctx.task, ctx.device, ctx.info.l2_bytes, ctx.opt, ctx.warnings, info=ctx.info
                )
                self.sandbox.config.hide_harness = ctx.ranked  # as on the competition's machines
                self.session = WorkerSession(ctx, self.sandbox.config, memory_limit)
                inputs, checker = Inputs(ctx, self.session), Checker(ctx)
                self.benchmarks = BenchmarkLoop(ctx, self.session, inputs, checker)
            deadline = ctx.deadline(verdicts.first_timeout(ctx.task, ctx.mode, ctx.ranked))
            self._start_compile_ahead(memory_limit, deadline)
            self.session.start(deadline)
            if (
                not self._scan_rejects(result, scan)
                and self._compiled_ahead(result, deadline)
                and self._import(result, deadline)
            ):
                self._run_cases(inputs, checker, deadline)
                if self.blocks is None:
                    self.session.sync(deadline)
                elif not self.blocks.worker_lost:
                    self.session.sync(self.blocks.deadline)  # extended by the workers' restarts
        except WorkerFailure as failure:
            kind, spec = verdicts.running_case(self.planned, self.cases, ctx.case_spec)
            hint = ctx.timeout_hint() if failure.verdict == TIMEOUT else ""
            self.cases.append(CaseResult(kind, spec, failure.verdict, failure.message + hint))
        except KeyboardInterrupt:  # Ctrl-C: keep what was measured (the caller stores it, marked interrupted)
            interrupted = True
        finally:
            self._clean_up(result)
        if interrupted:
            raise RunInterrupted(self._interrupted(result, t0))
        return self._finish(result, t0)

    def _interrupted(self, result: RunResult, t0: float) -> RunResult:
        measured = len(self.cases)
        result = self._finish(result, t0)
        result.complete = False
        result.message = (
            f"interrupted (Ctrl-C) after {measured} of {len(self.planned)} cases; the cases measured are kept"
        )
        for case in result.cases[measured:]:
            case.message = "not run: the run was interrupted"
        return result

    def _announce(self) -> None:
        ctx = self.ctx
        if ctx.ranked:
            make_undumpable()
        if not ctx.opt.defenses:
            ctx.warnings.append(
                "DEFENSES OFF (--no-defenses): for measuring their cost only; this result is "
                "not a ranked result (fixed inputs, no integrity or background-work checks)"
            )

    def _scan_rejects(self, result: RunResult, scan: BackgroundPrescan | None) -> bool:
        """The static pre-scan's outcome (harness.engine.scan), waited for after the worker's start and
        before the import (phase ``scan``: the wait); True when the policy rejects the submission, whose
        code then never runs."""
        if scan is None:
            return False
        with self.ctx.phases.measure("scan"):
            result.findings, rejection = scan.result(self.ctx.warnings)
        if rejection is None:
            return False
        result.message = rejection
        self.cases.append(CaseResult("scan", {}, REJECTED, rejection))
        return True

    def _start_compile_ahead(self, memory_limit: int, deadline: float) -> None:
        """Starts the compile-ahead workers beside the run's (harness.engine.compile_ahead) when the run
        wants them; they wait for :meth:`_compiled_ahead` to let them import the file."""
        assert self.sandbox is not None and self.session is not None
        if compile_ahead.wanted(self.ctx.opt.compile_ahead, self.ctx.gpu, self.sandbox.cache):
            self.ahead = CompileAhead(self.ctx, self.sandbox.config, memory_limit, self.sandbox.cache)
            self.session.siblings = self.ahead.siblings
            self.ahead.start(deadline)

    def _compiled_ahead(self, result: RunResult, deadline: float) -> bool:
        """Once the run's worker has started and the scan passed: the compile-ahead workers call the file
        on every shape, and are all stopped before the run's worker imports it (phase ``compile_ahead``:
        the wait). False (with the case) when one of those calls ran past its limit."""
        if self.ahead is None:
            return True
        self.ahead.release()
        result.compile_ahead = dataclasses.asdict(self.ahead.finish(deadline))
        self._session().siblings = None  # all reaped: the next workers have none
        if self.ahead.timeout is None:
            return True
        spec, message = self.ahead.timeout
        self.cases.append(CaseResult("compile_ahead", spec, TIMEOUT, message))
        return False

    def _import(self, result: RunResult, deadline: float) -> bool:
        """Imports the submission in the worker; False (with the import case) when that failed."""
        session = self._session()
        reply = session.load(deadline)
        if isinstance(reply, Loaded):
            result.timing_method, self.ctx.gated = reply.timing_method, reply.gated
        reason = session.rejection(reply)
        if reason:
            result.message = reason
            self.cases.append(CaseResult("import", {}, REJECTED, result.message))
        elif isinstance(reply, Failed):
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
            count = default_blocks(self.ctx.opt.blocks, self.ctx.ranked, self.ctx.gpu)
            assert self.session is not None and self.benchmarks is not None
            ahead = None if self.ctx.opt.same_worker or not self.session.starts_ahead else self.session.start_next_ahead
            self.blocks = TimedBlocks(self.ctx, self.session, self.benchmarks, count, self._renew, ahead)
            self.cases += self.blocks.run(deadline)
            if self.blocks.interrupted:
                raise KeyboardInterrupt  # after keeping what the blocks measured
        return None

    def _session(self) -> WorkerSession:
        assert self.session is not None, "the worker session starts before any case runs"
        return self.session

    def _renew(self, deadline: float) -> None:
        """A fresh worker for the next block (every worker of the run writes to the same capture files,
        so the last stop returns all of their output); none with --same-worker."""
        if not self.ctx.opt.same_worker:
            renew_worker(self._session(), deadline)

    def _tests(self, inputs: Inputs, checker: Checker, deadline: float) -> bool:
        """Runs every test case; True when all passed (a rejection stops at once)."""
        for i in range(len(self.ctx.task.tests)):
            # ranked runs test on secret-derived inputs too: precomputed public outputs cannot pass by replay
            spec, label, data, item = inputs.one("test", i, self.ctx.task.tests, deadline, fresh=self.ctx.ranked)
            session = self._session()
            reply = session.request("call", Call(data=item), deadline, f"running {label}", Called)
            reason = session.rejection(reply)
            if reason:
                self.cases.append(CaseResult("test", spec, REJECTED, reason))
                return False
            if isinstance(reply, Failed):
                self.cases.append(CaseResult("test", spec, ERROR, reply.error, extra=verdicts.tracebacks(reply)))
                continue
            [out] = checker.outputs([reply.output])
            ok, message = checker.check(data, out)
            self.cases.append(CaseResult("test", spec, PASS if ok else FAIL, message))
        return all(c.verdict == PASS for c in self.cases if c.kind == "test")

    def _profile(self, inputs: Inputs, deadline: float) -> None:
        for i in range(len(self.ctx.task.benchmarks)):
            spec, label, _data, item = inputs.one("profile", i, self.ctx.task.benchmarks, deadline)
            session = self._session()
            reply = session.request("profile", Profile(data=item), deadline, f"profiling {label}", Profiled)
            reason = session.rejection(reply)
            if isinstance(reply, Failed) or reason:
                self.cases.append(verdicts.end_case(CaseResult("benchmark", spec, PASS), reply, reason))
                continue
            self.cases.append(CaseResult("benchmark", spec, PASS, "profiled", extra={"profile_table": reply.table}))

    def _clean_up(self, result: RunResult) -> None:
        try:
            if self.ahead is not None:
                self.ahead.close()
            if self.benchmarks is not None:
                self.benchmarks.close()
            if self.session is not None:
                output = self.session.stop()
                if output is not None:
                    result.stdout, result.stderr = output
                    result.stdout_cut_bytes, result.stderr_cut_bytes = self.session.output_cut_bytes()
        finally:  # a signal during the stop must not leave the run folder behind
            if self.sandbox is not None:
                with self.ctx.phases.measure("folder_remove"):
                    self.sandbox.remove()

    def _interval(self, result: RunResult) -> None:
        """The score's interval: from the block scores, else (one block) a bootstrap over the samples."""
        assert result.score_us is not None
        between_runs = run_spread.lookup(result.device.name, self.ctx.task.name) if self.ctx.gpu else None
        interval = interval_from_blocks(
            result.score_us, [b.score_us for b in result.blocks if b.score_us], between_runs=between_runs
        )
        if interval is not None:
            result.score_ci_us = [interval.low_us, interval.high_us]
            result.score_interval = ScoreInterval(
                interval.low_us,
                interval.high_us,
                interval.method,
                interval.blocks,
                interval.confidence,
                interval.df,
                interval.se_log,
                interval.spread,
                interval.rule_version,
                interval.run_sd,
            )
            for warning in (spread_warning(interval), run_spread.borrowed_warning(between_runs, self.ctx.task.name)):
                if warning:
                    self.ctx.warnings.append(warning)
            return
        with self.ctx.phases.measure("bootstrap"):
            samples = [c.stats.samples_ns for c in result.benchmark_cases() if c.stats is not None]
            result.score_ci_us = score_ci_us(samples, self.ctx.task.ranking_by)
        if result.score_ci_us is not None:
            low, high = result.score_ci_us
            result.score_interval = ScoreInterval(low, high, "bootstrap-samples", len(result.blocks) or 1)
            if self.ctx.gpu and self.ctx.mode.runs_benchmarks and ONE_PROCESS_NOTE not in self.ctx.warnings:
                self.ctx.warnings.append(ONE_PROCESS_NOTE)

    def _finish(self, result: RunResult, t0: float) -> RunResult:
        ctx = self.ctx
        self.cases += verdicts.not_run_cases(self.planned, self.cases, ctx.case_spec)
        result.cases, result.verdict = self.cases, verdicts.run_verdict(self.cases)
        result.message = result.message or verdicts.summary(self.cases)
        result.score_us = verdicts.score(ctx.task, self.cases) if ctx.mode.scored else None
        result.blocks = self.blocks.records if self.blocks is not None else []
        if result.score_us is not None:
            self._interval(result)
        result.warnings = ctx.warnings
        result.sandbox = self.session.sandbox if self.session is not None else None
        result.finished_at, result.wall_s = _now(), time.monotonic() - t0
        ctx.phases.seconds["other"] = max(0.0, result.wall_s - ctx.phases.top_level_total())
        result.phases_s = dict(ctx.phases.seconds)
        return result
