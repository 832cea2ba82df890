"""Compile ahead: a new file's kernels compiled by several workers at once, before its run calls it.

A file's first call on each shape compiles its kernels (Triton: a second or more a shape on a GPU), and
a run meets its shapes one after another, so a file the compile cache has not seen compiles them one
after another. Here a few more workers start beside the run's own worker, forked and sandboxed as every
worker is and writing to the same compile-cache entry; once the run's worker has started (its
calibration taken) and the static scan has let the file run, each imports the file and calls it once on
its share of the run's shapes, with the inputs of the cases' public seeds (never the secret's). Then
they are stopped, everything they started killed, and the run's worker imports the file and finds its
kernels compiled.

Only compiled code is shared: what the workers measure runs beside one another on one GPU, so no tuning
of theirs may reach the run's worker. Each has Inductor's cache in a folder of its own (torch.compile's
autotuning stays there), and the tuning results Triton's autotuner stores in the entry (``*.autotune.json``,
``cache_results``) that appeared while they ran are deleted once they are stopped.

Nothing of the submission runs beside the run's own worker: the compile-ahead workers run its code only
while that worker waits between its start and the import, and none is alive when it imports the file.
They time nothing (no launch gate) and their replies decide nothing, but for one rule: a call that runs
past a shape's first-call limit (``harness.engine.deadlines``) ends the run with ``timeout``, as it
would have in the run's worker, so a file that hangs is not given that limit twice. Any other failure
(an import error or an import that outlasts the run's time limit, a crash, an exception in a call) is
forgotten: the run's worker meets it and reports it. Without the warm-worker pool nothing is compiled
ahead: a spawned worker imports torch afresh, which takes longer than compiling in line.

On by default on a GPU, for an entry not compiled ahead before (a marker beside the entry, where no
worker can write); ``--compile-ahead on`` also on the CPU (tests), ``off`` never.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.engine import verdicts
from harness.engine.compile_cache import CacheEntry
from harness.engine.context import RunContext, fmt_spec
from harness.engine.deadlines import CallLimit, first_call_budget, shape_key
from harness.engine.device import host_gpu_count, usable_cores
from harness.engine.pool import WorkerPool, shared_pool
from harness.engine.supervisor import Siblings, Supervisor, WorkerFailure
from harness.requests import Call, Generate, Load, Request
from harness.results import TIMEOUT
from harness.worker.config import WorkerConfig

MAX_WORKERS = 8  # and at most half of this GPU's share of the cores: compilation is the host's work
MARKER_SUFFIX = ".ahead"  # <entry folder>.ahead: this entry was compiled ahead once
STOP_GRACE_S = 10.0  # after the run's deadline, how long the workers' threads get to see their workers killed


def marker(entry: CacheEntry) -> Path:
    return Path(entry.folder + MARKER_SUFFIX)


def wanted(policy: str, gpu: bool, entry: CacheEntry | None) -> bool:
    """Whether a run compiles ahead: for an entry not compiled ahead before (no entry: the caches are in
    the run's folder, empty every time), under ``auto`` on a GPU and under ``on`` anywhere."""
    new = entry is None or not marker(entry).exists()
    return new and (policy == "on" or (policy == "auto" and gpu))


def shapes(ctx: RunContext) -> list[dict[str, Any]]:
    """The spec of each distinct shape the run calls (tests and timed cases), with the case's public seed."""
    specs: dict[str, dict[str, Any]] = {}
    for _kind, case in verdicts.planned_cases(ctx.task, ctx.mode, ctx.ranked):
        spec = ctx.case_spec(case)
        specs.setdefault(shape_key(spec), spec)
    return list(specs.values())


def worker_count(shapes: int, cores: int, gpus: int) -> int:
    """One worker a shape, at most :data:`MAX_WORKERS` and half of the cores that fall to one GPU of the
    host: on a machine whose GPUs each run a job (run-all with Ray), the jobs that compile ahead at once
    leave half the cores to the ones being timed."""
    return max(1, min(shapes, MAX_WORKERS, cores // (2 * max(1, gpus))))


@dataclass
class AheadRecord:
    """What the compile-ahead step did (``RunResult.compile_ahead``)."""

    workers: int
    shapes: int
    wall_s: float = 0.0
    compiled: int = 0  # shapes whose first call returned
    failures: list[str] = field(default_factory=list)  # why a worker stopped early (the run reports the same)
    timed_out: bool = False
    discarded_tunings: int = 0  # Triton autotuning results they stored, deleted (measured beside one another)


class CompileAhead:
    """Started with the run's worker (:meth:`start`), let run the file once that worker has started and
    the scan passed (:meth:`release`), finished before that worker's import (:meth:`finish`)."""

    def __init__(
        self,
        ctx: RunContext,
        config: WorkerConfig,
        memory_limit: int,
        entry: CacheEntry | None,
        workers: int | None = None,
        siblings: Siblings | None = None,
    ):
        """``workers``: how many (at most one a shape); default :func:`worker_count`'s. ``siblings``: the
        workers that live beside these (a compile round's other files), else a set of their own."""
        self.ctx, self.entry, self.memory_limit = ctx, entry, memory_limit
        todo = shapes(ctx)
        if workers is None:
            workers = worker_count(len(todo), usable_cores(), host_gpu_count() if ctx.gpu else 1)
        count = max(1, min(workers, len(todo)))
        self.groups = [todo[i::count] for i in range(count)]
        folder = config.run_dir or os.path.dirname(config.stdout_path)
        self.configs = [  # output and Inductor caches of their own (discarded with the run's folder)
            dataclasses.replace(
                config,
                hide_bytes=0,  # no launch gate: they time nothing, and the gate's check would slow their start
                stdout_path=os.path.join(folder, f"ahead-{i}-stdout.txt"),
                stderr_path=os.path.join(folder, f"ahead-{i}-stderr.txt"),
                env=dict(config.env, TORCHINDUCTOR_CACHE_DIR=os.path.join(folder, f"ahead-{i}-inductor")),
            )
            for i in range(count)
        ]
        self.triton_dir = config.env.get("TRITON_CACHE_DIR")
        self._tunings_before = self._tunings()
        self._tunings_discarded = False
        self.first_call_s = self.first_call_limit(ctx)
        self.record = AheadRecord(workers=count, shapes=len(todo))
        self.timeout: tuple[dict[str, Any], str] | None = None  # (the shape's spec, the message)
        self.siblings = siblings or Siblings()  # the run's worker joins them (WorkerSession.siblings)
        self._go = threading.Event()  # the run's worker has started and the scan let the file run
        self._sups: list[Supervisor] = []
        self._lock = threading.Lock()
        self._closing = False
        self._threads: list[threading.Thread] = []
        self._t0 = time.monotonic()

    @staticmethod
    def first_call_limit(ctx: RunContext) -> float:
        """Seconds a worker's first call on a shape may take (compilation included), as in the run."""
        outer = verdicts.first_timeout(ctx.task, ctx.mode, ctx.ranked)
        return first_call_budget(ctx.gpu, outer) * ctx.opt.timeout_scale

    def start(self, deadline: float) -> None:
        self._t0 = time.monotonic()
        pool = shared_pool(interpret=not self.ctx.gpu)
        if pool is None or pool.broken:  # a spawned worker imports torch afresh: slower than compiling in line
            self.record.failures.append("no warm-worker pool to fork from: nothing compiled ahead")
            return
        self.ctx.progress(f"compiling ahead: {self.record.shapes} shapes in {self.record.workers} workers")
        for i, group in enumerate(self.groups):
            args = (i, group, pool, deadline)
            thread = threading.Thread(target=self._work, args=args, name=f"ahead-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _work(self, i: int, group: list[dict[str, Any]], pool: WorkerPool, deadline: float) -> None:
        sup = Supervisor(self.configs[i], self.memory_limit, frames_device=self.ctx.device, siblings=self.siblings)
        with self._lock:
            if self._closing:
                return
            self._sups.append(sup)  # from here on finish() stops it, whatever this thread does
        spec, calling = group[0], False  # the shape being called, named if that call runs past its limit
        try:
            sup.start(deadline, pool)
            self._go.wait(max(0.0, deadline - time.monotonic()))
            if not self._ok(sup, Load(), deadline, "importing the submission to compile ahead"):
                return
            if not self._ok(sup, Generate(specs=group), deadline, "generating inputs to compile ahead"):
                return
            for slot, spec in enumerate(group):
                what = f"compiling ahead on {fmt_spec(spec)}"
                limit = CallLimit(self.first_call_s, "the first call on a shape, compilation included")
                late = limit.message(what) + "; or give --compile-ahead off"
                end = min(deadline, time.monotonic() + self.first_call_s)
                calling = True
                if not self._ok(sup, Call(data=slot), end, what, late):
                    return
                calling = False
                with self._lock:
                    self.record.compiled += 1
        except WorkerFailure as failure:
            with self._lock:
                if calling and failure.verdict == TIMEOUT and self.timeout is None and not self._closing:
                    self.timeout = (spec, failure.message)
                    self.record.timed_out = True
                elif not self._closing:
                    self.record.failures.append(failure.message)

    def release(self) -> None:
        """The run's worker has started and the static scan let the file run: the workers may import it."""
        self._go.set()

    def _ok(self, sup: Supervisor, msg: Request, deadline: float, what: str, late: str | None = None) -> bool:
        """Whether the worker's reply to ``msg`` says it went well (its contents are not used); a failed
        reply is recorded, and the worker stops there."""
        if self._closing:
            return False
        header, _payloads = sup.request(msg, deadline, what, late)
        if header.get("ok") is True:
            return True
        with self._lock:
            self.record.failures.append(f"{what}: {str(header.get('error', 'failed'))[:300]}")
        return False

    def finish(self, deadline: float) -> AheadRecord:
        """Waits for the workers (at most until ``deadline``), then stops them all and kills whatever
        they started; marks the entry compiled ahead when every shape's first call returned."""
        with self.ctx.phases.measure("compile_ahead"):
            for thread in self._threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            self.close()
        self.record.wall_s = time.monotonic() - self._t0
        if self.entry is not None and self.record.compiled == self.record.shapes:
            try:
                marker(self.entry).touch()
            except OSError:
                pass  # compiled ahead again next time
        return self.record

    def _tunings(self) -> set[Path]:
        """The autotuning results Triton's autotuner stored in the cache (``<key>/<kernel>.autotune.json``)."""
        return set(Path(self.triton_dir).glob("*/*.autotune.json")) if self.triton_dir else set()

    def close(self) -> None:
        """Stops every worker (all asked to exit at once, then each stopped and its tree killed); safe to
        call more than once, and from the run's clean-up when the run ended early."""
        with self._lock:
            self._closing = True
            sups = list(self._sups)
        self._go.set()  # a worker still waiting for release() sees the closing and stops
        for sup in sups:
            sup.retire()
        for sup in sups:
            sup.stop()
        for thread in self._threads:
            thread.join(STOP_GRACE_S)
        for sup in sups:  # one whose start was under way above has its worker now
            sup.stop()
        if not self._tunings_discarded:  # once: a second call comes after the run's worker may have tuned
            self._tunings_discarded = True
            for tuned in self._tunings() - self._tunings_before:  # measured beside the other workers: not kept
                tuned.unlink(missing_ok=True)
                self.record.discarded_tunings += 1
        with self.siblings.lock:  # they are reaped: a later process with one of their ids is nobody's sibling
            self.siblings.pids -= {sup.pid for sup in sups}
