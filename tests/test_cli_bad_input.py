"""Every bad-input case of issue #18 ("Why"): a usage error (exit 2) with a message that names the allowed
range or the fix, raised before anything runs; no traceback, never exit 70."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.engine.options import RunOptions
from harness.errors import UsageError
from harness.store.database import open_store
from tests.helpers import make_result

ROOT = Path(__file__).resolve().parents[1]
SMALL = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
SUB = str(ROOT / "submissions" / "torch_mxfp4.py")
RUN = ["run", SUB, "--task", SMALL, "--mode", "benchmark"]

BAD_RUNS = [
    (["--max-repeats", "1"], "--max-repeats must be at least 3"),
    (["--max-repeats", "2"], "--max-repeats must be at least 3"),
    (["--max-repeats", "-4"], "--max-repeats must be at least 3"),
    (["--max-repeats", "0"], "--max-repeats must be at least 3"),
    (["--timeout-scale", "0"], "--timeout-scale must be greater than 0"),
    (["--timeout-scale", "-1"], "--timeout-scale must be greater than 0"),
    (["--timeout-scale", "nan"], "--timeout-scale must be a finite number"),
    (["--memory-limit-gb", "-5"], "--memory-limit-gb must be greater than 0"),
    (["--max-time", "-1"], "--max-time must be greater than 0"),
    (["--json", "/nonexistent/dir/r.json"], "the folder /nonexistent/dir does not exist"),
    (["--save", "--results-dir", "/proc/nope"], "choose another --results-dir"),
]


@pytest.fixture()
def no_run(monkeypatch):
    """Fails the test if a run starts: every case here must be refused before anything runs."""
    import harness.engine.runner as runner

    def refuse(*_a, **_k):
        raise AssertionError("the run started although its input was bad")

    monkeypatch.setattr(runner, "run_submission", refuse)


@pytest.mark.parametrize("extra, message", BAD_RUNS, ids=[" ".join(a) for a, _ in BAD_RUNS])
def test_bad_run_option_is_a_usage_error_before_the_run(capsys, no_run, extra, message):
    code = main(RUN + extra)
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err


def test_directory_as_submission(capsys, no_run):
    code = main(["run", str(ROOT / "submissions"), "--task", SMALL])
    err = capsys.readouterr().err
    assert code == 2 and "is a folder, not a submission file" in err and "run-all" in err


def test_library_validates_before_the_run(no_run):
    from harness.api import run_submission

    with pytest.raises(UsageError, match="--max-repeats must be at least 3"):
        run_submission(SUB, SMALL, "benchmark", RunOptions(max_repeats=1))
    with pytest.raises(UsageError, match="is a folder"):
        run_submission(ROOT / "submissions", SMALL)


def test_run_all_checks_options_and_store_first(capsys, tmp_path):
    code = main(
        [
            "run-all",
            str(ROOT / "submissions"),
            "--task",
            SMALL,
            "--max-repeats",
            "1",
            "--results-dir",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2 and "--max-repeats must be at least 3" in capsys.readouterr().err
    code = main(["run-all", str(ROOT / "submissions"), "--task", SMALL, "--results-dir", "/proc/nope"])
    assert code == 2 and "choose another --results-dir" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["leaderboard", "--task", "mxfp4_mm"],
        ["history", "x.py", "--task", "mxfp4_mm"],
        ["compare", "a.py", "b.py", "--task", "mxfp4_mm"],
        ["export", "--task", "mxfp4_mm"],
    ],
)
def test_read_only_commands_do_not_create_the_store(capsys, tmp_path, command):
    where = tmp_path / "X"
    code = main([*command, "--results-dir", str(where)])
    assert code == 2 and "no results store at" in capsys.readouterr().err
    assert not where.exists()


def test_export_output_checked_before_reading(capsys, tmp_path):
    d = str(tmp_path / "res")
    with open_store(d) as st:
        st.record(make_result("fast", (10.0, 20.0)))
    code = main(["export", "--task", "mxfp4_mm", "--results-dir", d, "--output", "/nonexistent/dir/x.json"])
    assert code == 2 and "does not exist" in capsys.readouterr().err


def test_compare_a_run_with_itself(capsys, tmp_path):
    d = str(tmp_path / "res")
    with open_store(d) as st:
        st.record(make_result("fast", (10.0, 20.0)))
    code = main(["compare", "fast", "fast", "--task", "mxfp4_mm", "--results-dir", d])
    err = capsys.readouterr().err
    assert code == 2 and "same submission" in err and "with itself" in err


def _with_closed_stdout(argv):
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the command writes, as in '| true'
    try:
        return subprocess.run(
            [sys.executable, "-m", "harness", *argv], stdout=w, stderr=subprocess.PIPE, cwd=ROOT, text=True, timeout=120
        )
    finally:
        os.close(w)


@pytest.fixture()
def stored(tmp_path):
    d = str(tmp_path / "res")
    with open_store(d) as st:
        st.record(make_result("fast", (10.0, 20.0)))
        st.record(make_result("slow", (20.0, 40.0)))
    return d


@pytest.mark.parametrize(
    "argv",
    [
        ["tasks"],
        ["leaderboard", "--task", "mxfp4_mm"],
        ["history", "fast", "--task", "mxfp4_mm"],
        ["export", "--task", "mxfp4_mm"],
        ["compare", "fast", "slow", "--task", "mxfp4_mm"],
    ],
)
def test_broken_pipe_is_quiet(stored, argv):
    extra = [] if argv == ["tasks"] else ["--results-dir", stored]
    proc = _with_closed_stdout(argv + extra)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_output_paths_checked_by_preflight(tmp_path):
    from harness.engine.preflight import check_output_file, check_store_writable

    check_output_file(str(tmp_path / "ok.json"))
    with pytest.raises(UsageError, match="is a folder"):
        check_output_file(str(tmp_path))
    check_store_writable(str(tmp_path / "new" / "deeper"))
    assert not (tmp_path / "new").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        check_store_writable(str(tmp_path / "file" / "sub"))


@pytest.mark.parametrize("path, error", [("/nonexistent/kernel.py", "does not exist"), (".", "is a folder")])
def test_a_bad_file_gets_its_error_and_no_cpu_duration_note(capsys, path, error):
    """The full mxfp4_mm shapes on the CPU draw a note on how long they take; a file that is not there
    (or a folder) gets its usage error alone, not that note first."""
    code = main(["run", path, "--task", "mxfp4_mm", "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and error in err
    assert "note: on the CPU" not in err
    code = main(["run", SUB, "--task", "mxfp4_mm", "--device", "cpu", "--timeout-scale", "0"])
    assert code == 2 and "note: on the CPU" in capsys.readouterr().err  # the note itself still comes


@pytest.mark.parametrize(
    "extra, error",
    [
        (["--results-dir", "/proc/nope"], "choose another --results-dir"),
        (["--secret-file", "/nonexistent/secret"], "cannot read the secret seed file"),
    ],
)
def test_run_all_says_a_bad_path_before_the_cpu_duration_note(capsys, monkeypatch, tmp_path, extra, error):
    """run-all's paths (the folder, the store, the secret file) are checked before the note on how long
    the CPU run would take, as run's are."""
    base = ["run-all", str(ROOT / "submissions"), "--task", "mxfp4_mm", "--device", "cpu"]
    code = main(["run-all", str(tmp_path / "missing"), "--task", "mxfp4_mm", "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and "is not a folder" in err and "note: on the CPU" not in err
    code = main([*base, *extra])
    err = capsys.readouterr().err
    assert code == 2 and error in err and "note: on the CPU" not in err

    def no_run(*args, **kwargs):
        raise UsageError("the run itself is not part of this test")

    monkeypatch.setattr("harness.cli.run_all.run_folder", no_run)
    code = main([*base, "--results-dir", str(tmp_path / "r")])
    assert code == 2 and "note: on the CPU" in capsys.readouterr().err  # the note itself still comes


def test_a_file_written_for_another_task_is_warned_about():
    """A newcomer who runs an nvfp4 file on mxfp4_mm sees its unpacking error; the warning says why."""
    from harness.engine.preflight import check_run_request

    mine = RunOptions()
    other = check_run_request(ROOT / "submissions" / "torch_nvfp4.py", "mxfp4_mm:small", "test", mine)
    assert any("says another task than mxfp4_mm" in w for w in other.options.extra_warnings)
    assert mine.extra_warnings == []  # the caller's options are left as they were
    own = check_run_request(ROOT / "submissions" / "torch_mxfp4.py", "mxfp4_mm:small", "test", mine)
    assert not any("another task" in w for w in own.options.extra_warnings)
