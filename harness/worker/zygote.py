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

import array
import importlib
import json
import os
import pickle
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

from harness.worker.config import WorkerConfig

MAX_REQUEST_BYTES = 1 << 20
REPARENT_WAIT_S = 5.0
PR_SET_DUMPABLE = 4


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
    sys_path: list[str] | None = None  # the harness's module path now, as a spawned worker gets it


def _prctl(option: int, value: int) -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _protect_server() -> None:
    """The server is undumpable: its /proc files (mem, fd, environ) and ptrace need CAP_SYS_PTRACE,
    which no worker has (a worker that stays root drops every capability). It ends when the harness
    does: the harness's end of the socket pair closes (no parent-death signal, which fires when the
    *thread* that started the server ends)."""
    _prctl(PR_SET_DUMPABLE, 0)


def _preload(names: list[str]) -> dict[str, str]:
    """Imports ``names``; what each gave (a version, or the error), for the harness's record. With
    Triton compiling for a GPU, also its key (a hash of all of Triton's files, which every worker's first
    kernel launch would otherwise compute again); it touches no GPU. The interpreter needs none."""
    loaded: dict[str, str] = {}
    keying = None
    if "triton" in names and os.environ.get("TRITON_INTERPRET") != "1":
        # beside the other imports: reading and hashing Triton's files mostly releases the interpreter lock
        keying = threading.Thread(target=_triton_key, args=(loaded,), name="triton-key", daemon=True)
        keying.start()
    for name in names:
        try:
            module = importlib.import_module(name)
            loaded[name] = str(getattr(module, "__version__", "imported"))
        except Exception as exc:
            loaded[name] = f"error: {type(exc).__name__}: {exc}"
    if keying is not None:
        keying.join()  # before the server reports ready: it forks nothing while another thread runs
    return loaded


def _triton_key(loaded: dict[str, str]) -> None:
    try:
        import triton  # noqa: F401  (none: the server has no Triton, and no key)
    except Exception:
        return
    try:
        from triton.runtime.cache import triton_key

        triton_key()  # cached in the server's memory, so in every worker forked from it
        loaded["triton_key"] = "computed"
    except Exception as exc:
        loaded["triton_key"] = f"error: {type(exc).__name__}: {exc}"


def _cuda_initialized() -> bool:
    """Whether a forked child could not use CUDA: torch initialized it here, or something asked the CUDA
    runtime a question (``torch.cuda.is_available()`` on a GPU), after which torch refuses CUDA in a
    forked child. A probe child answers the second."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    if torch.cuda.is_initialized():
        return True
    pid = os.fork()
    if pid == 0:
        os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) != 0


def _adopt(request: ForkRequest, fds: list[int]) -> Connection:
    """The harness's environment and resource tracker, as a spawned worker has them; the channel."""
    os.environ.clear()
    os.environ.update(request.environ)
    if request.sys_path is not None:
        sys.path[:] = request.sys_path
    if request.tracker and len(fds) > 1:
        from multiprocessing import resource_tracker

        resource_tracker._resource_tracker._fd = fds[1]  # type: ignore[attr-defined]
    return Connection(fds[0])


def _become_worker(request_bytes: bytes, fds: list[int]) -> None:
    """In the forked worker: reads its request, waits until the harness is its parent, then runs the
    worker; never returns."""
    code = 1
    try:
        request = pickle.loads(request_bytes)  # from the harness: only it holds the control socket's other end
        if not isinstance(request, ForkRequest) or len(fds) != 1 + request.tracker:
            raise ValueError(f"a malformed request ({type(request).__name__}, {len(fds)} descriptors)")
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


def _fork_worker(control: socket.socket, request: memoryview, fds: list[int]) -> int:
    """Forks the worker through an intermediate process that exits at once; the worker's pid. Only the
    worker reads ``request``: the server never turns it into objects of its own."""
    read_end, write_end = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            control.close()
            os.close(read_end)
            worker = os.fork()
            if worker == 0:
                os.close(write_end)
                _become_worker(bytes(request), fds)
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


def _receive(control: socket.socket, buffer: bytearray) -> tuple[int, list[int]]:
    """A request into ``buffer`` and the descriptors that came with it (at most two); 0 bytes: hung up."""
    itemsize = array.array("i").itemsize
    nbytes, ancdata, flags, _addr = control.recvmsg_into([buffer], socket.CMSG_SPACE(2 * itemsize))
    fds: list[int] = []
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            got = array.array("i")
            got.frombytes(data[: len(data) - len(data) % itemsize])
            fds.extend(got)
    if nbytes == 0 and not fds:
        return 0, []  # the harness hung up
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or not 1 <= len(fds) <= 2:
        for fd in fds:
            os.close(fd)
        return -1, []
    return nbytes, fds


def serve(control: socket.socket, preload: list[str]) -> None:
    """Imports ``preload``, reports, then forks a worker per request until the harness hangs up. A
    request (a worker's configuration: the submission's paths and name) lives only in ``buffer``,
    which is zeroed after each fork, so the next worker, a copy of this memory, finds nothing of it."""
    loaded = _preload(preload)
    control.send(
        json.dumps({"ready": True, "pid": os.getpid(), "loaded": loaded, "cuda": _cuda_initialized()}).encode()
    )
    buffer = bytearray(MAX_REQUEST_BYTES)
    while True:
        try:
            nbytes, fds = _receive(control, buffer)
            if nbytes == 0:
                return
            if nbytes < 0:
                control.send(json.dumps({"pid": -1, "error": "a malformed request"}).encode())
                continue
            try:
                pid = _fork_worker(control, memoryview(buffer)[:nbytes], fds)
            finally:
                buffer[:nbytes] = bytes(nbytes)
            control.send(json.dumps({"pid": pid}).encode())
        except OSError:  # the harness is gone (a closed or broken socket)
            return


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
