"""bench/ranks.py and bench/noise.py in their --quick CPU modes (plumbing: the fixture task on a loaded CPU
spreads far too much for the GPU's targets; the H200 figures come from the lead's run)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


def _bench(script: str, out: Path, *extra: str) -> dict:
    done = _run(script, "--quick", "--out", str(out), *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_ranks_quick_writes_boards_and_a_final(tmp_path):
    data = _bench("ranks.py", tmp_path / "ranks.json")
    assert data["device_kind"] == "cpu" and data["date"] and data["script"] == "bench/ranks.py"
    (task,) = data["tasks"]
    assert task["file"] == "submissions/torch_mxfp4.py"  # repo-relative
    (board,) = task["boards"]
    assert sorted(board["ranks"]) == ["copy0", "copy1"] and board["interval_source"] == ["blocks"]
    assert board["measured_again"] == {"copy0": 0, "copy1": 0}  # blocks redrawn after the escaped-work check, per file
    assert task["boards_all_tied"] == int(board["all_tied"])
    (final,) = task["finals"]
    assert sorted(final["ranks"]) == ["copy", "orig", "slow"] and final["rounds"] == 2
    # pairs left undecided at --max-rounds: the estimate of the rounds that would settle each
    assert len(final["rounds_to_settle"]) == len(final["undecided"])
    assert final["variant"]["spin_s"] > 0 and task["finals_passed"] == int(final["pass"])
    separate = task["slowdown_measured_separately"]
    assert set(separate["scores_us"]) == {"orig", "slow"} and separate["slowdown"] is not None
    # measured before the finals; a second attempt only when the first was more than 2x off the target
    assert len(separate["attempts"]) == 1 + separate["corrected"]
    if separate["corrected"]:
        first, measured = separate["attempts"][0]["variant"], separate["attempts"][0]["slowdown"]
        if measured > 0.04:  # too slow: fewer calls slowed, each as much
            assert separate["variant"]["every"] >= 2 * first["every"]
            assert separate["variant"]["extra_us"] == first["extra_us"]
        else:  # too fast: each slowed call slowed more
            assert separate["variant"]["extra_us"] == pytest.approx(first["extra_us"] * 0.04 / measured)
    assert final["variant"] == separate["variant"]  # the finals use the (corrected) variant
    assert task["final_block_wall_s"] > 0
    assert (
        data["complete"] is True
        and data["stopped"] is None
        and data["units_done"] == 1 + 1 + len(separate["attempts"]) + 1  # + the one block the finals' estimate uses
    )


def test_ranks_tiny_budget_keeps_the_board_and_says_incomplete(tmp_path):
    data = _bench("ranks.py", tmp_path / "ranks.json", "--budget-s", "0.01")
    assert data["complete"] is False and data["stopped"].startswith("budget:")
    (task,) = data["tasks"]
    # the first board starts (nothing known, nothing spent yet); then every estimate says "past the budget"
    assert len(task["boards"]) <= 1 and task.get("finals", []) == [] and data["units_done"] == len(task["boards"])


@pytest.mark.slow
def test_noise_quick_writes_the_spreads(tmp_path):
    data = _bench("noise.py", tmp_path / "noise.json")
    (task,) = data["tasks"]
    assert task["runs"] == 2 and task["blocks"] == 3 and task["protocol"]
    assert task["passed"] == 2, task["failures"]
    for key in ("within_block_rel_se", "between_block_sd", "between_run_sd", "coverage", "resolvable"):
        assert task[key] is not None, key
    assert [row["blocks"] for row in task["frontier"]][:3] == [1, 2, 3]


@pytest.mark.slow
def test_ranks_finals_start_from_an_earlier_boards_file(tmp_path):
    boards = _bench("ranks.py", tmp_path / "boards.json", "--finals", "0")
    assert boards["complete"] is True and boards["tasks"][0]["boards"] and "finals" not in boards["tasks"][0]
    data = _bench(
        "ranks.py", tmp_path / "finals.json", "--boards", "0", "--calibrate-from", str(tmp_path / "boards.json")
    )
    (task,) = data["tasks"]
    assert task["boards"] == [] and task["calibrated_from"]["file"] == "boards.json"
    assert task["calibrated_from"]["median_board_wall_s"] == boards["tasks"][0]["median_board_wall_s"]
    assert len(task["finals"]) == 1 and task["slowdown_measured_separately"]["attempts"]
    assert data["complete"] is True
    # --resume continues the finals with the variant measured there, which is not measured again
    more = _bench("ranks.py", tmp_path / "finals.json", "--boards", "0", "--finals", "2", "--resume")
    (again,) = more["tasks"]
    assert again["slowdown_measured_separately"] == task["slowdown_measured_separately"]
    assert again["finals"][0] == task["finals"][0] and len(again["finals"]) == 2
    assert again["finals"][1]["variant"] == task["finals"][0]["variant"] and again["finals"][1]["commit"]
    assert again["finals_passed"] == sum(f["pass"] for f in again["finals"])
    assert more["units_done"] == data["units_done"] + 1 and len(more["sessions"]) == 2 and more["complete"] is True
    for final in again["finals"]:  # each entry's block score of every round the final ran
        scores = final["block_scores_us"]
        assert sorted(scores) == ["copy", "orig", "slow"] and all(len(v) == final["rounds"] for v in scores.values())
        assert all(x is not None and x > 0 for v in scores.values() for x in v)
    other = _run(
        "ranks.py", "--quick", "--boards", "0", "--resume", "--slowdown", "0.1", "--out", str(tmp_path / "finals.json")
    )
    assert other.returncode == 2 and "--slowdown 0.04, not 0.1" in other.stderr


@pytest.mark.slow
def test_ranks_measures_the_slowdown_over_several_pairs_of_runs(tmp_path):
    """--slowdown-pairs 2: the variant's slowdown from two pairs of ranked runs (the geometric mean of their
    ratios) with its 95% interval, as nvfp4_gemm needs where one pair spreads a few percent."""
    data = _bench("ranks.py", tmp_path / "ranks.json", "--boards", "1", "--finals", "0")
    assert data["tasks"][0]["boards"]  # the board the variant is calibrated from; now its slowdown alone:
    data = _bench(
        "ranks.py",
        tmp_path / "pairs.json",
        "--boards",
        "0",
        "--finals",
        "1",
        "--slowdown-pairs",
        "2",
        "--max-rounds",
        "2",
        "--calibrate-from",
        str(tmp_path / "ranks.json"),
    )
    for attempt in data["tasks"][0]["slowdown_measured_separately"]["attempts"]:
        pairs = attempt["pairs"]
        assert len(pairs) == 2 and all(p["orig"] and p["slow"] for p in pairs)
        ratio = math.exp(sum(math.log(p["slow"] / p["orig"]) for p in pairs) / 2) - 1
        assert attempt["slowdown"] == pytest.approx(ratio)
        low, high = attempt["interval"]
        assert low <= attempt["slowdown"] <= high


def test_ranks_calibrate_from_a_file_without_the_task_is_a_usage_error(tmp_path):
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"tasks": [{"task": "nvfp4_gemm", "boards": []}]}))
    done = _run(
        "ranks.py", "--quick", "--boards", "0", "--calibrate-from", str(bad), "--out", str(tmp_path / "ranks.json")
    )
    assert done.returncode == 2 and "--calibrate-from" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "ranks.json").exists()  # a usage error writes nothing


@pytest.mark.slow
def test_ranks_resume_adds_boards_to_an_earlier_file_and_keeps_its_sessions(tmp_path):
    out = tmp_path / "boards.json"
    first = _bench("ranks.py", out, "--finals", "0", "--boards", "0")
    assert first["tasks"][0]["boards"] == [] and len(first["sessions"]) == 1
    data = _bench("ranks.py", out, "--finals", "0", "--boards", "1", "--resume")
    (task,) = data["tasks"]
    (board,) = task["boards"]
    assert board["commit"] == data["commit"] and board["date"] and len(data["sessions"]) == 2
    assert data["sessions"][0]["date"] == first["date"] and data["complete"] is True
    assert data["units_done"] == 1 and data["elapsed_s"] > first["elapsed_s"]
    again = _bench("ranks.py", out, "--finals", "0", "--boards", "1", "--resume")  # nothing left to add
    assert again["tasks"][0]["boards"] == [board] and len(again["sessions"]) == 3
    # the file's totals count every call: a --resume that added nothing keeps the earlier calls' time
    assert again["units_done"] == 1 and again["elapsed_s"] >= data["elapsed_s"]
    assert again["tasks"][0]["wall_s"] >= data["tasks"][0]["wall_s"] >= board["wall_s"]
    # boards of another warm-up are not added to these
    other_warmup = _run("ranks.py", "--quick", "--finals", "0", "--resume", "--warmup-chunks", "1", "--out", str(out))
    assert other_warmup.returncode == 2 and "--warmup-chunks 0, not 1" in other_warmup.stderr
    assert json.loads(out.read_text())["tasks"][0]["boards"] == [board]


def test_ranks_resume_of_another_scripts_file_is_a_usage_error(tmp_path):
    out = tmp_path / "noise.json"
    out.write_text(json.dumps({"script": "bench/noise.py", "device": "cpu", "tasks": []}))
    done = _run("ranks.py", "--quick", "--finals", "0", "--resume", "--out", str(out))
    assert done.returncode == 2 and "--resume" in done.stderr and "Traceback" not in done.stderr
    assert json.loads(out.read_text())["script"] == "bench/noise.py"  # left as it was


def _board_file(path: Path, device: str, walls: list[float], halves: list[float], tied: list[bool]) -> Path:
    boards = [
        {"all_tied": t, "half_width_rel": [h, h], "wall_s": w, "commit": "c", "date": "d"}
        for w, h, t in zip(walls, halves, tied)
    ]
    session = {"commit": "c", "date": f"{device} {walls}", "device": device}
    doc = {"script": "bench/ranks.py", "device": device, "config": {"warmup_chunks": 0}, "sessions": [session]}
    doc |= {"units_done": len(boards), "elapsed_s": sum(walls), "complete": False, "stopped": "budget: ..."}
    task = {"task": "nvfp4_gemm", "file": "submissions/triton_nvfp4.py", "boards": boards, "wall_s": sum(walls)}
    doc["tasks"] = [task]
    path.write_text(json.dumps(doc))
    return path


def test_ranks_merge_adds_a_second_files_boards_as_resume_would(tmp_path):
    """Two device calls on one lease, the second without the first's file: --merge joins them (no run)."""
    out = _board_file(tmp_path / "boards.json", "H100", [80.0, 90.0], [0.07, 0.08], [True, True])
    second = _board_file(tmp_path / "second.json", "H100", [70.0], [0.06], [False])
    done = _run("ranks.py", "--merge", str(second), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    (task,) = data["tasks"]
    assert [b["wall_s"] for b in task["boards"]] == [80.0, 90.0, 70.0] and len(data["sessions"]) == 2
    assert task["boards_all_tied"] == 2 and task["median_board_wall_s"] == 80.0
    assert task["median_half_width_rel"] == pytest.approx(0.07) and data["units_done"] == 3
    assert data["elapsed_s"] == pytest.approx(240.0) and task["wall_s"] == pytest.approx(240.0)
    assert data["merged"] == ["second.json: 1 session(s), added by --merge"]
    other = _board_file(tmp_path / "h200.json", "H200", [60.0], [0.03], [True])
    done = _run("ranks.py", "--merge", str(other), "--out", str(out))
    assert done.returncode == 2 and "boards of two devices are not pooled" in done.stderr
    assert len(json.loads(out.read_text())["tasks"][0]["boards"]) == 3  # left as it was


def test_noise_from_stored_runs_finds_a_first_sample_that_is_slower(tmp_path):
    """--from-runs reads stored ranked runs (no run): here one whose every block's first sample of the first
    shape is 30% slower than the rest, and of the second shape not."""
    from harness.results import BlockRecord, Stats
    from tests.helpers import make_result

    r = make_result("slow_start", (10.0, 20.0), n=2)
    per_block = [[13.0, 10.0, 10.0, 10.0], [20.0, 20.0, 20.0, 20.0]]  # us: shape 0, shape 1 (one block each)
    cases = r.benchmark_cases()
    for case, xs in zip(cases, per_block):
        case.stats = Stats.from_samples([x * 1e3 for x in xs * 2])  # two blocks of four samples
    r.blocks = [BlockRecord(b, b, [0, 1], [10.75, 20.0], [4, 4], 14.7) for b in range(2)]
    path = tmp_path / "run.json"
    path.write_text(r.to_json())
    done = _run("noise.py", "--from-runs", str(path))
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout)
    assert figures["first_sample_excess"] == pytest.approx([0.3, 0.0]) and figures["warmup_chunks"] == [0]
    bad = _run("noise.py", "--from-runs", str(tmp_path / "none.json"))
    assert bad.returncode == 2 and "--from-runs" in bad.stderr and "Traceback" not in bad.stderr


def test_ranks_merge_adds_a_second_files_finals(tmp_path):
    """A finals call that started without the first call's file: --merge adds its finals and recounts them."""

    def finals_file(path: Path, passes: list[bool], slowdowns: list[float]) -> Path:
        finals = [{"pass": p, "final_slowdown": s, "final_wall_s": 60.0} for p, s in zip(passes, slowdowns)]
        doc = {"script": "bench/ranks.py", "device": "H100", "config": {"warmup_chunks": 0}, "sessions": [{}]}
        doc |= {"units_done": len(finals), "elapsed_s": 60.0 * len(finals), "complete": True, "stopped": None}
        task = {"task": "nvfp4_gemm", "boards": [], "finals": finals, "finals_passed": sum(passes)}
        doc["tasks"] = [task | {"slowdown_measured_separately": {"slowdown": 0.04}}]
        path.write_text(json.dumps(doc))
        return path

    out = finals_file(tmp_path / "finals.json", [True, True], [0.04, 0.05])
    second = finals_file(tmp_path / "second.json", [False], [0.01])
    done = _run("ranks.py", "--merge", str(second), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    (task,) = json.loads(out.read_text())["tasks"]
    assert [f["final_slowdown"] for f in task["finals"]] == [0.04, 0.05, 0.01]
    assert task["finals_passed"] == 2 and task["median_final_slowdown"] == 0.04
    assert "finals passed 2/3" in done.stderr
