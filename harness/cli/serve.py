"""``python -m harness serve``: the verdict server (:mod:`harness.server`), which makes every later
``python -m harness run`` in the same environment skip the interpreter's start, ``import torch``, the CUDA
context and the worker pool's start."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from harness.cli.main import EXIT_CODE_TEXT
from harness.errors import UsageError
from harness.server import client
from harness.server.address import server_folder, socket_path

NAME = "serve"
EXIT_CODES = {
    0: "the server ran and ended (idle, --stop, Ctrl-C or SIGTERM); --detach: it started; --stop, --status: answered",
    **{code: EXIT_CODE_TEXT[code] for code in (2, 70)},
}
EXAMPLES = """  python -m harness serve --detach            # start one in the background, then:
  python -m harness run submissions/triton_mxfp4.py --task mxfp4_mm     # runs in the server
  python -m harness serve --status
  python -m harness serve --stop
  python -m harness serve --stop --all        # every server of yours, for whatever code or environment
  python -m harness serve --idle-exit 3600    # in the foreground, until an hour passes without a run

A server serves only runs from the same environment and the same code: a client whose environment
differs (but for the shell's own variables and the secret) or a checkout edited since the server
started runs in its own process, as HARNESS_NO_SERVER=1 makes every run do. The server holds a CUDA
context (some GPU memory) while it waits.
"""
READY_TIMEOUT_S = 180.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group()
    what.add_argument("--detach", action="store_true", help="start the server in the background and return")
    what.add_argument("--stop", action="store_true", help="stop this environment's server")
    what.add_argument("--status", action="store_true", help="this environment's server: pid, start, runs served")
    p.add_argument("--all", action="store_true", help="with --stop or --status: every verdict server of yours")
    p.add_argument(
        "--idle-exit",
        type=float,
        default=900.0,
        metavar="S",
        help="end after S seconds without a run (default 900: it holds a CUDA context while it waits)",
    )
    p.add_argument("--device", help="the device to prepare: auto (default), cpu, or cuda[:N]")


def run(args: argparse.Namespace) -> int:
    if args.idle_exit <= 0:
        raise UsageError(f"--idle-exit {args.idle_exit:g}: give a number of seconds above 0")
    if args.all and not (args.stop or args.status):
        raise UsageError("--all goes with --stop or --status (every verdict server of yours)")
    if args.status or args.stop:
        return _ask(args)
    if args.detach:
        return _detach(args)
    from harness.server.daemon import serve

    return serve(args.idle_exit, args.device)


def _ask(args: argparse.Namespace) -> int:
    """--status or --stop: this environment's server, or with --all every one of the user's."""
    message = {"status": True} if args.status else {"stop": True}
    targets = client.all_servers() if args.all else [None]
    answers = [answer for answer in (client.request(message, t) for t in targets) if answer]
    if args.stop:
        print(f"stopped {len(answers)} verdict server(s)" if answers else client.describe(None), file=sys.stderr)
    else:
        print("\n".join(client.describe(a) for a in answers) or client.describe(None))
    return 0


def _detach(args: argparse.Namespace) -> int:
    """Starts ``serve`` in a session of its own, its output in a log beside its socket; returns once it
    answers (exit 70 with the log's end when it does not)."""
    if client.request({"status": True}) is not None:
        print("a verdict server for this environment is already running", file=sys.stderr)
        return 0
    path = socket_path(os.environ, create=True)
    log = server_folder() / (path.stem + ".log")
    command = [sys.executable, "-m", "harness", "serve", "--idle-exit", str(args.idle_exit)]
    command += ["--device", args.device] if args.device else []
    with open(log, "ab") as out:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    end = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < end and child.poll() is None:
        if client.request({"status": True}) is not None:
            print(f"verdict server started (pid {child.pid}); its log: {log}", file=sys.stderr)
            return 0
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    print(f"error: the verdict server did not start (see {log}):\n{tail}", file=sys.stderr)
    return 70
