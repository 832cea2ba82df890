"""run-all, serial: the kernels of the next new files compiled together, between two jobs.

A job whose file the compile cache has not met compiles it ahead (:mod:`harness.engine.compile_ahead`):
a few workers beside the job's own, at most half of the cores (on a host whose GPUs each run a job, the
other jobs' timing needs the rest), while the job's worker waits: 4.8-5.5 s of each 17.6-19.6 s ranked
triton_mxfp4 job of a run-all on an H100 (``results/h100_verdicts/compile_rounds.json``). Between two
jobs of the serial executor nothing is timed, so before a job whose file is new, :class:`CompileRounds`
compiles that file and the next new files of the queue (up to :data:`ROUND_FILES`) at once, each file
its share of the usable cores in workers (:func:`share_workers`); their jobs then find the entries
compiled and compile nothing ahead.

Each file's workers are its compile-ahead workers (:class:`~harness.engine.compile_ahead.CompileAhead`):
a sandbox and a compile-cache entry of its own, the cases' public seeds, no launch gate, tuning results
discarded, everything they started killed when they stop. Workers of different files run side by side
then, each confined by its own Landlock domain (no signal, ptrace or file of another's), and none of them
while anything is timed. A file the static scan rejects runs in no round.

Nothing a round sees decides a verdict: a file whose every shape compiled is marked as compiled ahead (as
in its own run); one whose import or call failed, ran past its first-call limit or past the round's limit
(:data:`ROUND_LIMIT_CALLS` first-call limits) is not, and its job compiles ahead itself and reports what
it meets there. A file that hangs costs the round one first-call limit (its other files compile
meanwhile) and then its own job its limit again.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.engine import compile_ahead
from harness.engine.compile_ahead import CompileAhead
from harness.engine.context import RunContext
from harness.engine.device import select_device, usable_cores
from harness.engine.executors.job import temp_prefix
from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.pool import warm_shared_pool
from harness.engine.sandbox import Sandbox, memory_limit_bytes
from harness.engine.scan import prescan
from harness.engine.stop_signals import held
from harness.engine.supervisor import Siblings
from harness.results import DeviceInfo

ROUND_FILES = 16  # a round compiles the job's file and up to 15 more new files of the queue
ROUND_LIMIT_CALLS = 2  # a round ends after this many first-call limits (its workers are then stopped)


@dataclass
class RoundRecord:
    """What one round did (``FolderRun.compile_rounds``)."""

    files: list[str]  # the files it compiled ahead (file names)
    workers: int
    shapes: int
    wall_s: float = 0.0
    compiled: list[str] = field(default_factory=list)  # those whose every shape compiled (marked)
    left: dict[str, str] = field(default_factory=dict)  # the others: why (their jobs compile ahead)


@dataclass
class _Pending:
    sha256: str
    name: str
    source: bytes


class _Member:
    """One file of a round: its copy, its sandbox and its compile-ahead workers."""

    def __init__(self, pending: _Pending, folder: Path, ctx: RunContext, memory_limit: int):
        self.pending, self.ctx = pending, ctx
        self.path = folder / f"{pending.sha256[:16]}.py"
        self.path.write_bytes(pending.source)
        self.sandbox: Sandbox | None = None
        self.ahead: CompileAhead | None = None
        self.memory_limit = memory_limit
        self.shapes = len(compile_ahead.shapes(ctx))

    def wanted(self) -> bool:
        """Sets up the sandbox; True when the file is new to its compile-cache entry and the scan lets it
        run (otherwise nothing of it runs here, and its job decides)."""
        ctx, opt = self.ctx, self.ctx.opt
        try:
            self.sandbox = Sandbox(self.path, ctx.task, ctx.device, ctx.info.l2_bytes, opt, ctx.warnings, info=ctx.info)
        except Exception:  # the job's own run meets it and reports it
            return False
        if self.sandbox.cache is None or not compile_ahead.wanted(opt.compile_ahead, ctx.gpu, self.sandbox.cache):
            return False
        if ctx.ranked and opt.scan_policy != "off":
            try:
                _findings, rejection = prescan(self.path, opt.scan_policy, [], job=False)
            except Exception:  # the job's own scan reports it
                return False
            if rejection is not None:
                return False
        self.sandbox.config.hide_harness = ctx.ranked  # as its run's workers
        return True

    def start(self, workers: int, siblings: Siblings, deadline: float) -> None:
        assert self.sandbox is not None
        config, cache = self.sandbox.config, self.sandbox.cache
        self.ahead = CompileAhead(self.ctx, config, self.memory_limit, cache, workers, siblings)
        self.ahead.start(deadline)
        self.ahead.release()  # no worker of a run waits here: they may import the file at once

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
        if self.sandbox is not None:
            self.sandbox.remove()


def share_workers(shapes: Sequence[int], cores: int) -> list[int]:
    """Workers for files of ``shapes`` shapes each: each file its share of ``cores`` by its shapes, rounded
    up (a round ends with its slowest file, so ten files of ten shapes on 16 cores get two workers each
    rather than two or one), at least one and at most one a shape."""
    total = sum(shapes)
    return [min(n, max(1, math.ceil(cores * n / total))) if total else 1 for n in shapes]


class CompileRounds:
    """The serial executor's rounds: :meth:`before` each job, in queue order."""

    def __init__(
        self,
        queue: Sequence[tuple[str, str, bytes]],
        task: Any,
        mode: str,
        options: RunOptions,
        say: Callable[[str], None],
        info: DeviceInfo,
    ):
        """``queue``: (sha256, file name, source) of every job, in the order they are claimed; ``info``:
        the device the jobs run on, as run-all read it."""
        self.queue = [_Pending(*item) for item in queue]
        self.task, self.mode, self.options, self.say = task, Mode.parse(mode), options, say
        self.seen: set[str] = set()
        self.records: list[RoundRecord] = []
        self.device, self.info = select_device(options.device), info

    @staticmethod
    def useful(options: RunOptions, gpu: bool) -> bool:
        """Whether rounds can compile anything: a new file would be compiled ahead (on, or auto on a GPU)."""
        return compile_ahead.wanted(options.compile_ahead, gpu, entry=None)

    def before(self, sha256: str) -> None:
        """Before the job of the file ``sha256``: unless that file was in a round already, a round over it
        and the next files of the queue that were in none (the files new to the cache among them)."""
        if sha256 in self.seen:
            return
        start = next((i for i, p in enumerate(self.queue) if p.sha256 == sha256), None)
        if start is None:
            return
        batch = [p for p in self.queue[start:] if p.sha256 not in self.seen][:ROUND_FILES]
        self.seen.update(p.sha256 for p in batch)
        self._round(batch)

    def _context(self) -> RunContext:
        return RunContext(self.task, self.mode, self.options, self.device, self.info, lambda _msg: None, warnings=[])

    def _round(self, batch: list[_Pending]) -> None:
        members: list[_Member] = []
        folder = None
        memory_limit = memory_limit_bytes(self.options.memory_limit_gb)
        try:
            with held():
                folder = Path(tempfile.mkdtemp(prefix=temp_prefix()))
            warm_shared_pool(str(self.device))  # the pool's server imports torch while the files are scanned
            for pending in batch:
                members.append(_Member(pending, folder, self._context(), memory_limit))
            with ThreadPoolExecutor(max_workers=usable_cores()) as scans:  # each scan is a child process
                chosen = [m for m, ok in zip(members, scans.map(_Member.wanted, members)) if ok]
            if chosen:
                self.records.append(self._compile(chosen))
        finally:
            for member in members:
                member.close()
            if folder is not None:
                with held():
                    shutil.rmtree(folder, ignore_errors=True)

    def _compile(self, chosen: list[_Member]) -> RoundRecord:
        """Starts every file's workers at once, waits for them (at most the round's limit) and says which
        files compiled on every shape."""
        t0 = time.monotonic()
        counts = share_workers([m.shapes for m in chosen], usable_cores())
        record = RoundRecord([m.pending.name for m in chosen], sum(counts), sum(m.shapes for m in chosen))
        self.say(
            f"compiling ahead between jobs: {len(chosen)} new file(s), {record.shapes} shapes, {record.workers} workers"
        )
        deadline = time.monotonic() + ROUND_LIMIT_CALLS * max(CompileAhead.first_call_limit(m.ctx) for m in chosen)
        siblings = Siblings()  # every file's workers: none is another's stray
        for member, count in zip(chosen, counts):
            member.start(count, siblings, deadline)
        for member in chosen:
            assert member.ahead is not None
            done = member.ahead.finish(deadline)
            if done.compiled == done.shapes:
                record.compiled.append(member.pending.name)
            else:
                why = "a call ran past its first-call limit" if done.timed_out else "the round's limit"
                record.left[member.pending.name] = (done.failures or [why])[0][:300]
        record.wall_s = time.monotonic() - t0
        self.say(
            f"compiled ahead between jobs: {len(record.compiled)} of {len(chosen)} file(s) in {record.wall_s:.1f} s"
            + (" (the others compile in their own jobs)" if record.left else "")
        )
        return record
