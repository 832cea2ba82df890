"""The verdict server (``python -m harness serve``): it prepares once what every ``run`` needs (torch and
triton imported, the CUDA context, the warm-worker pool), then runs one ``run`` command at a time for
clients of its own user, in its main thread, exactly as ``python -m harness run`` would.

The wire: newline-delimited JSON over a Unix stream socket (:mod:`harness.server.address`). A client
sends one request, ``{"run": [arguments], "cwd": folder, "secret": seed or null}`` (or ``{"status":
true}``, or ``{"stop": true}``); the server answers ``{"started": pid}`` when it takes a run up, then
``{"out": text}`` and ``{"err": text}`` lines as the command prints, then ``{"exit": code}``. While a run is active the client may send
``{"interrupt": true}`` (its Ctrl-C); a client that disconnects interrupts its run too. Each request
gets its own folder and secret, and the secret leaves the server's environment when the run ends.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import os
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from harness.engine import privileges
from harness.engine.sandbox import make_undumpable
from harness.engine.seeds import SECRET_ENV
from harness.errors import EXIT_INTERNAL, EXIT_USAGE, UsageError
from harness.server.address import DISABLE_ENV, socket_path
from harness.server.wire import answering, read_message, send


def peer_uid(conn: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


class _Forward(io.TextIOBase):
    """A text stream whose writes go to the client as ``{key: text}`` lines; once the client is gone
    they are dropped (its watcher interrupts the run)."""

    def __init__(self, conn: socket.socket, key: str, lock: threading.Lock):
        self.conn, self.key, self.lock, self.gone = conn, key, lock, False

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if text and not self.gone:
            with self.lock:
                try:
                    send(self.conn, {self.key: text})
                except OSError:
                    self.gone = True
        return len(text)


class Server:
    """The accept loop and one request at a time; see the module docstring."""

    def __init__(self, listener: socket.socket, idle_exit_s: float, run_command: Callable[[list[str]], int]):
        self.listener, self.idle_exit_s, self.run_command = listener, idle_exit_s, run_command
        self.started, self.runs, self.stopping = time.time(), 0, False
        self.in_run = False  # a run is active: a client's interrupt stops it
        self.interrupt_sent = False  # a client's interrupt was signalled (it may arrive after its run)

    def on_sigint(self, _signum: int, _frame: Any) -> None:
        if self.in_run or not self.interrupt_sent:
            raise KeyboardInterrupt  # a client's interrupt during its run, or Ctrl-C at the server's terminal

    def loop(self) -> None:
        self.listener.settimeout(self.idle_exit_s)
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                print(f"[harness] verdict server: no run for {self.idle_exit_s:.0f} s; ending", file=sys.stderr)
                return
            with conn:
                conn.settimeout(None)
                if peer_uid(conn) != os.getuid():
                    continue  # the folder is closed to others; root is not let in either
                self.handle(conn)

    def handle(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        request = read_message(reader)
        if request is None:
            return
        if request.get("status"):
            status = {
                "pid": os.getpid(),
                "started": self.started,
                "runs": self.runs,
                "socket": self.listener.getsockname(),
            }
            send(conn, {"status": status, "exit": 0})
        elif request.get("stop"):
            self.stopping = True
            send(conn, {"exit": 0})
        elif isinstance(request.get("run"), list) and all(isinstance(a, str) for a in request["run"]):
            send(conn, {"started": os.getpid()})  # a client that does not see this at once waits for another run
            self.run(conn, reader, request)
        else:
            send(
                conn,
                {"err": "error: the verdict server takes only run, status and stop requests\n", "exit": EXIT_USAGE},
            )

    def run(self, conn: socket.socket, reader: io.BufferedReader, request: dict[str, Any]) -> None:
        lock = threading.Lock()
        out, err = _Forward(conn, "out", lock), _Forward(conn, "err", lock)
        watcher = threading.Thread(target=self.watch, args=(reader,), daemon=True)
        watcher.start()  # it signals only while the run is active
        self.runs += 1
        code = EXIT_INTERNAL
        try:
            with _request_environment(request.get("cwd"), request.get("secret")):
                privileges.forget_said()  # each run is told what a process of its own is told
                self.interrupt_sent, self.in_run = False, True
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code = self.run_command(["run", *request["run"]])
        except UsageError as exc:
            err.write(f"error: {exc}\n")
            code = EXIT_USAGE
        except Exception as exc:  # the CLI maps its own errors to exit codes: this is the server's
            err.write(f"error: the verdict server failed: {exc!r}\n")
        finally:
            self.in_run = False
        with lock, contextlib.suppress(OSError):
            send(conn, {"exit": code})
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
        watcher.join()
        self.interrupt_sent = False  # a late interrupt's handler has run by now (it runs between bytecodes)
        _release_memory()

    def watch(self, reader: io.BufferedReader) -> None:
        """The client's interrupt, or its end: either stops its run (SIGINT to the main thread, as Ctrl-C)."""
        while True:
            message = read_message(reader)
            if message is not None and not message.get("interrupt"):
                continue
            if self.in_run and not self.interrupt_sent:
                self.interrupt_sent = True
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
            if message is None:
                return


@contextlib.contextmanager
def _request_environment(cwd: Any, secret: Any) -> Any:
    """The client's folder and secret for one run; the server's own afterwards."""
    if not isinstance(cwd, str) or not os.path.isdir(cwd):
        raise UsageError(f"the client's folder {cwd!r} is not a folder the server can enter")
    if secret is not None and not isinstance(secret, str):
        raise UsageError("the client's secret is not a string")
    os.chdir(cwd)
    os.environ["PWD"] = cwd
    if secret is None:
        os.environ.pop(SECRET_ENV, None)
    else:
        os.environ[SECRET_ENV] = secret
    try:
        yield
    finally:
        os.environ.pop(SECRET_ENV, None)
        os.chdir("/")


def _release_memory() -> None:
    """What the run left cached: its GPU memory goes back to the device between runs."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _prepare(device: str | None) -> None:
    """What every run would otherwise do first: the run's own modules imported (torch and triton among
    them), the CUDA context, the worker pool started."""
    from harness.engine.pool import warm_shared_pool

    warm_shared_pool(device)  # its server imports torch and triton while this process does
    for module in ("harness.cli.run", "harness.engine.run"):  # the command, the engine behind it, torch
        importlib.import_module(module)
    from harness.engine.device import device_info, select_device

    device_info(select_device(device))  # the CUDA context on a GPU (about 1 s on the H200)
    with contextlib.suppress(ImportError):
        import triton  # noqa: F401
    warm_shared_pool(device, wait=True)  # and the first run's worker need not wait for them


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the server as Ctrl-C does (a run defers it until its end)


def serve(idle_exit_s: float, device: str | None = None) -> int:
    """Listens until ``idle_exit_s`` pass with no request, a stop request, or SIGINT/SIGTERM."""
    from harness.cli.main import main as cli_main

    make_undumpable()  # it will hold secrets: no /proc/<pid>/mem or environ for a same-user process
    path = socket_path(os.environ, create=True)
    os.environ[DISABLE_ENV] = "1"  # the runs it serves run here, not through a server (itself)
    if answering(path):
        raise UsageError(
            f"a verdict server for this environment already listens at {path}; stop it with 'python -m harness serve --stop'"
        )
    path.unlink(missing_ok=True)  # a server that ended without removing it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        os.chmod(path, 0o600)
        listener.listen(8)
        _prepare(device)
        server = Server(listener, idle_exit_s, cli_main)
        signal.signal(signal.SIGINT, server.on_sigint)
        signal.signal(signal.SIGTERM, _interrupt)
        print(
            f"[harness] verdict server ready (pid {os.getpid()}) at {path}: 'python -m harness run' in this "
            f"environment runs here; it ends after {idle_exit_s:.0f} s without a run, or with "
            "'python -m harness serve --stop'",
            file=sys.stderr,
            flush=True,
        )
        with contextlib.suppress(KeyboardInterrupt):
            server.loop()
    finally:
        listener.close()
        path.unlink(missing_ok=True)
    return 0
