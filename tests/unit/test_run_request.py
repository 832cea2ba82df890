"""harness.engine.preflight.check_run_request: the one check of a run's request, before torch loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engine.modes import Mode
from harness.engine.options import RunOptions
from harness.engine.preflight import RunRequest, check_run_request
from harness.errors import UsageError
from tasks.registry import Task

ROOT = Path(__file__).resolve().parents[2]
SUB = ROOT / "submissions" / "torch_mxfp4.py"
SMALL = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")


def test_a_good_request_comes_back_typed():
    request = check_run_request(str(SUB), SMALL, "leaderboard", None)
    assert isinstance(request, RunRequest)
    assert request.path == SUB and isinstance(request.task, Task) and request.mode is Mode.LEADERBOARD
    assert request.options == RunOptions()


def test_a_loaded_task_and_a_mode_pass_through():
    first = check_run_request(SUB, SMALL, Mode.TEST)
    again = check_run_request(first.path, first.task, first.mode, first.options)
    assert again.task is first.task and again.mode is Mode.TEST


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ((ROOT / "submissions", SMALL, "test"), "is a folder"),
        ((SUB, SMALL, "fastest"), "unknown mode 'fastest'"),
        ((SUB, "no_such_task", "test"), "no_such_task"),
        ((SUB, SMALL, "test", RunOptions(max_time_s=-1)), "--max-time must be greater than 0"),
    ],
)
def test_each_part_is_checked(args, why):
    with pytest.raises(UsageError, match=why):
        check_run_request(*args)
