"""Starts, feeds, watches and ends the worker process that runs a submission.

The supervisor turns every way a worker can go wrong into an exception with a verdict and a
one-paragraph message: it died (signal, exit code, os._exit), ran past its deadline, took too much
host memory, flooded its output, or sent a malformed message. It always kills the worker's whole
process group, and any process the submission started elsewhere, when it stops.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.reduction
import multiprocessing.resource_tracker
import os
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import NoReturn, Protocol

import psutil
import torch
import torch.multiprocessing as mp

from harness import protocol
from harness.channel import REPLY_GRACE_S, FrameReader, ReplyStalled
from harness.engine import process_tree
from harness.engine.pool import WorkerPool, become_subreaper
from harness.requests import Exit, Proceed, Request
from harness.results import ERROR, REJECTED, TIMEOUT
from harness.shared_outputs import SharedOutputs
from harness.worker.config import WorkerConfig
from harness.worker.entry import start as worker_start

OUTPUT_KEEP_BYTES = 8 << 10
DESCENDANT_SCAN_EVERY = 10  # memory polls between scans for the worker's descendants   # of the submission's stdout/stderr we keep the first and the last this many


class WorkerFailure(Exception):
    """The worker cannot go on; ``verdict`` says how the case that was running ends."""

    def __init__(self, verdict: str, message: str):
        super().__init__(message)
        self.verdict = verdict
        self.message = message


class WorkerProcess(Protocol):
    """What the supervisor uses of its worker: a spawned ``multiprocessing.Process`` or a pooled
    :class:`harness.engine.pool.ForkedWorker`."""

    @property
    def pid(self) -> int | None: ...

    @property
    def exitcode(self) -> int | None: ...

    def is_alive(self) -> bool: ...

    def join(self, timeout: float | None = None) -> None: ...

    def kill(self) -> None: ...


class Siblings:
    """Workers of one run that live at once (its worker and its compile-ahead workers,
    ``harness.engine.compile_ahead``): none is another's stray. Each adds its pid under :attr:`lock` as
    it is forked, and a supervisor lists its strays under the same lock, so that none ever sees a sibling
    before it is named here."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pids: set[int] = set()


class Supervisor:
    def __init__(
        self,
        cfg: WorkerConfig,
        memory_limit_bytes: int,
        poll_s: float = 0.5,
        frames_device: torch.device | None = None,
        siblings: Siblings | None = None,
    ):
        """``frames_device``: where the tensors of the worker's replies land (the run's device)."""
        self.cfg = cfg
        self._siblings = siblings
        self._frames = FrameReader(frames_device)
        self.memory_limit = memory_limit_bytes
        self.poll_s = poll_s
        self.proc: WorkerProcess | None = None
        self.conn: Connection | None = None
        self._killed_for: str | None = None  # why the watchdog killed the worker
        self._stop = threading.Event()
        self.pid = 0
        self._seq = 0
        self._before: set[int] = set()  # our children that existed before the worker started
        self._seen: dict[int, float] = {}  # pid -> create time of every process seen in the worker's tree
        self.started_by = "spawn"  # or "pool": forked by the warm-worker pool (harness.engine.pool)
        self._starting = False  # start() has begun
        self._pool: WorkerPool | None = None
        self.pool_warning: str | None = None  # why a pool given to start() was not used
        self.pool_ready_wait_s = 0.0  # how long the pool's fork waited for its server's imports
        self.shared: SharedOutputs | None = None  # where the worker places its replies' outputs, if anywhere
        self._exit_sent = False  # retire() asked the worker to exit
        self._spared: set[int] = set()  # our children that stop() leaves alone (the next worker, the pool's server)
        self._go = threading.Event()  # a held worker (cfg.hold) may go on: proceed(), or stop() to end its start

    @property
    def siblings(self) -> Siblings | None:
        return self._siblings

    # -- life cycle ----------------------------------------------------------------------------------
    def start(self, deadline: float, pool: WorkerPool | None = None) -> protocol.Message:
        """Starts the worker, forked by ``pool`` when it can (else spawned: a fresh interpreter, and
        :attr:`pool_warning` says why); its first message (header, payloads), the calibration."""
        # orphans of the worker's tree (a double fork, setsid) and pooled workers become our children
        become_subreaper()
        multiprocessing.resource_tracker.ensure_running()  # a child of ours, but not the submission's
        self._before = {p.pid for p in process_tree.children(os.getpid())}
        self._starting = True  # until the worker is ours to stop (see stop)
        first = self._start_pooled(pool, deadline) if pool is not None else None
        if first is None:
            first = self._start_spawned(deadline)
        # watched from here on: nothing of the submission ran before its first message
        threading.Thread(target=self._watch_memory, daemon=True).start()
        return first

    def _start_pooled(self, pool: WorkerPool, deadline: float) -> protocol.Message | None:
        """A worker forked by ``pool`` and its first message; None (and :attr:`pool_warning`) when the
        pool cannot serve or its worker died before that message (before any submission code ran: the
        pool's failure, never the submission's), so that a spawned worker takes over."""
        self.conn, child = multiprocessing.Pipe(duplex=True)
        self._pool = pool
        with self._sibling_lock():
            forked = pool.fork(child, self.cfg)
            if forked is not None and self._siblings is not None:
                self._siblings.pids.add(forked.pid)
        if forked is not None:
            self.proc, self.pid, self.started_by = forked, forked.pid, "pool"
            self.pool_ready_wait_s = forked.ready_wait_s
        child.close()
        if pool.server_pid is not None:
            self._before.add(pool.server_pid)  # started just now, maybe: the harness's, not the submission's
        if forked is None:
            self.pool_warning = f"the warm-worker pool was not used: {pool.broken}; the worker was spawned"
            self.conn.close()
            return None
        try:
            self._release_held(deadline)
            return self._receive(deadline, what="starting the worker")
        except WorkerFailure as failure:
            if failure.verdict == TIMEOUT or self._stop.is_set():  # stopped while it started: not the pool's fault
                raise
            pool.discard(f"a worker it forked died before it started ({failure.message})")
            self.pool_warning = f"the warm-worker pool was not used: {pool.broken}; the worker was spawned"
            self.conn.close()
            self.proc, self.started_by = None, "spawn"
            return None

    def _start_spawned(self, deadline: float) -> protocol.Message:
        self.conn, child = multiprocessing.Pipe(duplex=True)
        spawned = mp.get_context("spawn").Process(target=worker_start, args=(child, self.cfg), name="harness-worker")
        with self._sibling_lock():
            spawned.start()
            if self._siblings is not None and spawned.pid:
                self._siblings.pids.add(spawned.pid)
        child.close()
        self.proc, self.pid, self.started_by = spawned, int(spawned.pid or 0), "spawn"
        self._release_held(deadline)
        return self._receive(deadline, what="starting the worker")

    def proceed(self) -> None:
        """Lets a held worker (``WorkerConfig.hold``: :meth:`start` runs in a thread of its own and waits
        here) go on from its CUDA context to its sampler, calibration and first message."""
        self._go.set()

    def _release_held(self, deadline: float) -> None:
        """For a held worker: waits for :meth:`proceed` (or :meth:`stop`), then tells the worker."""
        if not self.cfg.hold:
            return
        self._go.wait(max(0.0, deadline - time.monotonic()))
        if self._stop.is_set():  # cancelled while held: it never goes on, and no other worker replaces it
            self._kill_everything()
            raise WorkerFailure(ERROR, "the worker was stopped while it was held, before its start went on")
        if self._go.is_set() and self.conn is not None:
            try:
                protocol.send_to_worker(self.conn, Proceed())
            except (OSError, ValueError):
                pass  # dead already: _receive says so

    def retire(self) -> None:
        """Asks the worker to exit and returns at once, so that the next worker can start while this one
        ends (its CUDA context's teardown); :meth:`stop`, sparing the next worker, then finishes."""
        self._stop.set()  # the memory watch ends here: it would take the next worker for a stray of this one
        if self.proc is None or self.conn is None or not self.proc.is_alive():
            return
        try:
            protocol.send_to_worker(self.conn, Exit())
            self._exit_sent = True
        except (OSError, ValueError):
            pass

    def stop(self, spare: tuple[int, ...] = ()) -> None:
        """Ends the worker and everything it started; safe to call more than once. ``spare``: our
        children that are not this worker's to kill (the next worker, started after :meth:`retire`)."""
        self._stop.set()
        self._go.set()  # a start that waits for proceed() ends (its worker is killed below)
        self._spared.update(spare)
        if self._pool is not None and self._pool.server_pid is not None:
            self._spared.add(self._pool.server_pid)  # the pool's server may have been replaced since start()
        if self.proc is None:
            self._kill_unclaimed()
            return
        if self.conn is None:
            return
        if self.proc.is_alive():
            try:
                if not self._exit_sent:
                    protocol.send_to_worker(self.conn, Exit())
                self.proc.join(2.0)
            except (OSError, ValueError):
                pass
        self._kill_everything()
        self.proc.join(5.0)
        self.conn.close()
        self.use_shared(None)

    def give_descriptor(self, fd: int) -> None:
        """Sends the worker ``fd`` on the channel (right after a request that expects it)."""
        assert self.conn is not None, "start() first"
        multiprocessing.reduction.send_handle(self.conn, fd, self.pid)

    def use_shared(self, region: SharedOutputs | None) -> None:
        """Reads the outputs the worker places in ``region`` from now on (None: closes the one in use)."""
        if self.shared is not None and self.shared is not region:
            self.shared.close()
        self.shared = self._frames.shared = region

    def strays(self) -> list[psutil.Process]:
        """Every process the submission started that is still alive: the worker's descendants, and
        orphans re-parented to us (we are a subreaper) since the worker started."""
        out = process_tree.descendants(self.pid)
        for p in self._new_children(but=self.pid):
            out.append(p)
            out.extend(process_tree.descendants(p.pid))
        for p in out:
            try:
                self._seen.setdefault(p.pid, p.create_time())
            except psutil.Error:
                pass
        return [p for p in out if _alive(p)]

    def _new_children(self, but: int | None) -> list[psutil.Process]:
        """Our children that were not ours when the worker started, ``but`` aside (the worker, or the
        pool's server), and those :meth:`stop` spares."""
        with self._sibling_lock(), process_tree.HELPERS_LOCK:  # in this order (the scan takes the second alone)
            skip = self._before | self._spared | process_tree.HELPER_PIDS
            skip |= self._siblings.pids if self._siblings is not None else set()
            return [p for p in process_tree.children(os.getpid()) if p.pid not in skip and p.pid != but]

    def _sibling_lock(self) -> contextlib.AbstractContextManager[object]:
        return self._siblings.lock if self._siblings is not None else contextlib.nullcontext()

    def forget_gone(self) -> None:
        """Drops the processes that have ended from those that were ours before the worker started (the
        previous worker, reaped after this one started): a process that reuses one of their ids later is
        the submission's."""
        self._before &= {p.pid for p in process_tree.children(os.getpid())}

    def _kill_unclaimed(self) -> None:
        """A signal cut :meth:`start` short before the worker was ours (forked by the pool or spawned,
        but not yet handed over): our children that appeared since then, the pool's server aside, are
        killed and reaped, so that none runs on in a run folder being removed."""
        if not self._starting:
            return
        self._starting = False
        server = self._pool.server_pid if self._pool is not None else None
        try:
            ours = self._new_children(but=server)
            for p in ours:
                p.kill()
            psutil.wait_procs(ours, timeout=2.0)
        except psutil.Error:
            pass

    def _kill_everything(self) -> None:
        descendants = self.strays()
        for pid, created in list(self._seen.items()):  # seen earlier, since left the tree
            try:
                p = psutil.Process(pid)
                if p.create_time() == created and all(p.pid != d.pid for d in descendants):
                    descendants.append(p)
            except psutil.Error:
                pass
        try:
            os.killpg(self.pid, signal.SIGKILL)  # the worker called setsid(): its pgid is its pid
        except (ProcessLookupError, PermissionError):
            pass
        for p in descendants:  # those that left the group with setsid() too
            try:
                p.kill()
            except psutil.Error:
                pass
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
        try:  # reap the orphans that became our children
            ours = self._new_children(but=self.pid)
            psutil.wait_procs(ours, timeout=2.0)
        except psutil.Error:
            pass

    def _watch_memory(self) -> None:
        """Kills the worker's tree when its host memory passes the limit. Reading the worker's own RSS is
        one /proc read; finding its descendants scans every process on the machine, which on a 2-core
        machine slowed the measured submission down by up to 8x when done every 0.2 s: so the tree is
        rescanned only every ``DESCENDANT_SCAN_EVERY`` polls."""
        procs, polls = [], 0
        while not self._stop.wait(self.poll_s):
            try:
                if polls % DESCENDANT_SCAN_EVERY == 0:
                    procs = [psutil.Process(self.pid), *self.strays()]
                polls += 1
                rss = 0
                for p in procs:
                    try:
                        rss += p.memory_info().rss
                    except psutil.NoSuchProcess:
                        pass
            except psutil.Error:
                return
            if rss > self.memory_limit:
                self._killed_for = (
                    f"the submission used {rss / 2**30:.1f} GiB of host memory, over the "
                    f"limit of {self.memory_limit / 2**30:.1f} GiB (--memory-limit-gb)"
                )
                self._kill_everything()
                return

    # -- messages ------------------------------------------------------------------------------------
    def request(
        self,
        msg: Request,
        deadline: float,
        what: str,
        late: str | None = None,
        meanwhile: Callable[[], None] | None = None,
    ) -> protocol.Message:
        """Sends ``msg`` and returns the reply (header, payloads) in sequence, its fields not yet read
        (``harness.messages`` decodes them); raises WorkerFailure. ``late``: the timeout's message when
        ``deadline`` is a per-call limit (``harness.engine.deadlines``) rather than the task's.
        ``meanwhile``: the parent's own work, done while the worker works on ``msg``."""
        self._seq += 1
        assert self.conn is not None, "start() first"
        try:
            protocol.send_to_worker(self.conn, msg, seq=self._seq)
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self._raise_dead(what)
        if meanwhile is not None:
            meanwhile()
        header, payloads = self._receive(deadline, what, late)
        if header.get("seq") != self._seq:
            self._kill_everything()
            raise WorkerFailure(
                REJECTED,
                f"a reply out of sequence while {what} (request {self._seq}, reply "
                f"{header.get('seq')!r}): the submission wrote its own frames into "
                "the harness's channel",
            )
        return header, payloads

    def _receive(self, deadline: float, what: str, late: str | None = None) -> protocol.Message:
        assert self.conn is not None and self.proc is not None, "start() first"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill_everything()
                raise WorkerFailure(
                    TIMEOUT,
                    late
                    or f"timed out while {what}: the task's time limit for this mode ran "
                    "out (the submission hung, or is far too slow)",
                )
            try:
                ready = self.conn.poll(min(remaining, self.poll_s))
            except (EOFError, OSError):
                self._raise_dead(what)
            if ready:
                try:
                    return protocol.receive(self.conn, self._frames)
                except EOFError:
                    self._raise_dead(what)
                except ReplyStalled:
                    self._kill_everything()
                    raise WorkerFailure(
                        TIMEOUT,
                        f"timed out while {what}: the worker's reply stopped part-way for {REPLY_GRACE_S:.0f} s "
                        "(the submission wrote into the harness's channel and hung, or the worker died while a "
                        "process it started kept the channel open)",
                    ) from None
                except protocol.ProtocolError as exc:
                    self._kill_everything()
                    raise WorkerFailure(
                        REJECTED,
                        f"malformed message from the worker while {what} ({exc}); "
                        "the submission wrote into the harness's channel",
                    ) from exc
            elif not self.proc.is_alive():
                self._raise_dead(what)

    def _raise_dead(self, what: str) -> NoReturn:
        assert self.proc is not None, "start() first"
        self.proc.join(2.0)
        if self._killed_for:
            raise WorkerFailure(ERROR, f"killed while {what}: {self._killed_for}")
        code = self.proc.exitcode
        if code is not None and code < 0:
            sig = signal.Signals(-code)
            if sig == signal.SIGXFSZ:
                reason = (
                    f"it wrote more than {self.cfg.output_limit_bytes >> 20} MiB to stdout/stderr or files "
                    "(output flood); remove the prints"
                )
            elif sig == signal.SIGSEGV:
                reason = "it crashed with a segmentation fault (SIGSEGV): an invalid memory access"
            elif sig == signal.SIGKILL:
                reason = "it was killed (SIGKILL): it killed itself, or the system ran out of memory"
            else:
                reason = f"it was ended by signal {sig.name}"
        elif code is not None:
            reason = f"it exited with code {code} (os._exit or a fatal error) before it answered"
        else:
            reason = "it stopped answering"
        self._kill_everything()
        raise WorkerFailure(ERROR, f"the worker died while {what}: {reason}")

    # -- output --------------------------------------------------------------------------------------
    def captured_output(self) -> tuple[str, str]:
        return _read_capped(self.cfg.stdout_path), _read_capped(self.cfg.stderr_path)

    def output_cut_bytes(self) -> tuple[int, int]:
        """How many bytes of (stdout, stderr) :meth:`captured_output` leaves out (0: all of it kept)."""
        return _cut_bytes(self.cfg.stdout_path), _cut_bytes(self.cfg.stderr_path)


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _cut_bytes(path: str) -> int:
    try:
        return max(0, os.path.getsize(path) - 2 * OUTPUT_KEEP_BYTES)
    except OSError:
        return 0


def _read_capped(path: str) -> str:
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            if size <= 2 * OUTPUT_KEEP_BYTES:
                return f.read().decode(errors="replace")
            head = f.read(OUTPUT_KEEP_BYTES)
            f.seek(size - OUTPUT_KEEP_BYTES)
            tail = f.read()
        skipped = size - 2 * OUTPUT_KEEP_BYTES
        return head.decode(errors="replace") + f"\n[... {skipped} bytes left out ...]\n" + tail.decode(errors="replace")
    except OSError:
        return ""
