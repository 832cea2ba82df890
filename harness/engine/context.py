"""What every part of one run shares: the task, the mode, the options, the device, where progress and
warnings go, and the wall time of each phase. Made once by :class:`harness.engine.run.Run`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.results import DeviceInfo
from tasks.registry import Task


class Phases:
    """Where the run's wall time went: seconds per named phase (``RunResult.phases_s``). A name with a
    dot is a part of the phase before the dot (``worker_start.cuda_context``), already counted there."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def top_level_total(self) -> float:
        """The seconds of the phases that are not parts of another."""
        return sum(s for name, s in self.seconds.items() if "." not in name)

    @contextmanager
    def measure(self, name: str) -> Iterator[None]:
        """Adds the wall time of the block to ``seconds[name]``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)


@dataclass
class RunContext:
    task: Task
    mode: Mode
    opt: RunOptions
    device: torch.device
    info: DeviceInfo
    progress: Callable[[str], None]
    warnings: list[str] = field(default_factory=list)
    phases: Phases = field(default_factory=Phases)
    gated: bool = False  # per-call samples hide launch time behind the launch gate (import reply)
    limit: tuple[float, float] = (0.0, 1.0)  # the last deadline's (task seconds, --timeout-scale), for messages

    @property
    def gpu(self) -> bool:
        return self.device.type == "cuda"

    @property
    def ranked(self) -> bool:
        """Ranked timing: secret inputs, fresh for every timed call, every timed output checked, integrity
        rejections. --no-defenses (measurement only) times a leaderboard run like a benchmark run."""
        return self.mode.ranked and self.opt.defenses

    @property
    def timed_kind(self) -> str:
        """The kind of a timed case in this run's result."""
        return "leaderboard" if self.ranked else "benchmark"

    def deadline(self, seconds: float) -> float:
        self.limit = (seconds, self.opt.timeout_scale)
        return time.monotonic() + seconds * self.opt.timeout_scale

    def timeout_hint(self) -> str:
        """What a timeout's message adds: the limit that ran out and how to give more."""
        seconds, scale = self.limit
        scaled = (
            f"{seconds * scale:g} s ({seconds:g} s x --timeout-scale {scale:g})" if scale != 1 else f"{seconds:g} s"
        )
        return f"; the limit was {scaled} for {self.mode.value} mode: --timeout-scale N gives N times as long"

    def case_spec(self, case: dict[str, object]) -> dict[str, object]:
        """A case as run: its own public seed, or the one --seed gives every case."""
        return dict(case, seed=self.opt.seed) if self.opt.seed is not None else dict(case)


def fmt_spec(spec: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in spec.items())
