"""What several test modules share: paths of the small task copies and the examples, a cheating-file
builder (a correct kernel plus an attack body), a run shortcut and a CLI runner."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from harness.api import RunOptions, run_submission

ROOT = Path(__file__).resolve().parents[1]
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
    """``run_submission`` with small budgets; leaderboard runs get the tests' fixed secret."""
    opts.setdefault("max_repeats", 3)
    if mode == "leaderboard":
        opts.setdefault("secret", SECRET)
    return run_submission(sub, task, mode, RunOptions(device=device, **opts))


def cli(args, env=None, timeout=180) -> subprocess.CompletedProcess:
    """``python -m harness ARGS`` in a fresh process (what an operator types), from the repository root."""
    env = dict(os.environ if env is None else env)
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)
