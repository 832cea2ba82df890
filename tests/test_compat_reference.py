"""The ``reference`` module GPU MODE submissions import (``from reference import generate_input,
ref_kernel, check_implementation``): outside the harness, and inside the sandboxed worker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.api import RunOptions, run_submission
from harness.results import PASS

ROOT = Path(__file__).resolve().parent.parent
SMALL = {
    "mxfp4_mm": ROOT / "tests/fixtures/tasks/mxfp4_small/task.yml",
    "nvfp4_gemm": ROOT / "tests/fixtures/tasks/nvfp4_small/task.yml",
}
SHAPE = {"mxfp4_mm": dict(m=16, n=32, k=64, seed=5), "nvfp4_gemm": dict(m=128, n=128, k=256, l=1, seed=5)}

SUBMISSION = """
import json
import reference
from reference import check_implementation, generate_input, ref_kernel

print("REFERENCE", json.dumps({"module": ref_kernel.__module__, "file": reference.__file__}), flush=True)


def custom_kernel(data):
    return ref_kernel(data)
"""


@pytest.mark.parametrize("task", sorted(SMALL))
def test_reference_module_outside_the_harness(task, tmp_path):
    """With only the compat folder on the path (as GPU MODE's reference.py would be), in a fresh
    interpreter started elsewhere: the task's functions, and a check that can fail."""
    code = f"""
import sys, torch
sys.path[:0] = [{str(ROOT / "tasks" / task / "compat")!r}]
from reference import check_implementation, generate_input, ref_kernel
data = generate_input(**{SHAPE[task]!r}, device="cpu")
out = ref_kernel(data)
good, _ = check_implementation(data, out)
bad, why = check_implementation(data, out + 1)
print(good, bad, bool(why))
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["True", "False", "True"]


@pytest.mark.parametrize("task", sorted(SMALL))
def test_submission_importing_reference_runs_in_the_worker(task, tmp_path):
    """Inside the worker ``reference`` is the compat module, whose functions are the task module the
    worker already loaded (the one in the integrity snapshot), and the run passes."""
    sub = tmp_path / "uses_reference.py"
    sub.write_text(SUBMISSION)
    r = run_submission(sub, str(SMALL[task]), "test", RunOptions(device="cpu"))
    assert r.verdict == PASS, (r.message, r.stderr[-2000:])
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("REFERENCE "))
    info = json.loads(line[len("REFERENCE ") :])
    assert info["module"].startswith(f"_fp4_harness_task_{task}_"), info
    assert info["file"] == str(ROOT / "tasks" / task / "compat" / "reference.py")
