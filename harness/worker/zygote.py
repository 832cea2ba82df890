"""The warm-worker server (the "zygote"): a freshly started interpreter that imports torch and triton
once, creates no CUDA context, and forks one worker per request from the harness.

Why not :mod:`multiprocessing.forkserver`: its server listens on a unix socket *path*, which a worker
that stays root without capabilities, or runs as the harness's own user, can still reach (Landlock's
ABI 7 does not control connecting to pathname sockets); a submission could then ask the server, which
runs outside the sandbox, to fork a pickled payload. This server has no path and no listener: it talks
to the harness over the one end of a ``SOCK_SEQPACKET`` socket pair the harness gave it, and every
forked worker closes that end before anything else runs.

Each request is a :class:`ForkRequest` and one file descriptor (the worker's end of its channel). The
server forks an intermediate process, which forks the worker and exits: the worker is re-parented to
the harness (a child subreaper, ``harness.engine.supervisor``), which waits for it, kills it and reads
its exit status like any child of its own. The worker then confines itself exactly as a spawned worker
does (:func:`harness.worker.entry.start`). Nothing a submission does reaches the server or the next
worker: each worker is a copy of the server's memory, which never ran a submission.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import signal
import socket
import struct
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

from harness.worker.config import WorkerConfig

MAX_REQUEST_BYTES = 1 << 20
REPARENT_WAIT_S = 5.0
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4


@dataclass
class ForkRequest:
    """What the harness asks for: a worker with ``config`` whose parent becomes ``harness_pid``, in the
    harness's environment as it is now (``environ``: a Ray worker's CUDA_VISIBLE_DEVICES changes from
    task to task). ``tracker``: a second descriptor comes along, the harness's multiprocessing resource
    tracker, which a spawned worker inherits too."""

    config: WorkerConfig
    harness_pid: int
    environ: dict[str, str]
    tracker: bool = False


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _protect_server() -> None:
    """The server ends when the harness that started it dies, and is undumpable: its /proc files
    (mem, fd, environ) and ptrace need CAP_SYS_PTRACE, which no worker has (a worker that stays root
    drops every capability)."""
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    _prctl(PR_SET_DUMPABLE, 0)


def _preload(names: list[str]) -> dict[str, str]:
    """Imports ``names``; what each gave (a version, or the error), for the harness's record."""
    loaded = {}
    for name in names:
        try:
            module = importlib.import_module(name)
            loaded[name] = str(getattr(module, "__version__", "imported"))
        except Exception as exc:
            loaded[name] = f"error: {type(exc).__name__}: {exc}"
    return loaded


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def _adopt(request: ForkRequest, fds: list[int]) -> Connection:
    """The harness's environment and resource tracker, as a spawned worker has them; the channel."""
    os.environ.clear()
    os.environ.update(request.environ)
    if request.tracker and len(fds) > 1:
        from multiprocessing import resource_tracker

        resource_tracker._resource_tracker._fd = fds[1]  # type: ignore[attr-defined]
    return Connection(fds[0])


def _become_worker(request: ForkRequest, fds: list[int]) -> None:
    """In the forked worker: waits until the harness is its parent, then runs the worker; never returns."""
    code = 1
    try:
        _prctl(PR_SET_DUMPABLE, 1)  # as a spawned worker is (a change of user resets it again)
        end = time.monotonic() + REPARENT_WAIT_S
        while os.getppid() != request.harness_pid and time.monotonic() < end:
            time.sleep(0.001)
        if os.getppid() == request.harness_pid:
            from harness.worker.entry import start

            start(_adopt(request, fds), request.config)
            code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _fork_worker(control: socket.socket, request: ForkRequest, fds: list[int]) -> int:
    """Forks the worker through an intermediate process that exits at once; the worker's pid."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            control.close()
            os.close(read_end)
            worker = os.fork()
            if worker == 0:
                os.close(write_end)
                _become_worker(request, fds)
            os.write(write_end, struct.pack("q", worker))
        finally:
            os._exit(0)
    os.close(write_end)
    for fd in fds:
        os.close(fd)
    try:
        raw = os.read(read_end, 8)
    finally:
        os.close(read_end)
        os.waitpid(middle, 0)
    return struct.unpack("q", raw)[0] if len(raw) == 8 else -1


def serve(control: socket.socket, preload: list[str]) -> None:
    """Imports ``preload``, reports, then forks a worker per request until the harness hangs up."""
    loaded = _preload(preload)
    control.send(
        json.dumps({"ready": True, "pid": os.getpid(), "loaded": loaded, "cuda": _cuda_initialized()}).encode()
    )
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_REQUEST_BYTES, 2)
        except (ConnectionError, OSError):
            return
        if not data:
            return
        request = pickle.loads(data)  # from the harness: only it holds the other end of this socket pair
        if not isinstance(request, ForkRequest) or len(fds) != 1 + request.tracker:
            for fd in fds:
                os.close(fd)
            control.send(json.dumps({"pid": -1, "error": "a malformed request"}).encode())
            continue
        pid = _fork_worker(control, request, fds)
        control.send(json.dumps({"pid": pid}).encode())


def main() -> None:
    """``python -c ... main()`` with argv: the control socket's fd, then the modules to preload (JSON)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness decides when the server ends
    _protect_server()
    fd, preload = int(sys.argv[1]), json.loads(sys.argv[2])
    control = socket.socket(fileno=fd)
    try:
        serve(control, preload)
    finally:
        control.close()
