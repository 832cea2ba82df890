"""What ``python -m harness run`` does when a verdict server for its environment listens: it sends its
arguments, its folder and its secret, prints what comes back as it comes, and returns the run's exit
code. Its Ctrl-C is sent on as an interrupt (the server keeps and reports what was measured, as a run of
its own would). Where no server listens, or the server ends without an exit code, the caller runs the
command in its own process (the latter with a warning)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import sys
from pathlib import Path
from typing import Any

from harness.engine.seeds import take_env_secret
from harness.errors import UsageError
from harness.server.address import DISABLE_ENV, server_folder, socket_path
from harness.server.wire import answering, read_message, send

SERVED_NOTE = "[harness] run by the verdict server at {path} (HARNESS_NO_SERVER=1: in this process)"
BUSY_NOTE = "[harness] the verdict server is busy with another run (one at a time: they share the GPU); waiting"
OTHER_NOTE = (
    "[harness] a verdict server of yours runs for other code or another environment (a file of the "
    "checkout edited since it started, or a variable set differently), so this run runs in its own "
    "process; 'python -m harness serve --stop' there, then 'serve --detach' here"
)
BUSY_NOTE_AFTER_S = 2.0  # a server that has not taken the run up by then is running another


def own_socket() -> Path | None:
    """Where the server for this environment and code listens, if one does; None when turned off
    ($HARNESS_NO_SERVER=1), or when the servers' folder cannot be trusted (with a warning)."""
    if os.environ.get(DISABLE_ENV) == "1":
        return None
    try:
        return socket_path(os.environ)
    except UsageError as exc:
        print(f"[harness] warning: {exc}; running in this process", file=sys.stderr)
        return None


def connect(path: Path) -> tuple[socket.socket, str] | None:
    """A connection to the server at ``path``, with the path; None when none listens there."""
    if not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    return conn, str(path)


def request(message: dict[str, Any], path: Path | None = None) -> dict[str, Any] | None:
    """One status or stop request to this environment's server (or the one at ``path``): its answer, or
    None when none listens."""
    path = path or own_socket()
    found = connect(path) if path is not None else None
    if found is None:
        return None
    conn, _ = found
    with conn, conn.makefile("rb") as reader:
        send(conn, message)
        return read_message(reader)


def all_servers() -> list[Path]:
    """The sockets of every server of this user that listens, for whatever code and environment."""
    try:
        folder = server_folder()
    except UsageError:
        return []
    return [p for p in sorted(folder.glob("*.sock")) if answering(p)]


def forward_run(argv: list[str], quiet: bool = False) -> int | None:
    """``run ARGV`` by the server: the exit code, or None when the caller must run it itself."""
    own = own_socket()
    if own is None:
        return None
    found = connect(own)
    if found is None:
        if not quiet and any(p != own for p in all_servers()):
            print(OTHER_NOTE, file=sys.stderr, flush=True)
        return None
    conn, path = found
    if not quiet:
        print(SERVED_NOTE.format(path=path), file=sys.stderr, flush=True)
    with conn, conn.makefile("rb") as reader:
        send(conn, {"run": argv, "cwd": os.getcwd(), "secret": take_env_secret()})
        if not select.select([conn], [], [], BUSY_NOTE_AFTER_S)[0] and not quiet:
            print(BUSY_NOTE, file=sys.stderr, flush=True)
        while True:
            try:
                message = read_message(reader)
            except KeyboardInterrupt:  # Ctrl-C: the server stops the run and reports what it measured
                with contextlib.suppress(OSError):
                    send(conn, {"interrupt": True})
                continue
            if message is None:
                print(
                    "[harness] warning: the verdict server ended before the run did; running it in this process",
                    file=sys.stderr,
                )
                return None
            for key, stream in (("out", sys.stdout), ("err", sys.stderr)):
                if isinstance(message.get(key), str):
                    stream.write(message[key])
                    stream.flush()
            if isinstance(message.get("exit"), int):
                return int(message["exit"])


def describe(status: dict[str, Any] | None) -> str:
    """A line on a server's status answer."""
    if status is None:
        return "no verdict server listens for this environment"
    info = status.get("status") or {}
    return json.dumps(info)
