"""A results store filled by real CPU runs of the example submissions, for the site's tests."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

from harness.api import RunOptions, load_board, run_folder
from harness.store.database import open_store

ROOT = Path(__file__).resolve().parents[1]
MX = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
NV = str(ROOT / "tests" / "fixtures" / "tasks" / "nvfp4_small" / "task.yml")
OPTIONS = RunOptions(device="cpu", max_repeats=3, max_time_s=0.2)
TORCH, TRITON, GLUON = "torch mxfp4 (portable)", "triton_mxfp4", "gluon"
TWIN = "Twin of torch"
HTML_NAME = '<b id="injected">bold</b><script>document.title="pwned"</script>'


def fill_real_store(results_dir: str, mx_rounds: int = 1) -> None:
    """Real runs of submissions/ on the small tasks: mxfp4_small ``mx_rounds`` times, nvfp4_small once."""
    for task in [MX] * mx_rounds + [NV]:  # rerun: a later round measures again (not skipped as done)
        run_folder(ROOT / "submissions", task, "test+benchmark", OPTIONS, results_dir=results_dir, rerun=True)


def best_run_of(results_dir: str, task: str, name: str) -> int:
    board, _ = load_board(task, results_dir=results_dir)
    return next(e.run_id for b in board.boards for e in b.ranked if e.name == name)


def record_copy(results_dir: str, run_id: int, name: str, edit=None) -> int:
    """Stores a copy of a real run's result under another name and content hash (``edit`` may change it)."""
    with open_store(results_dir) as st:
        result = copy.deepcopy(st.result(run_id))
        result.submission.sha256 = hashlib.sha256(name.encode()).hexdigest()
        result.submission.name = name
        if edit:
            edit(result)
        return st.record(result, display_name=name)
