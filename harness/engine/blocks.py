"""The timed cases in blocks: each block renews what changes between runs.

Block 0 runs in the worker that ran the tests; every later block first replaces it
(``WorkerSession.renew``: the next worker, forked by the warm worker pool and held after its CUDA
context, goes on once the last one and everything it left running are reaped, then imports the
submission; on a GPU it was started during the last block, ``WorkerSession.start_next_ahead``), then times
every shape once, in an order of its own, on inputs whose seeds derive from the secret and the block
(``BLOCK_STRIDE``), and reads the GPU's clocks, temperature, power and throttle reasons before and after.
Each case of a block takes 1/B of the stop rule (``StopRule.for_blocks``), so a ranked run takes about
the samples one process took before blocks. The case results of a shape are merged (all its samples,
the task's estimator unchanged); the blocks themselves go into ``RunResult.blocks``, and the score's
interval comes from their scores (``harness.analysis.blocks``).

A block that the escaped-work check alone rejected (``plausibility.escaped_work``) is measured again,
on inputs of its own, with its samples dropped: on H100 hosts that check rejected an honest file in
some blocks, from a slow host. Up to half of the blocks may be measured again (``max_remeasured``);
one more such block rejects the run.

How many blocks (``default_blocks``): ranked on a GPU 10. Five whole-process ranked runs of
triton_mxfp4 on the H200 spread with a CV of 0.66% (issue #50); the half-width of a t interval from B
blocks is t(B-1) / sqrt(B) * CV, and B = 10 is the smallest B that brings it under the 0.5% target
(0.72 * 0.66% = 0.47%). ``bench/noise.py`` measures the frontier per task and device. Ranked on the
CPU 3 (the fixture tasks; enough for an interval, cheap enough for CI). Unranked modes 1 unless
``--blocks`` says otherwise: a rehearsal stays quick, and its ± is then one process's.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.analysis.blocks import combine
from harness.analysis.plausibility import escaped_work
from harness.engine.benchmark import BenchmarkLoop, EarlierCaseFailed
from harness.engine.context import RunContext, fmt_spec
from harness.engine.seeds import derive_seed
from harness.engine.session import WorkerSession
from harness.engine.supervisor import WorkerFailure
from harness.results import ERROR, NOT_RUN, PASS, REJECTED, BlockRecord, CaseResult, Stats, worst_verdict

RANKED_GPU_BLOCKS = 10
RANKED_CPU_BLOCKS = 3
ORDER_SEED = 1 << 42  # the shapes' order of block b derives from (secret, ORDER_SEED, b)
THROTTLE_FLAG = "measured while the GPU throttled"
REMEASURED_SHARE = 2  # up to count // 2 blocks (at least 1) measured again after the escaped-work check alone
FINAL_REMEASURED_SHARE = 3  # a final's entry: up to a third of its rounds, over the whole final
REMEASURED = "was measured again"  # in the warning that says so (bench/verdict_tally.py counts it)


def default_blocks(blocks: int | None, ranked: bool, gpu: bool) -> int:
    """The number of blocks: the option when given, else the defaults of the module docstring."""
    if blocks is not None:
        return blocks
    if not ranked:
        return 1
    return RANKED_GPU_BLOCKS if gpu else RANKED_CPU_BLOCKS


def max_remeasured(count: int, share: int = REMEASURED_SHARE) -> int:
    """How many of ``count`` blocks may be measured again after the escaped-work check alone rejected
    them: ``count // share``, at least one. A ranked run's share is half (10 blocks: 5). A third (3 of
    10), the limit before, rejected 3 of 60 honest jobs on an H100 lease that flagged about 1 block in
    8; were blocks flagged independently at that rate, a third would reject about 6% of honest runs and
    half about 0.6% (bench/lab/redraw_gain.py). A file that escapes the events in every block is still
    rejected, a few blocks later; one that escapes on purpose in its slow blocks, to have them drawn
    again, gains about 0.43 of the between-block sd instead of 0.30, inside a board's ties
    (docs/security.md). A final, which decides closer differences, passes FINAL_REMEASURED_SHARE."""
    return max(1, count // share)


def remeasured_blocks(warnings: list[str]) -> int:
    """How many blocks a run measured again after the escaped-work check alone, from its warnings."""
    return sum(REMEASURED in w for w in warnings)


def shape_order(n: int, block: int, secret: str | None) -> list[int]:
    """The order block ``block`` times ``n`` shapes in: the task's for a single unranked block, else a
    permutation drawn from the secret (ranked) or the block number (public)."""
    order = list(range(n))
    if secret is None and block == 0:
        return order
    seed = derive_seed(secret, ORDER_SEED, block) if secret is not None else block
    random.Random(seed).shuffle(order)
    return order


def merge_cases(parts: list[CaseResult]) -> CaseResult:
    """One shape's case from its blocks: every sample (the task's per-shape mean over all of them), the
    worst verdict and its message, the last block's records (clocks, kernel-only figure)."""
    last = parts[-1]
    samples = [x for p in parts if p.stats is not None for x in p.stats.samples_ns]
    verdict = worst_verdict(p.verdict for p in parts)
    message = next((p.message for p in parts if p.verdict == verdict), last.message)
    warnings = list(dict.fromkeys(w for p in parts for w in p.warnings))
    merged = CaseResult(
        last.kind,
        last.spec,
        verdict,
        message,
        stats=Stats.from_samples(samples) if samples else None,
        baseline_us=last.baseline_us,
        sol=last.sol,
        extra=dict(last.extra),
        warnings=warnings,
    )
    for p in parts:
        for key, value in p.extra.items():
            merged.extra.setdefault(key, value)  # a failed block's traceback, when the last one has none
    _rescale_sol(merged)
    return merged


def _rescale_sol(case: CaseResult) -> None:
    """The % of the speed of light against the merged mean (the last block's was against its own)."""
    sol, stats = case.sol, case.stats
    if sol is not None and sol.time_ns and stats is not None and stats.mean > 0:
        sol.percent = 100.0 * sol.time_ns / stats.mean


def _throttle_reasons(*readings: dict) -> list[str]:
    reasons: list[str] = []
    for r in readings:
        reasons += [t for t in r.get("throttle") or [] if t not in reasons]
    return reasons


@dataclass
class TimedBlocks:
    """Runs the benchmark shapes of ``ctx.task`` in ``count`` blocks; ``cases`` (task order) and
    ``records`` afterwards. ``renew`` replaces the worker between blocks; the time it takes extends the
    run's deadline (the task's timeout then bounds what one import and the timed calls take, as it did
    before blocks)."""

    ctx: RunContext
    session: WorkerSession
    loop: BenchmarkLoop
    count: int
    renew: Callable[[float], None]
    start_ahead: Callable[[], None] | None = None  # starts the next renewal's worker now (None: renew starts it)
    parts: list[list[CaseResult]] = field(default_factory=list)
    records: list[BlockRecord] = field(default_factory=list)
    worker_lost: bool = False  # a WorkerFailure ended the run (no last exchange with the worker)
    interrupted: bool = False  # Ctrl-C ended the blocks; the cases measured so far are kept
    deadline: float = 0.0  # the run's deadline after the blocks, extended by the worker restarts
    remeasured: int = 0  # blocks measured again after the escaped-work check alone rejected them
    _pending: list[int] = field(default_factory=list)  # the block's shapes not yet measured, in order
    _done: list[int] = field(default_factory=list)  # the block's shapes measured so far, in order

    def run(self, deadline: float) -> list[CaseResult]:
        """Every block until one ends a case badly; the merged cases, one per shape, in task order."""
        n = len(self.ctx.task.benchmarks)
        self.parts = [[] for _ in range(n)]
        if self.count > 1:
            self.loop.use_blocks(self.count)
        self.deadline = deadline
        try:
            self._blocks(n)
        except WorkerFailure as failure:
            self.worker_lost = True
            if not self._settle():
                self._fail(self._pending[0] if self._pending else None, failure)
            elif self.records:  # a deferred check that failed had ended the block before this failure
                self._fill(self.records[-1], self.records[-1].index, 0.0)
        except KeyboardInterrupt:
            self.interrupted = True
            self._settle()
            return [case for case in self._cases() if case.verdict != NOT_RUN]
        return self._cases()

    def _blocks(self, n: int) -> None:
        """Block after block (``n`` shapes each) until all ran or one ended a case badly."""
        secret = self.ctx.opt.secret if self.ctx.ranked else None
        b = seed = 0  # block b's inputs and order derive from block ``seed``'s (b's, unless measured again)
        while b < self.count:
            if self.records or self.remeasured:
                # the harness's own restart (worker start, re-import) does not eat the submission's time
                t0 = time.monotonic()
                self.renew(self.deadline)
                self.deadline += time.monotonic() - t0
            if self.start_ahead is not None and b + 1 < self.count:
                self.start_ahead()  # its start overlaps this block; it launches nothing on the GPU before renew()
            if self._block(b, shape_order(n, seed, secret), self.deadline, seed):
                b = seed = b + 1
            elif self._remeasure(b):
                seed = self.count + self.remeasured - 1  # seeds that no block of the run uses
            else:
                return

    def _remeasure(self, b: int) -> bool:
        """After block ``b`` ended badly: when only the escaped-work check rejected it
        (``plausibility.escaped_work``, which a slow host can fake) and fewer than ``max_remeasured``
        blocks of the run (or ``RunOptions.remeasure_limit``) have been measured again, drops the block
        (its records, and every sample it took) and says so; the caller then measures block ``b`` again,
        on inputs and an order of its own.
        One finding more stands, so work that escapes the events in every block is still rejected, and a
        block that escaped them keeps none of its samples. True when the block is to be measured again."""
        ended = [self.parts[i][-1] for i in self._done]
        failed = [case for case in ended if case.verdict != PASS]
        limit = self.ctx.opt.remeasure_limit
        limit = max_remeasured(self.count) if limit is None else limit
        if (
            self.remeasured >= limit
            or not failed
            or not all(case.verdict == REJECTED and escaped_work(case.message) for case in failed)
        ):
            return False
        for i in self._done:
            self.parts[i].pop()
        self.records.pop()
        self.remeasured += 1
        self.ctx.warnings.append(
            f"block {b + 1} {REMEASURED}: {fmt_spec(failed[0].spec)}: {failed[0].message} (the host alone can "
            f"cause this: its samples were dropped; more than {limit} such block{'s' if limit > 1 else ''} reject "
            "the run)"
        )
        return True

    def _block(self, b: int, order: list[int], deadline: float, seed: int) -> bool:
        """Block ``b``, its inputs' seeds those of block ``seed``; False when a case did not pass."""
        t0 = time.monotonic()
        record = BlockRecord(
            index=b, seed_index=seed, order=order, shape_means_us=[], samples=[], score_us=None,
            clocks_before=self.loop.read_clocks(), fresh_worker=b == 0 or not self.ctx.opt.same_worker,
            warmup_chunks=self.ctx.opt.warmup_chunks, lead_in=self.ctx.opt.lead_in,
        )  # fmt: skip
        self.records.append(record)
        self._pending, self._done = list(order), []
        benchmarks = self.ctx.task.benchmarks
        ok = True
        try:
            for i in order:
                case = self.loop.run_case(
                    i, benchmarks[i], deadline, block=seed, kernel_only=b == self.count - 1, first=i == order[0],
                    defer_check=True,
                )  # fmt: skip
                self.parts[i].append(case)
                self._pending.remove(i)
                self._done.append(i)
                if case.verdict != PASS:
                    ok = False
                    break
        except EarlierCaseFailed:
            pass  # the case that was starting took no part; _settle has the one that failed
        if self._settle():
            ok = False
        record.clocks_after = self.loop.read_clocks()
        self._fill(record, b, time.monotonic() - t0)
        return ok

    def _settle(self) -> bool:
        """Applies the block's deferred check (BenchmarkLoop.settle); True when it failed: the failed
        case's part replaces its passing one, and the cases after it in the block, which an immediate
        check would never have started, take no part. A case that was still running (its own chunk's
        check, when the worker failed or Ctrl-C came during the next chunk's lead-in) gets the part."""
        failed = self.loop.settle()
        if failed is None:
            return False
        i, case = failed
        if i in self._done:
            self.parts[i][-1] = case
        else:
            self.parts[i].append(case)
            self._pending.remove(i)
            self._done.append(i)
        for j in self._done[self._done.index(i) + 1 :]:
            self.parts[j].pop()
        self._done = self._done[: self._done.index(i) + 1]
        return True

    def _block_stats(self, b: int) -> list[Stats | None]:
        """Each shape's stats in block ``b`` (None: not timed there, or it did not pass)."""
        out: list[Stats | None] = []
        for parts in self.parts:
            part = parts[b] if len(parts) > b else None
            out.append(part.stats if part is not None and part.verdict == PASS else None)
        return out

    def _readings(self, record: BlockRecord, b: int) -> list[dict]:
        """Every NVML reading of block ``b``: the block's own and its cases'."""
        readings = [record.clocks_before, record.clocks_after]
        for parts in self.parts:
            clocks = parts[b].clocks if len(parts) > b else None
            if clocks is not None:
                readings += [clocks.before, clocks.after or {}]
        return readings

    def _fill(self, record: BlockRecord, b: int, wall_s: float) -> None:
        stats = self._block_stats(b)
        means = [s.mean / 1e3 if s is not None else None for s in stats]
        record.shape_means_us, record.samples, record.wall_s = means, [s.runs if s else 0 for s in stats], wall_s
        timed = [m for m in means if m is not None]
        if len(timed) == len(means) and all(m > 0 for m in timed):
            record.score_us = combine(timed, self.ctx.task.ranking_by)
        record.throttled = _throttle_reasons(*self._readings(record, b))
        if record.throttled:
            warning = (
                f"block {b + 1} was {THROTTLE_FLAG} ({', '.join(record.throttled)}): its times may be slower "
                "than the card's normal speed; the blocks' spread shows how much"
            )
            if warning not in self.ctx.warnings:
                self.ctx.warnings.append(warning)

    def _fail(self, shape: int | None, failure: WorkerFailure) -> None:
        """The worker failed while timing ``shape`` (None: between blocks, while replacing it)."""
        spec = self.ctx.case_spec(self.ctx.task.benchmarks[shape if shape is not None else 0])
        case = CaseResult(self.ctx.timed_kind, spec, failure.verdict, failure.message)
        if shape is None:
            case.message = f"while starting a fresh worker for block {len(self.records) + 1}: {failure.message}"
            self.parts[0].append(case)
            return
        self.parts[shape].append(case)
        if self.records:
            self._fill(self.records[-1], self.records[-1].index, 0.0)

    def _cases(self) -> list[CaseResult]:
        out = []
        for i, parts in enumerate(self.parts):
            if parts:
                case = merge_cases(parts)
                if self.count > 1 and case.verdict == PASS and case.stats is not None:
                    case.warnings += self.loop.judge.noise(case.stats)  # all its samples, not each block's few
                out.append(case)
            else:
                spec = self.ctx.case_spec(self.ctx.task.benchmarks[i])
                out.append(CaseResult(self.ctx.timed_kind, spec, NOT_RUN, "not run: an earlier case ended the run"))
        return out


def renew_worker(session: WorkerSession, deadline: float) -> None:
    """Replaces the worker with a fresh one that imports the submission again."""
    session.renew(deadline)
    reply = session.load(deadline, "re-importing the submission for a new block")
    reason = session.rejection(reply)
    if reason:
        raise WorkerFailure(REJECTED, reason)
    if not reply.ok:
        error = getattr(reply, "error", "no reason given")
        raise WorkerFailure(ERROR, f"the submission could not be re-imported for a new block: {error}")
    session.baseline_threads = None
