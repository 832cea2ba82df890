"""Warm workers: a long-lived server (:mod:`harness.worker.zygote`) that has imported torch and triton,
created no CUDA context, and forks each job's worker in well under a second (a spawned worker imports
torch afresh: 5-7 s on the H200).

One pool per process (:func:`shared_pool`): ``run``, each job of ``run-all`` (serial, or in a Ray
worker process, which has a pool of its own) and every block of a ranked verdict fork from it. The
server gets this process's environment without :data:`HIDDEN_ENV` (the secret, the store's URL) and
receives only worker configurations, which it never unpickles (the worker does): it holds no input, no
reference output and nothing of a submission. A pool that cannot start or has died returns None from
:meth:`WorkerPool.fork`, with the reason in :attr:`WorkerPool.broken`; the caller then spawns a worker
as before and warns.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

import psutil

from harness.engine.seeds import SECRET_ENV
from harness.worker.config import WorkerConfig
from harness.worker.zygote import MAX_REQUEST_BYTES, ForkRequest

# what every worker needs, imported once by the server: torch, triton and the worker's own modules, none
# of which may ask the CUDA runtime anything at import (torch.cuda.is_available() on a GPU alone leaves
# torch unusable in a forked child; the server reports whether it did: ``_cuda_initialized``)
PRELOAD = ("torch", "triton")
WORKER_PRELOAD = (
    "yaml",
    "fp4_reference",
    "tasks._check",
    "tasks.registry",
    "harness.protocol",
    "harness.requests",
    "harness.messages",
    "harness.worker.config",
    "harness.worker.imports",
    "harness.worker.sandbox",
    "harness.worker.staging",
    "harness.worker.captured",
    "harness.worker.sampler",
    "harness.worker.kernel_only",
    "harness.worker.originals",
    "harness.worker.main",
    "harness.worker.entry",
)
# and on a GPU what Triton imports at a worker's first kernel launch (else every worker imports it again)
GPU_PRELOAD = ("triton.experimental.gluon", "triton.backends.nvidia.driver")
READY_TIMEOUT_S = 120.0  # the server's own imports (torch alone: 4-5 s on the H200; minutes on a loaded CPU)
FORK_TIMEOUT_S = 10.0
PR_SET_CHILD_SUBREAPER = 36
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/kfd")  # NVIDIA's driver, AMD's ROCm
DISABLE_ENV = "HARNESS_NO_WORKER_POOL"  # set to 1: every worker is spawned (a fresh interpreter)

# never in a worker's environment: the secret, and the results store's URL (it may carry a password)
HIDDEN_ENV = (SECRET_ENV, "HARNESS_STORE")

_LAUNCH = "import sys, json; sys.path[:] = json.loads(sys.argv[3]); from harness.worker.zygote import main; main()"


def become_subreaper() -> bool:
    """Linux: orphans of our descendants are re-parented to this process (a pooled worker's
    intermediate parent exits at once, so the worker becomes our child). False where unsupported."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _module_path() -> list[str]:
    """This process's ``sys.path`` with the working directory made absolute (the server's and each
    worker's, as multiprocessing's spawn passes it)."""
    return [os.path.abspath(p) if p in ("", ".") else p for p in sys.path]


def _worker_environ() -> dict[str, str]:
    """This process's environment without :data:`HIDDEN_ENV` (the server's own, which every worker can
    read in /proc/self/environ, and each request's)."""
    return {k: v for k, v in os.environ.items() if k not in HIDDEN_ENV}


def _tracker_fd() -> int | None:
    """This process's multiprocessing resource tracker (started by the supervisor), which a spawned
    worker inherits; a pooled one gets it too, so that neither starts a tracker of its own."""
    from multiprocessing import resource_tracker

    fd = getattr(resource_tracker._resource_tracker, "_fd", None)
    return fd if isinstance(fd, int) and fd >= 0 else None


class ForkedWorker:
    """A pooled worker, our child through the subreaper: the part of ``multiprocessing.Process`` the
    supervisor uses (``pid``, ``is_alive``, ``join``, ``kill``, ``exitcode``)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.exitcode: int | None = None
        self.ready_wait_s = 0.0  # how long its fork waited for the server's imports

    def _reap(self, block: bool) -> None:
        if self.exitcode is not None:
            return
        try:
            pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): alive while the process is
            if not _exists(self.pid):
                self.exitcode = -int(signal.SIGKILL)  # its real status is lost
            return
        if pid == self.pid:
            self.exitcode = os.waitstatus_to_exitcode(status)

    def is_alive(self) -> bool:
        self._reap(block=False)
        return self.exitcode is None

    def join(self, timeout: float | None = None) -> None:
        end = None if timeout is None else time.monotonic() + timeout
        while self.is_alive() and (end is None or time.monotonic() < end):
            time.sleep(0.01)

    def kill(self) -> None:
        if self.is_alive():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _exists(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@dataclass
class PoolInfo:
    """What the server reported when it became ready."""

    pid: int
    loaded: dict[str, str]
    start_s: float


class WorkerPool:
    """The server, started by :meth:`warm` (returns at once; the imports run while we work) and asked for
    workers by :meth:`fork`. Thread-safe; one request at a time."""

    def __init__(self, preload: tuple[str, ...] | None = None, interpret: bool = False):
        self.preload = preload if preload is not None else PRELOAD + WORKER_PRELOAD + (() if interpret else GPU_PRELOAD)
        # Triton decides at import whether its kernels run under the interpreter: a server that imported
        # it without TRITON_INTERPRET=1 forks workers whose Triton kernels cannot run on the CPU
        self.interpret = interpret
        self.broken: str | None = None  # why the pool cannot fork (None: usable, or not started)
        self.info: PoolInfo | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._lock = threading.Lock()
        self._started_at = 0.0

    @property
    def server_pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def warm(self) -> None:
        """Starts the server unless it runs (or is broken; then a new one replaces it)."""
        with self._lock:
            if self._proc is not None and self.broken is None and self._proc.poll() is None:
                return
            self._shutdown()
            self.broken, self.info = None, None
            if not become_subreaper():
                self.broken = "this system cannot make the harness a child subreaper (Linux only)"
                return
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            env = _worker_environ()
            if self.interpret:
                env["TRITON_INTERPRET"] = "1"
            command = [sys.executable, "-c", _LAUNCH, str(theirs.fileno()), json.dumps(list(self.preload))]
            command.append(json.dumps(_module_path()))
            try:
                self._proc = subprocess.Popen(
                    command,
                    pass_fds=(theirs.fileno(),),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,  # a Ctrl-C at the terminal is the harness's to handle
                )
            except OSError as exc:
                self.broken = f"the worker pool's server did not start ({exc})"
                ours.close()
                return
            finally:
                theirs.close()
            self._control, self._started_at = ours, time.monotonic()

    def wait_ready(self) -> bool:
        """Waits until the server has done its imports; whether it can serve (else :attr:`broken` says why)."""
        with self._lock:
            if self.broken is None and self.info is None and self._control is not None:
                try:
                    self._await_ready()
                except Exception as exc:
                    self.broken = f"the worker pool's server failed ({type(exc).__name__}: {exc})"
                    self._shutdown()
            return self.broken is None and self.info is not None

    def fork(self, channel: Connection, config: WorkerConfig) -> ForkedWorker | None:
        """A worker running ``config`` on ``channel`` (the worker's end; the caller closes its copy), or
        None with :attr:`broken` set when the pool cannot serve. A server that died is not replaced
        here (this job falls back to a spawned worker); the next :meth:`warm` replaces it."""
        if self._proc is None and self.broken is None:
            self.warm()
        with self._lock:
            if self.broken is None and self._proc is not None and self._proc.poll() is not None:
                self.broken = f"the worker pool's server died (exit status {self._proc.returncode})"
                self._shutdown()
            if self.broken is not None or self._control is None:
                return None
            try:
                waited = 0.0
                if self.info is None:
                    t0 = time.monotonic()
                    self._await_ready()
                    waited = time.monotonic() - t0
                worker = self._request(channel, config)
                worker.ready_wait_s = waited
                return worker
            except Exception as exc:  # whatever broke, the caller spawns the worker instead
                self.broken = f"the worker pool's server failed ({type(exc).__name__}: {exc})"
                self._shutdown()
                return None

    def _receive(self, timeout: float) -> dict:
        assert self._control is not None
        self._control.settimeout(timeout)
        data = self._control.recv(MAX_REQUEST_BYTES)
        if not data:
            raise ConnectionError("the server closed its end (it died)")
        reply = json.loads(data)
        if not isinstance(reply, dict):
            raise ValueError("a reply that is not an object")
        return reply

    def _await_ready(self) -> None:
        reply = self._receive(READY_TIMEOUT_S)
        loaded = {str(k): str(v) for k, v in reply["loaded"].items()}
        if reply.get("cuda"):
            raise ValueError("the server initialized CUDA while importing (forked workers could not use it)")
        failed = [f"{k} ({v})" for k, v in loaded.items() if v.startswith("error") and k == "torch"]
        if failed:
            raise ValueError("the server could not import " + ", ".join(failed))
        self.info = PoolInfo(int(reply["pid"]), loaded, time.monotonic() - self._started_at)

    def _request(self, channel: Connection, config: WorkerConfig) -> ForkedWorker:
        assert self._control is not None
        fds = [channel.fileno()]
        tracker = _tracker_fd()
        if tracker is not None:
            fds.append(tracker)
        environ = _worker_environ()
        request = ForkRequest(config, os.getpid(), environ, tracker=tracker is not None, sys_path=_module_path())
        socket.send_fds(self._control, [pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)], fds)
        try:
            pid = int(self._receive(FORK_TIMEOUT_S)["pid"])
        except BaseException as exc:
            if not isinstance(exc, Exception):  # a signal's (run-all's Stopped, Ctrl-C) with the request in flight
                self._reclaim()
            raise
        if pid <= 0:
            raise ValueError("the server could not fork a worker")
        worker = ForkedWorker(pid)
        try:
            parent = psutil.Process(pid).ppid()
        except psutil.NoSuchProcess:
            return worker  # died at once: the supervisor reads its exit status
        if parent != os.getpid():
            os.kill(pid, signal.SIGKILL)
            raise ValueError(f"the forked worker's parent is {parent}, not this process")
        return worker

    def _reclaim(self) -> None:
        """A fork request cut short by a signal before its reply was read: the server forks the worker
        anyway, and nobody would watch it (it would run in a run folder being removed). Its reply is
        read now and the worker killed and reaped, so that the next request reads its own reply; when
        the reply does not come, the server ends (the next :meth:`warm` starts another)."""
        try:
            pid = int(self._receive(FORK_TIMEOUT_S)["pid"])
        except BaseException:
            self.broken = "a fork request was interrupted and its reply did not come"
            self._shutdown()
            return
        if pid > 0:
            worker = ForkedWorker(pid)
            worker.kill()
            worker.join(FORK_TIMEOUT_S)

    def _shutdown(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait(5.0)
            self._proc = None

    def discard(self, reason: str) -> None:
        """Marks the pool broken (``reason``) and ends its server; the next :meth:`warm` starts another."""
        with self._lock:
            self.broken = f"the worker pool's server failed: {reason}"
            self._shutdown()

    def close(self) -> None:
        with self._lock:
            self._shutdown()


_shared: dict[bool, WorkerPool] = {}  # one server for GPU runs, one for CPU runs (Triton's interpreter)
_shared_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get(DISABLE_ENV, "") not in ("1", "true", "yes")


def shared_pool(interpret: bool = False) -> WorkerPool | None:
    """This process's pool for GPU runs, or for CPU runs with ``interpret`` (started on first use), or
    None when turned off ($HARNESS_NO_WORKER_POOL=1)."""
    if not enabled():
        return None
    with _shared_lock:
        if interpret not in _shared:
            import atexit

            _shared[interpret] = pool = WorkerPool(interpret=interpret)
            atexit.register(pool.close)
        return _shared[interpret]


def warm_shared_pool(device: str | None = None, wait: bool = False) -> None:
    """Starts this process's pool for runs on ``device`` (a name, as --device takes it; None: the one a
    run picks) now, so its imports overlap with the caller's own. Torch-free (the caller has not imported
    torch yet when the CLI calls this): "auto" means a GPU where the system has a GPU driver's device
    node. A wrong guess only costs an idle server: the run warms the pool its device needs. ``wait``:
    returns once the server has done its imports (a verdict server's start)."""
    name = (device or "auto").strip().lower()
    if name == "auto":
        interpret = not any(os.path.exists(node) for node in GPU_DEVICE_NODES)
    elif name == "cpu" or name.startswith("cuda"):
        interpret = name == "cpu"
    else:
        return  # a bad --device is reported by the run itself
    pool = shared_pool(interpret)
    if pool is not None:
        pool.warm()
        if wait:
            pool.wait_ready()
