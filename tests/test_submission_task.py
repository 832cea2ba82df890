"""Which task a submission file is for: its header (``# task:`` or ``#!POPCORN leaderboard``) first,
else a keyword in its file name, else any task; and what ``run-all`` does with that."""

from __future__ import annotations

import pytest

from harness.api import RunOptions, run_folder
from harness.engine.submission import applies_to, declared_task
from tests.helpers import MXFP4_SMALL


def _file(tmp_path, name, header=""):
    path = tmp_path / name
    # the file's own name in a comment: run-all makes one job per distinct file contents
    path.write_text(header + f"# {name}\nimport torch\n\n\ndef custom_kernel(data):\n    return data[0]\n")
    return path


@pytest.mark.parametrize(
    "header, task",
    [
        ("# task: mxfp4_mm\n", "mxfp4_mm"),
        ("#  Task :  NVFP4-GEMM\n", "nvfp4_gemm"),  # case and dashes normalized
        ("#!POPCORN leaderboard amd-mxfp4-mm\n", "amd_mxfp4_mm"),  # GPU MODE's own header line
        ("# name: Fast\n#!POPCORN leaderboard nvfp4_gemm\n", "nvfp4_gemm"),
        ("", None),
        ("x = 1\n" * 40 + "# task: mxfp4_mm\n", None),  # only the first 40 lines count
    ],
)
def test_declared_task_reads_the_header(tmp_path, header, task):
    assert declared_task(_file(tmp_path, "sub.py", header)) == task


@pytest.mark.parametrize(
    "name, header, mxfp4, nvfp4",
    [
        ("fast.py", "# task: nvfp4_gemm\n", False, True),
        ("my_mxfp4_kernel.py", "# task: nvfp4_gemm\n", False, True),  # the header beats the file name
        ("entry.py", "#!POPCORN leaderboard amd-mxfp4-mm\n", True, False),  # '<prefix>_mxfp4_mm' counts
        ("entry.py", "# task: mxfp4_mmx\n", False, False),  # a near miss names no task here
        ("triton_nvfp4.py", "", False, True),  # keyword in the name
        ("gluon_v2.py", "", True, False),  # gluon is an mxfp4_mm keyword
        ("Torch_MXFP4.py", "", True, False),  # keywords ignore case
        ("kernel.py", "", True, True),  # no hint: any task
    ],
)
def test_applies_to_follows_header_then_name(tmp_path, name, header, mxfp4, nvfp4):
    path = _file(tmp_path, name, header)
    assert (applies_to(path, "mxfp4_mm"), applies_to(path, "nvfp4_gemm")) == (mxfp4, nvfp4)


def test_a_small_copy_takes_the_files_of_the_task_it_implements(tmp_path):
    """run-all on a task copy passes both names (the copy's and its implementation's)."""
    names = ("mxfp4_small", "mxfp4_mm")
    assert applies_to(_file(tmp_path, "torch_mxfp4.py"), names)
    assert applies_to(_file(tmp_path, "a.py", "# task: mxfp4_small\n"), names)
    assert applies_to(_file(tmp_path, "b.py", "# task: mxfp4_mm\n"), names)
    assert not applies_to(_file(tmp_path, "torch_nvfp4.py"), names)
    assert not applies_to(_file(tmp_path, "c.py", "# task: nvfp4_gemm\n"), names)


def test_run_folder_runs_only_the_files_for_its_task(tmp_path):
    """Through the library's run-all: a file named for the other task, and one whose header names it,
    are skipped and reported as skipped; the others run (a file with no hint too)."""
    folder = tmp_path / "subs"
    folder.mkdir()
    for name, header in [
        ("zeros_mxfp4.py", ""),
        ("plain.py", ""),
        ("zeros_nvfp4.py", ""),
        ("sneaky_mxfp4.py", "# task: nvfp4_gemm\n"),
    ]:
        _file(folder, name, header)
    report = run_folder(folder, MXFP4_SMALL, "test", RunOptions(device="cpu"), results_dir=str(tmp_path / "store"))
    assert sorted(e.name for e in report.entries) == ["plain", "zeros_mxfp4"]
    assert sorted(p.name for p in report.skipped) == ["sneaky_mxfp4.py", "zeros_nvfp4.py"]
