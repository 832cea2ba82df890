"""docs/tasks/*.md: the minimal submission each shows passes its task's tests (small copy), and
'python -m harness tasks TASK' prints the task with that submission."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.api import run_submission
from harness.cli.main import main
from harness.cli.tasks import minimal_submission

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("task", ["mxfp4_mm", "nvfp4_gemm"])
def test_minimal_submission_in_the_docs_passes(tmp_path, task):
    source = minimal_submission(task)
    assert source and "def custom_kernel(data)" in source
    sub = tmp_path / f"minimal_{task}.py"
    sub.write_text(source)
    result = run_submission(sub, f"{task}:small", "test")
    assert result.verdict == "pass", result.message
    assert len(result.cases) >= 2 and all(c.verdict == "pass" for c in result.cases)


@pytest.mark.parametrize("task", ["mxfp4_mm", "nvfp4_gemm"])
def test_tasks_command_prints_one_task(capsys, task):
    assert main(["tasks", task]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{task}: target ") and f"docs/tasks/{task}.md" in out
    assert "benchmark" in out and minimal_submission(task).strip() in out
    assert f"--task {task}:small" in out
    assert main(["tasks", task, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == task and data["minimal_submission"] == minimal_submission(task)


def test_tasks_command_unknown_task(capsys):
    assert main(["tasks", "nope"]) == 2
    assert "choose one of: mxfp4_mm, nvfp4_gemm" in capsys.readouterr().err


def test_small_copies_by_name():
    from tasks import load_task

    assert load_task("mxfp4_mm:small").path == ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small"
    assert load_task("nvfp4_small").path == ROOT / "tests" / "fixtures" / "tasks" / "nvfp4_small"
    with pytest.raises(ValueError, match="small copies: mxfp4_mm:small"):
        load_task("foo:small")


def test_readme_writing_a_submission_points_at_the_docs():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Writing a submission", 1)[1].split("\n## ", 1)[0]
    for needle in (
        "docs/tasks/mxfp4_mm.md",
        "docs/tasks/nvfp4_gemm.md",
        "custom_kernel(data)",
        "B_shuffle",
        "B_scale_sh",
        "python -m harness tasks",
    ):
        assert needle in section
