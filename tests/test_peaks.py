"""Measured device peaks: found by an installed harness (package data), overridden by the user data
folder that ``measure-peaks`` writes, and a warning when the speed of light falls back to datasheet peaks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.analysis import peaks, sol
from harness.cli.main import main

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "harness" / "data" / "device_peaks.json"
H200 = "NVIDIA H200"


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(peaks, "_warned_fallback", set())


@pytest.fixture
def user_data(tmp_path, monkeypatch):
    """An empty user data folder (platformdirs reads $XDG_DATA_HOME on Linux)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    if sys.platform != "linux":
        pytest.skip("the user data folder is redirected through $XDG_DATA_HOME, a Linux convention")
    return tmp_path / "xdg" / peaks.APP_NAME / peaks.PEAKS_FILE_NAME


def test_installed_harness_finds_the_shipped_peaks(tmp_path):
    """pip-install a copy of the sources into a target folder, then look the peaks up from there,
    away from the repository and with an empty user data folder."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("harness", "fp4_reference", "tasks"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    assert (target / "harness" / "data" / "device_peaks.json").is_file()
    assert (target / "tasks" / "mxfp4_mm" / "task.py").is_file()  # the task code ships too
    probe = (
        "import json, harness; from harness.analysis import peaks, sol\n"
        "m = sol.load_measured()\n"
        "print(json.dumps({'harness': harness.__file__, 'package_file': str(peaks.package_peaks_file()),"
        " 'rows': {k: [v.mem_bytes_per_s, v.matrix_flops_per_s, v.launch_floor_ns] for k, v in m.items()},"
        " 'note': sol.speed_of_light('cuda', 'NVIDIA H200', 10**9, 10**12, 1e6).note}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(target), XDG_DATA_HOME=str(tmp_path / "empty"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=elsewhere, env=env, check=True, capture_output=True, text=True
    )
    found = json.loads(out.stdout)
    assert Path(found["harness"]).is_relative_to(target)
    assert Path(found["package_file"]).is_relative_to(target)
    row = json.loads(SHIPPED.read_text())["devices"]["H200"]
    assert found["rows"]["H200"] == [row["mem_bytes_per_s"], row["matrix_flops_per_s"], row["launch_floor_ns"]]
    assert found["note"] == "H200 measured peaks"
    assert "datasheet" not in out.stderr


def test_fallback_to_datasheet_warns_once(capsys, fresh_warnings, tmp_path):
    nothing = peaks.load_measured([tmp_path / "missing.json"])
    assert nothing == {}
    first = sol.speed_of_light("cuda", H200, 10**9, 10**12, 1e6, nothing)
    second = sol.speed_of_light("cuda", H200, 10**8, 10**11, 1e6, nothing)
    assert first.note == second.note == "H200 datasheet peaks"
    assert first.time_ns == max(
        10**9 / peaks.DATASHEET["H200"].mem_bytes_per_s * 1e9,
        10**12 / peaks.DATASHEET["H200"].matrix_flops_per_s["fp8"] * 1e9,
        2000.0,
    )
    err = capsys.readouterr().err
    assert err.count("warning: no measured peaks for the H200") == 1
    assert "measure-peaks" in err


def test_run_warning_only_for_a_known_gpu_without_measured_peaks():
    measured = peaks.load_measured([SHIPPED])
    assert "measure-peaks" in peaks.missing_measured_warning("cuda", "NVIDIA B200", measured)
    assert peaks.missing_measured_warning("cuda", H200, measured) is None
    assert peaks.missing_measured_warning("cuda", "Some Other GPU", measured) is None  # no SOL at all
    assert peaks.missing_measured_warning("cpu", "CPU (x86_64)", measured) is None


def test_measured_peaks_give_no_warning(capsys, fresh_warnings):
    measured = peaks.load_measured([SHIPPED])
    result = sol.speed_of_light("cuda", H200, 10**9, 10**12, 1e6, measured)
    assert result.note == "H200 measured peaks"
    assert capsys.readouterr().err == ""


def test_user_data_folder_overrides_the_package_row(user_data, fresh_warnings):
    assert peaks.user_peaks_file() == user_data
    row = {"mem_bytes_per_s": 1e12, "matrix_flops_per_s": {"bf16": 1e14}, "launch_floor_ns": 1234.0}
    peaks.save_measured("H200", row, user_data)
    peaks.save_measured("B200", row, user_data)  # a second device keeps the first one's row
    doc = json.loads(user_data.read_text())
    assert set(doc["devices"]) == {"H200", "B200"}
    measured = peaks.load_measured()
    assert measured["H200"] == peaks.Peaks(1e12, {"bf16": 1e14}, 1234.0)
    result = sol.speed_of_light("cuda", H200, 0, 0, 1e6)
    assert (result.time_ns, result.bound, result.note) == (1234.0, "launch", "H200 measured peaks")


def test_broken_user_file_is_warned_about_and_skipped(user_data, capsys):
    user_data.parent.mkdir(parents=True)
    user_data.write_text("{not json")
    assert "H200" in peaks.load_measured()  # the package's row still stands
    err = capsys.readouterr().err
    assert str(user_data) in err and "unreadable" in err
    user_data.write_text(json.dumps({"devices": {"H200": {"mem_bytes_per_s": 1.0}}}))
    assert peaks.load_measured()["H200"].mem_bytes_per_s != 1.0
    assert "row for 'H200' is malformed" in capsys.readouterr().err


def test_save_refuses_to_overwrite_a_file_that_is_not_a_peaks_file(tmp_path):
    other = tmp_path / "notes.json"
    other.write_text("[1, 2]")
    with pytest.raises(peaks.UsageError, match="not a peaks file"):
        peaks.save_measured("H200", {}, other)
    assert other.read_text() == "[1, 2]"


def test_measure_peaks_without_a_gpu_is_a_usage_error(capsys, user_data):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["measure-peaks"]) == 2
    assert "needs a CUDA/ROCm GPU" in capsys.readouterr().err
    assert not user_data.exists()
