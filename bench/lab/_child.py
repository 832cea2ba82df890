"""For the lab probes: run one probe in a child process and return what it put on its queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def run_in_child(ctx: Any, target: Callable[..., None], args: tuple, timeout_s: float) -> Any:
    """``target(*args, queue)`` in a child of multiprocessing context ``ctx`` (fork or spawn); the one
    item it puts on ``queue``. A child that dies first ends the wait after ``timeout_s`` (queue.Empty)."""
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    try:
        return queue.get(timeout=timeout_s)
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
