"""Issue #18 items beyond the bad-input list: tracebacks in the user's terms, the diagnosis line in the
report, the CPU estimate, CPU noise limits, the root warning, the leaderboard's one mode, small copies
found again by name, and help texts listing only the exit codes a command returns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis.plausibility import noise_warnings
from harness.cli.main import build_parser, main
from harness.results import Stats
from harness.store.database import open_store
from tests.helpers import make_result

ROOT = Path(__file__).resolve().parents[1]
SMALL = "mxfp4_mm:small"


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_runtime_error_traceback_names_the_users_file_and_only_its_frames(capsys, tmp_path):
    sub = tmp_path / "my_kernel.py"
    sub.write_text(
        "import torch\n\n\ndef helper(x):\n    return x.nope()\n\n\n"
        "def custom_kernel(data):\n    return helper(data[0])\n"
    )
    code, out, err = _run(capsys, "run", str(sub), "--task", SMALL, "--mode", "test", "--quiet")
    assert code == 3
    assert f'File "{sub}", line 9, in custom_kernel' in err and f'File "{sub}", line 5, in helper' in err
    assert "harness-run-" not in err + out and "harness/worker" not in err
    code, out, err = _run(capsys, "run", str(sub), "--task", SMALL, "--mode", "test", "--quiet", "--verbose")
    assert code == 3 and "harness/worker/main.py" in err and "harness-run-" not in err + out


def test_syntax_error_names_the_users_file(capsys, tmp_path):
    sub = tmp_path / "typo.py"
    sub.write_text("def custom_kernel(data)\n    return data[0]\n")
    code, out, err = _run(capsys, "run", str(sub), "--task", SMALL, "--mode", "test", "--quiet")
    assert code == 3
    assert f"syntax error in {sub} line 1" in out and f'File "{sub}", line 1' in err
    assert "submission.py" not in out + err


def test_report_adds_the_diagnosis_line(capsys, tmp_path):
    sub = tmp_path / "uses_aiter.py"
    sub.write_text("import aiter\n\n\ndef custom_kernel(data):\n    return aiter.gemm(data)\n")
    code, out, _ = _run(capsys, "run", str(sub), "--task", SMALL, "--mode", "test", "--quiet")
    assert code == 3
    line = next(x for x in out.splitlines() if x.startswith("likely cause: "))
    assert "aiter" in line and "competition machines" in line


def test_cpu_estimate_names_the_small_copy():
    from harness.engine.cpu_estimate import long_cpu_run_note
    from tasks import load_task

    note = long_cpu_run_note(load_task("mxfp4_mm"), "test+benchmark")
    assert note and "roughly" in note and "--task mxfp4_mm:small" in note
    assert long_cpu_run_note(load_task("mxfp4_mm:small"), "test+benchmark") is None
    torch_only = long_cpu_run_note(load_task("mxfp4_mm"), "test+benchmark", files=[ROOT / "submissions/torch_mxfp4.py"])
    triton = long_cpu_run_note(load_task("mxfp4_mm"), "test+benchmark", files=[ROOT / "submissions/triton_mxfp4.py"])
    minutes = [int(n.split("roughly ")[1].split(" min")[0]) for n in (torch_only, triton)]
    assert "interpreter" in triton and minutes[1] > 3 * minutes[0]
    assert "past the task's 420 s time limit" in triton and "time limit" not in torch_only


def test_run_prints_the_cpu_note_before_the_run(capsys, monkeypatch):
    import harness.engine.runner as runner

    def refuse(*_a, **_k):
        raise AssertionError("stop: the note must come before the run")

    monkeypatch.setattr(runner, "run_submission", refuse)
    main(["run", str(ROOT / "submissions" / "triton_mxfp4.py"), "--task", "mxfp4_mm", "--device", "cpu"])
    err = capsys.readouterr().err  # the stand-in run's AssertionError ends as an internal error, after the note
    note = err.index("note: on the CPU the mxfp4_mm shapes take roughly")
    assert "--task mxfp4_mm:small" in err and note < err.index("stop: the note must come before the run")


def test_cpu_noise_limits():
    mild = Stats.from_samples([1e6 * (1 + 0.3 * ((i % 5) - 2) / 2) for i in range(10)])  # ~5% stderr, 2x spread
    assert noise_warnings(mild, gpu=False, strict_per_call=True) == []
    assert any("unstable" in w for w in noise_warnings(mild, gpu=True, strict_per_call=True))
    wild = Stats.from_samples([1e5] * 5 + [5e6] * 5)
    lines = noise_warnings(wild, gpu=False, strict_per_call=True)
    assert len(lines) == 1 and "noisy CPU timing" in lines[0] and "--max-repeats" not in lines[0]


def test_a_run_in_blocks_judges_noise_once_per_shape_on_all_its_samples(tmp_path):
    """Each block holds a few samples; judged per block, a noisy shape printed one warning per block
    (10 on a ranked GPU run). Judged once on the merged samples, it prints one, whose sample count is
    every block's."""
    from tests.helpers import cheat_with_correct_kernel, run

    sub = cheat_with_correct_kernel(
        tmp_path,
        "import time\n_n = [0]\n\ndef custom_kernel(data):\n    _n[0] += 1\n"
        "    if _n[0] % 2:\n        time.sleep(0.02)\n    return _correct_kernel(data)\n",
        name="noisy",
    )
    result = run(sub, blocks=3, max_repeats=6)
    assert result.verdict == "pass" and len(result.blocks) == 3
    timed = [c for c in result.cases if c.kind == "leaderboard"]
    assert timed
    for j, case in enumerate(timed):
        noisy = [w for w in case.warnings if w.startswith("noisy CPU timing")]
        assert len(noisy) == 1, case.warnings
        assert case.stats.runs == sum(b.samples[j] for b in result.blocks) > max(b.samples[j] for b in result.blocks)
        assert f"slowest of {case.stats.runs} samples" in noisy[0]


def test_root_warning_once_with_advice(monkeypatch, tmp_path):
    from harness.engine import privileges

    monkeypatch.setattr(privileges, "_said", False)
    private = tmp_path / "home"
    (private / "venv").mkdir(parents=True)
    private.chmod(0o700)
    try:
        blocker = privileges.first_blocking_folder([str(private / "venv")])
        assert blocker is not None and (
            blocker == private or blocker in private.parents
        )  # the test's tmp may be private too
        first = privileges.root_warning_once([str(private / "venv")])
        assert len(first) == 1 and f"chmod o+x {blocker}" in first[0] and "ordinary user" in first[0]
        assert privileges.root_warning_once([str(private / "venv")]) == []
    finally:
        private.chmod(0o755)


@pytest.fixture()
def mixed_modes(tmp_path):
    d = str(tmp_path / "res")
    with open_store(d) as st:
        st.record(make_result("alpha_ranked", (10.0, 20.0), mode="leaderboard"))
        st.record(make_result("zeta_bench", (1.0, 2.0), mode="benchmark"))
    return d


def test_leaderboard_ranks_one_mode_and_shows_it(capsys, mixed_modes):
    code, out, _err = _run(capsys, "leaderboard", "--task", "mxfp4_mm", "--results-dir", mixed_modes)
    assert code == 0 and "mode leaderboard" in out and "alpha_ranked" in out and "zeta_bench" not in out
    code, out, _err = _run(
        capsys,
        "leaderboard",
        "--task",
        "mxfp4_mm",
        "--results-dir",
        mixed_modes,
        "--mode",
        "benchmark",
        "--format",
        "json",
    )
    board = json.loads(out)
    assert board["mode"] == "benchmark"
    assert [e["name"] for e in board["devices"][0]["ranked"]] == ["zeta_bench"]


def test_leaderboard_says_which_mode_without_ranked_runs(capsys, tmp_path):
    d = str(tmp_path / "res")
    with open_store(d) as st:
        st.record(make_result("bench", (1.0, 2.0), mode="benchmark"))
    code, out, err = _run(capsys, "leaderboard", "--task", "mxfp4_mm", "--results-dir", d)
    assert code == 0 and "ranking the 'benchmark'-mode runs" in err and "mode benchmark" in out


def test_runs_from_a_task_yml_path_found_by_name(capsys, tmp_path):
    d = str(tmp_path / "res")
    path = str(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml")
    code, _, _ = _run(
        capsys,
        "run",
        str(ROOT / "submissions" / "torch_mxfp4.py"),
        "--task",
        path,
        "--mode",
        "benchmark",
        "--max-repeats",
        "3",
        "--save",
        "--results-dir",
        d,
        "--quiet",
    )
    assert code == 0
    for name in ("mxfp4_small", "mxfp4_mm:small"):
        code, out, err = _run(capsys, "leaderboard", "--task", name, "--results-dir", d)
        assert code == 0 and "cannot load task" not in err and "torch mxfp4" in out


EXPECTED_CODES = {
    "run": ["0", "1", "2", "3", "4", "5", "70", "141", "130", "143"],
    "run-all": ["0", "2", "70", "75", "141", "130", "143"],
    "leaderboard": ["0", "2", "70", "141", "130", "143"],
    "history": ["0", "2", "70", "141", "130", "143"],
    "compare": ["0", "2", "70", "141", "130", "143"],
    "export": ["0", "2", "70", "141", "130", "143"],
    "tasks": ["0", "2", "70", "141", "130", "143"],
}


@pytest.mark.parametrize("command", sorted(EXPECTED_CODES))
def test_help_lists_only_the_commands_exit_codes(command):
    parser = build_parser([command])
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    epilog = sub.epilog
    assert epilog.count("exit codes:") == 1 and "Exit status" not in epilog
    block = epilog.split("exit codes:\n", 1)[1]
    codes = [line.split()[0] for line in block.splitlines() if line.strip()]
    assert codes == EXPECTED_CODES[command]


def test_run_all_progress_carries_the_diagnosis(capsys, tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "uses_aiter.py").write_text("import aiter\n\n\ndef custom_kernel(data):\n    return aiter.gemm(data)\n")
    code, _, err = _run(
        capsys, "run-all", str(folder), "--task", SMALL, "--mode", "test", "--results-dir", str(tmp_path / "res")
    )
    assert code == 0
    assert "uses_aiter.py: likely cause: the submission imports 'aiter'" in err


def test_runs_from_any_task_yml_found_by_its_path(capsys, tmp_path):
    """A task.yml outside the registry: its runs are stored under its folder's name, and --task with the
    same path finds them again with the task's own rule (a bare name that is no task says to pass the path)."""
    import shutil

    copy = tmp_path / "my_task" / "task.yml"
    copy.parent.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "tasks" / "mxfp4_small" / "task.yml", copy)
    d = str(tmp_path / "res")
    with open_store(d) as st:
        st.record(make_result("mine", (10.0, 20.0), task="my_task"))
    code, out, err = _run(capsys, "leaderboard", "--task", str(copy), "--results-dir", d)
    assert code == 0 and "mine" in out and "cannot load task" not in err
    code, out, err = _run(capsys, "leaderboard", "--task", "my_task", "--results-dir", d)
    assert code == 0 and "mine" in out and "pass the task.yml path" in err
