"""The store-facing commands through ``harness.cli.main.main``: leaderboard, history, compare, export, run-all."""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import json
import math
import re
from pathlib import Path

import pytest

from harness.cli.main import main
from harness.results import RunResult
from harness.store.database import open_store
from tests.helpers import make_result

TASK = "mxfp4_mm"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def results(tmp_path):
    d = str(tmp_path / "res")
    with open_store(d) as st:
        st.record(make_result("fast", (10.0, 20.0)), display_name="Fast Kernel")
        st.record(make_result("slow", (20.0, 40.0)))
        st.record(make_result("twin", (20.0, 40.0), rel_noise=0.02))
        st.record(make_result("broken", verdict="fail", message="mismatch at [0, 1]"))
        st.record(make_result("cpu-one", (900.0, 1800.0), device="cpu", kind="cpu"))
        st.begin_run(TASK, "leaderboard", make_result("killed").submission)
    return d


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_markdown(results, capsys):
    code, out, _ = cli(capsys, "leaderboard", "--task", TASK, "--results-dir", results, "--format", "markdown")
    assert code == 0
    out = re.sub(r" +", " ", out)  # the table library pads cells to the column's width
    assert "### mxfp4_mm on NVIDIA H200 (cuda)" in out and "### mxfp4_mm on cpu (cpu)" in out
    assert "| rank | name | score (us) |" in out and "| m=4 n=2880 k=512 |" in out
    assert "| 1 | Fast Kernel | 14.14 |" in out
    assert "| =2 | slow |" in out and "| =2 | twin |" in out  # same means: a tie
    assert "2.00x slower (+14.14 us)" in out
    assert "**Not ranked**" in out and "| broken | fail | mismatch at [0, 1] |" in out
    assert "| killed | incomplete |" in out


def test_json_and_device_filter(results, capsys):
    code, out, _ = cli(
        capsys, "leaderboard", "--task", TASK, "--results-dir", results, "--format", "json", "--device", "NVIDIA H200"
    )
    board = json.loads(out)
    assert code == 0 and board["version"] == 6 and board["rule"] == "geom"
    (dev,) = board["devices"]
    assert [e["name"] for e in dev["ranked"]] == ["Fast Kernel", "slow", "twin"]
    assert [e["rank_label"] for e in dev["ranked"]] == ["1", "=2", "=2"]
    assert dev["ranked"][0]["shapes"][0]["mean_us"] == pytest.approx(10.0)
    assert [u["name"] for u in dev["unranked"]] == ["broken"]


def test_csv_and_table(results, capsys):
    code, out, _ = cli(capsys, "leaderboard", "--task", TASK, "--results-dir", results, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0
    ranked = [r for r in rows if r["section"] == "ranked"]
    assert {r["device"] for r in ranked} == {"NVIDIA H200", "cpu"}
    assert float(next(r for r in ranked if r["name"] == "Fast Kernel")["score_us"]) == pytest.approx(200**0.5)
    code, out, _ = cli(capsys, "leaderboard", "--task", TASK, "--results-dir", results)
    assert code == 0 and "Fast Kernel" in out and "not ranked:" in out


def test_unknown_device_and_postgres_are_usage_errors(results, capsys):
    code, _, err = cli(capsys, "leaderboard", "--task", TASK, "--results-dir", results, "--device", "MI355X")
    assert code == 2 and "choose one of: 'NVIDIA H200', 'cpu'" in err
    code, _, err = cli(capsys, "leaderboard", "--task", TASK, "--results-dir", "postgresql://127.0.0.1:1/x")
    assert code == 2 and "cannot connect to the PostgreSQL store" in err and "Traceback" not in err


def test_history(results, capsys):
    with open_store(results) as st:
        st.record(make_result("slow", (19.0, 39.0), mode="benchmark", started_at="2026-11-02T10:00:00+00:00"))
    code, out, _ = cli(capsys, "history", "slow", "--task", TASK, "--results-dir", results)
    assert code == 0 and out.count("slow") == 2 and "benchmark" in out and "leaderboard" in out
    code, out, _ = cli(capsys, "history", "slow", "--task", TASK, "--results-dir", results, "--format", "json")
    assert [r["mode"] for r in json.loads(out)["runs"]] == ["leaderboard", "benchmark"]
    code, _, err = cli(capsys, "history", "nope", "--task", TASK, "--results-dir", results)
    assert code == 2 and "'Fast Kernel'" in err


def test_files_that_share_a_name_are_told_apart_by_history_and_compare(tmp_path, capsys, monkeypatch):
    """Two files with one '# name:' header and different code: each file's history is its own runs, and
    comparing the two files compares them (it said they were the same submission)."""
    monkeypatch.chdir(tmp_path)
    store = str(tmp_path / "res")
    files = []
    with open_store(store) as st:
        for stem, means in (("a", (10.0, 20.0)), ("b", (20.0, 40.0))):
            f = tmp_path / f"{stem}.py"
            f.write_text(f"# name: shared\n# {stem}\ndef custom_kernel(data): pass\n")
            r = make_result(stem, means, sha=hashlib.sha256(f.read_bytes()).hexdigest())
            r.submission.path = str(f)
            st.record(r, display_name="shared")
            files.append(str(f))
    code, out, _ = cli(capsys, "history", files[0], "--task", TASK, "--results-dir", store, "--format", "json")
    assert code == 0 and [r["current"] for r in json.loads(out)["runs"]] == [True]  # a's run alone
    code, out, err = cli(capsys, "compare", *files, "--task", TASK, "--results-dir", store, "--format", "json")
    assert code == 0, err
    assert "2 \u00b1" in json.loads(out)["overall"]["text"]  # b's means are twice a's


def test_compare(results, capsys):
    code, out, _ = cli(
        capsys, "compare", "Fast Kernel", "slow", "--task", TASK, "--results-dir", results, "--device", "NVIDIA H200"
    )
    assert code == 0 and "overall (geometric mean over shapes): Fast Kernel is 2 \u00b1" in out
    assert "times faster than slow" in out
    code, out, _ = cli(capsys, "compare", "slow", "twin", "--task", TASK, "--results-dir", results, "--format", "json")
    data = json.loads(out)
    assert data["device"] == "NVIDIA H200" and data["overall"]["speedup"]["significant"] is False
    assert data["overall"]["text"].startswith("no significant difference")
    code, _, err = cli(capsys, "compare", "Fast Kernel", "cpu-one", "--task", TASK, "--results-dir", results)
    assert code == 2 and "never ran on the same device" in err


def test_compare_pools_every_run_of_a_side_as_the_board_does(results, capsys):
    with open_store(results) as st:  # a rerun of "slow" (the same content), slower this time
        again = make_result("slow", (22.0, 44.0), started_at="2026-11-02T10:00:00+00:00")
        st.record(again)
    argv = ["--task", TASK, "--results-dir", results]
    code, out, _ = cli(capsys, "compare", "Fast Kernel", "slow", *argv, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["version"] == 4 and data["mode"] == "leaderboard" and len(data["b"]["run_ids"]) == 2
    assert data["shapes"][0]["mean_us_b"] == pytest.approx(21.0)  # both runs' samples, not the best run's 20
    code, out, _ = cli(capsys, "leaderboard", *argv, "--format", "json")
    (h200,) = (d for d in json.loads(out)["devices"] if d["device"] == "NVIDIA H200")
    slow = next(e for e in h200["ranked"] if e["name"] == "slow")
    assert slow["run_ids"] == data["b"]["run_ids"] and slow["score_us"] == pytest.approx(
        math.sqrt(21.0 * 42.0), rel=1e-3
    )


def test_export(results, capsys, tmp_path):
    code, out, _ = cli(capsys, "export", "--task", TASK, "--results-dir", results, "--format", "json")
    data = json.loads(out)
    assert code == 0 and len(data["runs"]) == 6
    fast = next(r for r in data["runs"] if r["display_name"] == "Fast Kernel")
    assert RunResult.from_dict(fast["result"]).cases[1].stats.runs == 20
    assert next(r for r in data["runs"] if r["display_name"] == "killed")["result"] is None
    target = tmp_path / "runs.csv"
    code, _, _ = cli(
        capsys, "export", "--task", TASK, "--results-dir", results, "--format", "csv", "--output", str(target)
    )
    rows = list(csv.DictReader(target.open()))
    assert code == 0 and len(rows) == 5 * 3 + 1  # 5 finished runs x 3 cases, 1 interrupted run
    assert {r["kind"] for r in rows} == {"test", "benchmark", ""}


# --- run-all ---------------------------------------------------------------------------------------

SMALL_TASK = """\
implementation: mxfp4_mm
description: mxfp4_mm with tiny shapes, for CPU tests
tests:
  - {m: 8, n: 32, k: 64, seed: 1}
benchmarks:
  - {m: 8, n: 32, k: 64, seed: 2}
  - {m: 16, n: 32, k: 128, seed: 3}
ranking_by: geom
test_timeout: 120
benchmark_timeout: 120
ranked_timeout: 120
target_gpu: CPU
rtol: 0.01
atol: 0.01
timing:
  protocol: per_call
"""

GOOD = """\
# name: Reference Copy
from fp4_reference import mxfp4_mm_reference, unshuffle_scales_e8m0


def custom_kernel(data):
    a, _b, b_q, _b_shuffle, b_scale_sh = data
    n, k = b_q.shape[0], a.shape[1]
    return mxfp4_mm_reference(a, b_q, unshuffle_scales_e8m0(b_scale_sh, n, k // 32))
"""

BROKEN = """\
def custom_kernel(data):
    raise RuntimeError("deliberate failure inside custom_kernel")
"""


FIXTURES = ROOT / "tests" / "fixtures"


def _folder(tmp_path) -> tuple[Path, Path]:
    """A small-shape task (the harness's fixture when present) and a folder of tiny submissions."""
    task = FIXTURES / "tasks" / "mxfp4_small" / "task.yml"
    if not task.is_file():
        task = tmp_path / "mxfp4_small" / "task.yml"
        task.parent.mkdir()
        task.write_text(SMALL_TASK)
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "good.py").write_text(GOOD)
    raises = FIXTURES / "submissions" / "raises.py"
    (subs / "broken.py").write_text(raises.read_text() if raises.is_file() else BROKEN)
    (subs / "_helper.py").write_text("X = 1\n")
    (subs / "other.py").write_text("# task: nvfp4_gemm\ndef custom_kernel(data):\n    return data\n")
    return task, subs


def test_run_all_stores_every_submission_and_survives_a_harness_bug(tmp_path, capsys, monkeypatch):
    import harness.engine.runner as runner

    task, subs = _folder(tmp_path)
    seen = []

    def fake_run_submission(path, task_obj, mode, options=None, progress=None):
        seen.append(Path(path).name)
        if Path(path).name == "broken.py":
            raise RuntimeError("harness bug")
        result = make_result("good", (5.0, 6.0), task=task_obj.name, mode=mode, device="cpu", kind="cpu")
        result.score_us = 30**0.5
        return result

    monkeypatch.setattr(runner, "run_submission", fake_run_submission)
    res = str(tmp_path / "res")
    code, _, err = cli(
        capsys, "run-all", str(subs), "--task", str(task), "--mode", "test+benchmark", "--results-dir", res
    )
    assert seen == ["broken.py"] * 3 + ["good.py"]  # a harness error is retried (--retries 2), then given up
    assert err.count("retrying broken.py: harness internal error") == 2
    assert code == 75 and "[1/2] broken.py: failed (infrastructure)" in err and "[2/2] good.py: pass 5.48 us" in err
    assert "skipping other.py" in err
    with open_store(res) as st:
        runs = {r.display_name: r for r in st.runs(task="mxfp4_small")}
    assert "broken" not in runs  # the harness's failure is never the submission's verdict
    assert runs["Reference Copy"].verdict == "pass" and runs["Reference Copy"].complete


def test_ci_script_runs_run_all_for_real_on_cpu(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("ci_leaderboard", ROOT / "scripts" / "ci_leaderboard.py")
    ci = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ci)
    task, subs = _folder(tmp_path)
    res, out_file = tmp_path / "res", tmp_path / "board.md"
    code = ci.main(
        [
            "--task",
            str(task),
            "--submissions",
            str(subs),
            "--quick",
            "--device",
            "cpu",
            "--results-dir",
            str(res),
            "--out",
            str(out_file),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "[1/2] broken.py: error" in err and "[2/2] good.py: pass" in err
    assert out_file.read_text() == out
    out = re.sub(r" +", " ", out)
    assert "### mxfp4_small on " in out and "| 1 | Reference Copy |" in out
    assert "| broken | error |" in out and "deliberate failure" in out
    with open_store(str(res)) as st:
        assert sorted(r.verdict for r in st.runs(task="mxfp4_small")) == ["error", "pass"]


def test_mode_filter_and_rule_override(results, capsys):
    with open_store(results) as st:
        st.record(make_result("bench-only", (1.0, 400.0), mode="benchmark"))
    code, out, _ = cli(
        capsys,
        "leaderboard",
        "--task",
        TASK,
        "--results-dir",
        results,
        "--format",
        "json",
        "--mode",
        "benchmark",
        "--rule",
        "last",
        "--device",
        "NVIDIA H200",
    )
    (dev,) = json.loads(out)["devices"]
    assert code == 0 and json.loads(out)["rule"] == "last"
    assert [(e["name"], e["score_us"]) for e in dev["ranked"]] == [("bench-only", 400.0)]
