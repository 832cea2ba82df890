"""What keeps a driver's claims alive and how it stops: the heartbeat thread renewing its leases, and
SIGINT/SIGTERM turned into one :class:`Stopped` exception at a point where no result is half-written."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

from harness.store.database import open_store
from harness.store.jobs import JobTable

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived: stop claiming, release the running jobs, exit 128 + signum."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Heartbeat:
    """Renews ``owner``'s leases every ``lease_s / 3`` seconds on a connection of its own. A store
    that does not answer is tried again at the next beat; the leases run out if it never answers."""

    def __init__(self, location: str, owner: str, lease_s: float, warn: Callable[[str], None]):
        self.location, self.owner, self.lease_s, self.warn = location, owner, lease_s, warn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="harness-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _beat(self) -> None:
        store = None
        failing = False
        while not self._stop.wait(self.lease_s / 3):
            try:
                store = store or open_store(self.location)
                JobTable(store).heartbeat(self.owner, self.lease_s)
                failing = False
            except Exception as exc:  # the store is away: try again at the next beat
                if not failing:
                    self.warn(f"warning: could not renew this driver's leases ({type(exc).__name__}); retrying")
                failing = True
                if store is not None:
                    with contextlib.suppress(Exception):
                        store.close()
                store = None
        if store is not None:
            with contextlib.suppress(Exception):
                store.close()


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
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)  # type: ignore[arg-type]

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
