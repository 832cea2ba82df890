"""How a run-all driver stops: SIGINT/SIGTERM turned into one :class:`Stopped` exception at a point where
nothing is half-done. :meth:`Signals.critical` holds it back while a result is stored; :func:`held` does
the same for code that does not know the driver (a temporary folder made or removed), wherever a
:class:`Signals` is active in this process."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived: stop claiming, release the running jobs, exit 128 + signum."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Signals:
    """While active (main thread only), SIGINT and SIGTERM raise :class:`Stopped` once; inside
    :meth:`critical` they wait until the block ends (a result is never half-stored). Later signals
    are ignored while the run winds down; the old handlers come back on exit."""

    def __init__(self) -> None:
        self._pending: int | None = None
        self._depth = 0
        self._fired = False
        self._old: dict[int, object] = {}

    def __enter__(self) -> Signals:
        if threading.current_thread() is threading.main_thread():
            self._old = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
            _active.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)  # type: ignore[arg-type]
        if self in _active:
            _active.remove(self)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._fired:
            return
        if self._depth:
            self._pending = signum
            return
        self._fired = True
        raise Stopped(signum)

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if not self._depth and self._pending is not None and not self._fired:
            self._fired = True
            raise Stopped(self._pending)


_active: list[Signals] = []  # the Signals guarding this process's main thread, innermost last


def held() -> AbstractContextManager[None]:
    """Holds back the active :class:`Signals`' Stopped until the block ends; a no-op where none is active
    or off the main thread (where no signal handler runs). Wrap a resource's making together with the
    code that registers its clean-up, and its removal: a Stopped raised at the block's end then finds
    the resource either registered or gone."""
    if _active and threading.current_thread() is threading.main_thread():
        return _active[-1].critical()
    return contextlib.nullcontext()
