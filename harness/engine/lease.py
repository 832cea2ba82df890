"""What keeps a driver's claims alive: the heartbeat thread renewing its leases (how the driver stops:
:mod:`harness.engine.stop_signals`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from harness.store.database import open_store
from harness.store.jobs import JobTable


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
