"""Helpers for the cheating submissions: each attack is a small body appended to a correct kernel."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.api import RunOptions, run_submission

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
MXFP4_SMALL = str(FIX / "tasks" / "mxfp4_small" / "task.yml")
NVFP4_SMALL = str(FIX / "tasks" / "nvfp4_small" / "task.yml")
CORRECT = {MXFP4_SMALL: ROOT / "submissions" / "torch_mxfp4.py",
           NVFP4_SMALL: ROOT / "submissions" / "torch_nvfp4.py"}
SECRET = "adversarial-secret-7f3a9c"


def cheat_with_correct_kernel(tmp_path: Path, body: str, task: str = MXFP4_SMALL, name: str = "cheat") -> Path:
    """A submission file: the task's torch example with its entry point renamed ``_correct_kernel``,
    followed by ``body`` (which defines the cheating ``custom_kernel``)."""
    src = CORRECT[task].read_text().replace("def custom_kernel(", "def _correct_kernel(")
    path = tmp_path / f"{name}.py"
    path.write_text(src + "\n\n" + textwrap.dedent(body))
    return path


def run(sub, task=MXFP4_SMALL, mode="leaderboard", device="cpu", **opts):
    opts.setdefault("max_repeats", 3)
    if mode == "leaderboard":
        opts.setdefault("secret", SECRET)
    return run_submission(sub, task, mode, RunOptions(device=device, **opts))


@pytest.fixture
def cheat(tmp_path):
    return lambda body, task=MXFP4_SMALL, name="cheat": cheat_with_correct_kernel(tmp_path, body, task, name)
