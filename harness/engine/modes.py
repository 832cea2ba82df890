"""What a run does, by mode: the one place that knows what each mode runs, how long it may take and
whether it is ranked. Imports nothing heavy (the CLI reads it before it loads the engine)."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from harness.errors import UsageError

if TYPE_CHECKING:
    from tasks.registry import Task


class Mode(str, Enum):
    TEST = "test"
    BENCHMARK = "benchmark"
    TEST_BENCHMARK = "test+benchmark"
    LEADERBOARD = "leaderboard"
    PROFILE = "profile"

    @classmethod
    def parse(cls, value: str | Mode) -> Mode:
        try:
            return cls(value)
        except ValueError:
            raise UsageError(f"unknown mode {value!r}; choose one of {', '.join(m.value for m in cls)}") from None

    @property
    def runs_tests(self) -> bool:
        return self in (Mode.TEST, Mode.TEST_BENCHMARK, Mode.LEADERBOARD)

    @property
    def runs_benchmarks(self) -> bool:
        """Timed benchmark cases (the profile mode runs the benchmark shapes under the profiler instead)."""
        return self in (Mode.BENCHMARK, Mode.TEST_BENCHMARK, Mode.LEADERBOARD)

    @property
    def tests_gate_benchmarks(self) -> bool:
        """Benchmarks run only when every test passed."""
        return self.runs_tests and self.runs_benchmarks

    @property
    def ranked(self) -> bool:
        """Inputs from the secret, fresh for every timed call, every timed output checked."""
        return self is Mode.LEADERBOARD

    @property
    def scored(self) -> bool:
        return self.runs_benchmarks

    def first_timeout(self, task: Task) -> float:
        """Seconds for the part of the run that starts with the import (the task's timeouts)."""
        if self.ranked:
            return task.ranked_timeout
        return task.benchmark_timeout if self in (Mode.BENCHMARK, Mode.PROFILE) else task.test_timeout


MODES = tuple(m.value for m in Mode)
STORED_MODES = (Mode.LEADERBOARD.value, Mode.TEST.value, Mode.BENCHMARK.value, Mode.TEST_BENCHMARK.value)
