"""Progress of a run-all on stderr: a status line of job counts with elapsed time and an estimate,
and one line per finished job (verdict, score). On a terminal the status line is redrawn in place;
elsewhere (a log, CI) it is printed as a plain line whenever the counts change."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = round(seconds)
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


class Progress:
    def __init__(
        self,
        total: int,
        say: Callable[[str], None] | None = None,
        stream: TextIO | None = None,
        live: bool | None = None,
    ):
        self.total = total
        self.counts = {"queued": total, "running": 0, "done": 0, "failed": 0}
        self.t0 = time.monotonic()
        self.stream = stream
        self.say = say or (lambda line: print(line, file=self.stream or sys.stderr, flush=True))
        stream = self.stream or sys.stderr
        self.live = (hasattr(stream, "isatty") and stream.isatty()) if live is None else live
        self._last: str | None = None
        self._drawn = False

    def status_line(self) -> str:
        c = self.counts
        elapsed = time.monotonic() - self.t0
        ended = c["done"] + c["failed"]
        left = self.total - ended
        eta = f", about {_clock(elapsed / ended * left)} left" if ended and left else ""
        return (
            f"jobs: {c['queued']} queued, {c['running']} running, {c['done']} done, {c['failed']} failed"
            f" [{_clock(elapsed)} elapsed{eta}]"
        )

    def move(self, src: str, dst: str) -> None:
        self.counts[src] -= 1
        self.counts[dst] += 1
        self.refresh()

    def line(self, text: str) -> None:
        """A permanent line (a job's verdict), printed above the live status line."""
        self._clear()
        self.say(text)
        if self.live:
            self.refresh()

    def tick(self) -> None:
        """Redraws the live line (its clock); plain output prints only when the counts change."""
        if self.live:
            self.refresh()

    def refresh(self) -> None:
        line = self.status_line()
        counts = line.split(" [")[0]
        if self.live:
            stream = self.stream or sys.stderr
            stream.write("\r\x1b[2K" + line)
            stream.flush()
            self._drawn = True
        elif counts != self._last:
            self.say(line)
        self._last = counts

    def _clear(self) -> None:
        if self.live and self._drawn:
            stream = self.stream or sys.stderr
            stream.write("\r\x1b[2K")
            stream.flush()
            self._drawn = False

    def close(self) -> None:
        self._clear()
        if self.live or self.status_line().split(" [")[0] != self._last:
            self.say(self.status_line())
